//! OIP v2 bodies (JSON, and JSON with binary tensors) through a worker's parser (`request::parse_body`, which the
//! handler calls), for an image model (BYTES base64 PNG/JPEG or FP32 tensors) and a text
//! model (BYTES text or INT64 `input_ids` and `attention_mask`). Accepted items are
//! model-ready: counts within MAX_ITEMS, tensor sizes that match the model, finite
//! values, token ids inside the vocabulary; they join into a batch. Refusals are 4xx.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use cocktail_common::oip::limits::MAX_ITEMS;
use cocktail_fuzz::{IMAGE, TEXT, bodies, image_preprocessor, text_preprocessor};
use cocktail_worker::preprocess::PixelValues;
use cocktail_worker::request::{Prepared, join, parse_body};
use cocktail_worker::{Batch, Preprocessor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for (pre, (body, header)) in [&*IMAGE, &*TEXT]
        .into_iter()
        .flat_map(|p| bodies(data).into_iter().map(move |b| (p, b)))
    {
        match parse_body(body, false, header, pre) {
            Ok((prepared, _request)) => check(&prepared, pre),
            Err(e) => assert!(e.status_code().is_client_error(), "{e} is not a 4xx"),
        }
    }
});

/// What the batcher and the backend rely on.
pub fn check(prepared: &Prepared, pre: &Preprocessor) {
    assert!(
        (1..=MAX_ITEMS).contains(&prepared.len()),
        "{}",
        prepared.len()
    );
    match prepared {
        Prepared::Images(items) => {
            let per_item = image_preprocessor().item_len();
            for item in items {
                let PixelValues::F32(values) = item else {
                    panic!("fashion takes float32")
                };
                assert_eq!(values.len(), per_item);
                assert!(
                    values.iter().all(|v| v.is_finite()),
                    "a value is not finite"
                );
            }
        }
        Prepared::Tensors(_) => panic!("neither fuzzed model takes tensors"),
        Prepared::Tokens(rows) => {
            let text = text_preprocessor();
            let vocab = text.vocab_size() as i64;
            for row in rows {
                assert!(!row.ids.is_empty() && row.ids.len() <= text.max_tokens());
                assert_eq!(row.ids.len(), row.mask.len());
                assert!(
                    row.ids.iter().all(|&id| (0..vocab).contains(&id)),
                    "{row:?}"
                );
                assert!(row.mask.iter().all(|&m| m == 0 || m == 1), "{row:?}");
            }
        }
    }
    match join(&[prepared, prepared], pre).expect("an accepted request joins a batch") {
        Batch::Images(array) => assert_eq!(array.shape()[0], 2 * prepared.len()),
        Batch::Tokens { input_ids, .. } => assert_eq!(input_ids.nrows(), 2 * prepared.len()),
        other @ (Batch::ImagesU8(_) | Batch::Tensors { .. }) => {
            panic!("neither fuzzed model makes {other:?}")
        }
    }
}
