//! `POST /v2/models/{task}/infer` bodies through the master's parser, for both tasks
//! (images and text). An accepted request respects every documented limit; a refused
//! one is a 4xx, never a 5xx.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use bytes::Bytes;
use cocktail_fuzz::TASKS;
use cocktail_master::MasterError;
use cocktail_master::request::{MAX_ITEMS, MAX_LATENCY_MS, parse_infer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for task in TASKS.values() {
        let body = Bytes::copy_from_slice(data);
        match parse_infer(task, body) {
            Ok(request) => {
                assert!(
                    (1..=MAX_ITEMS).contains(&request.items),
                    "{}",
                    request.items
                );
                assert_eq!(request.body, data, "the members get the client's own bytes");
                let c = request.constraint;
                assert!(
                    c.latency_ms > 0.0 && c.latency_ms <= MAX_LATENCY_MS,
                    "{c:?}"
                );
                assert!((0.0..=1.0).contains(&c.accuracy), "{c:?}");
                if let Some(labels) = &request.labels {
                    assert_eq!(labels.len(), request.items);
                    assert!(labels.iter().all(|&l| l < task.labels.len()), "{labels:?}");
                }
            }
            Err(e) => {
                assert!(e.status_code().is_client_error(), "{e} is not a 4xx");
                assert!(
                    matches!(
                        e,
                        MasterError::InvalidInput { .. } | MasterError::Malformed(_)
                    ),
                    "{e:?}"
                );
            }
        }
    }
});
