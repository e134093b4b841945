//! `POST /v2/models/{task}/infer` bodies through the master's parser, for both tasks
//! (images and text), as JSON and with binary tensors. An accepted request respects every
//! documented limit and its members get a body a worker can read; a refused one is a
//! 4xx, never a 5xx.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use cocktail_common::oip::binary;
use cocktail_common::oip::limits::MAX_ITEMS;
use cocktail_fuzz::{TASKS, bodies};
use cocktail_master::MasterError;
use cocktail_master::serving::request::{MAX_LATENCY_MS, MemberWire, parse_infer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for (task, (body, header)) in TASKS
        .values()
        .flat_map(|t| bodies(data).into_iter().map(move |b| (t, b)))
    {
        match parse_infer(task, body, header, MemberWire::Binary) {
            Ok(request) => {
                assert!(
                    (1..=MAX_ITEMS).contains(&request.items),
                    "{}",
                    request.items
                );
                let member =
                    binary::decode_request(request.member.body.clone(), request.member.header)
                        .expect("the members get a body they can read");
                assert!(
                    member.inputs.iter().all(|i| i.raw.is_some()),
                    "the members get binary tensors"
                );
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
