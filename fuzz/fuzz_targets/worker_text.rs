//! Text through a worker's WordPiece tokenizer (the zoo's `sentiment/tokenizer.json`
//! with the model's truncation). Any UTF-8 gives ids inside the vocabulary, at most
//! `max_tokens` of them, or a 4xx naming `text`.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use cocktail_fuzz::text_preprocessor;
use cocktail_worker::WorkerError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pre = text_preprocessor();
    match pre.row(text) {
        Ok(row) => {
            assert!(
                !row.ids.is_empty() && row.ids.len() <= pre.max_tokens(),
                "{row:?}"
            );
            assert_eq!(row.ids.len(), row.mask.len());
            let vocab = pre.vocab_size() as i64;
            assert!(
                row.ids.iter().all(|&id| (0..vocab).contains(&id)),
                "{row:?}"
            );
        }
        Err(e) => {
            assert!(e.status_code().is_client_error(), "{e} is not a 4xx");
            assert!(
                matches!(e, WorkerError::InvalidInput { field: "text", .. }),
                "{e:?}"
            );
        }
    }
});
