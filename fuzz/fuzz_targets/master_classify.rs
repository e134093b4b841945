//! `POST /v1/classify` bodies (JSON or multipart) through the master's parser
//! (`http::classify_request`, which the handler calls). Input: the first byte picks the
//! chunk size the body arrives in (1 to 64 bytes, as multipart parsing is incremental),
//! the next line is the `Content-Type` header, the rest the body. An accepted request is
//! one item whose body passes `/v2/models/{task}/infer`'s own checks; a refused one is a
//! 4xx naming the problem, never a 5xx.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use actix_web::error::PayloadError;
use actix_web::http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use bytes::Bytes;
use cocktail_common::oip::binary;
use cocktail_fuzz::{MASTER, RUNTIME};
use cocktail_master::http::classify_request;
use cocktail_master::serving::request::{MemberWire, parse_infer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk % 64) + 1;
    let (content_type, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(end) => (&rest[..end], &rest[end + 1..]),
        None => (&rest[..0], rest),
    };
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_bytes(content_type) {
        headers.insert(CONTENT_TYPE, value);
    }
    let chunks: Vec<Result<Bytes, PayloadError>> = body
        .chunks(chunk)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let payload = futures_util::stream::iter(chunks);
    match RUNTIME.block_on(classify_request(&MASTER, &headers, payload)) {
        Ok((task, request)) => {
            assert_eq!(request.items, 1);
            let table = MASTER
                .task(&task)
                .expect("an accepted request names a task");
            // What the members get, with the constraint as parameters, is what a client
            // could have sent to /v2 directly.
            let mut oip =
                binary::decode_request(request.member.body.clone(), request.member.header)
                    .expect("the members' body is OIP");
            let c = request.constraint;
            oip.parameters = Some(
                [
                    ("latency_ms".to_owned(), c.latency_ms.into()),
                    ("accuracy".to_owned(), c.accuracy.into()),
                ]
                .into_iter()
                .collect(),
            );
            oip.outputs = None;
            let (body, header) = binary::encode_request(oip).expect("OIP encodes");
            let again = parse_infer(&table, body, header, MemberWire::Binary)
                .unwrap_or_else(|e| panic!("/v1/classify made a body /v2 refuses: {e}"));
            assert_eq!(again.items, 1);
            assert_eq!(again.constraint.latency_ms, c.latency_ms);
            if let Some(labels) = &request.labels {
                assert_eq!(labels.len(), 1);
                assert!(labels[0] < table.labels.len());
            }
        }
        Err(e) => assert!(e.status_code().is_client_error(), "{e} is not a 4xx"),
    }
});
