//! The control-plane bodies between workers and the master (`cocktail_common::control`):
//! each message type deserialised from the same bytes, as the master's handlers (and,
//! for `Registered`, the worker) do, then checked as the master checks a registration.
//! A message that parses survives a round trip unchanged; an accepted registration
//! respects the limits; a refused one is a 4xx naming the field.
#![no_main]
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target reports a broken invariant by panicking"
)]

use actix_web::ResponseError as _;
use cocktail_common::control::{Deregistration, Heartbeat, Notice, Registered, Registration};
use cocktail_fuzz::TASKS;
use cocktail_master::MasterError;
use cocktail_master::serving::control::{MAX_ID_BYTES, check_registration};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

fuzz_target!(|data: &[u8]| {
    if let Some(registration) = round_trip::<Registration>(data) {
        match check_registration(&TASKS, &registration) {
            Ok(()) => {
                assert!((1..=MAX_ID_BYTES).contains(&registration.id.len()));
                assert!(
                    registration.url.starts_with("http://")
                        || registration.url.starts_with("https://")
                );
                assert!(
                    TASKS
                        .values()
                        .any(|t| t.model_index(&registration.model).is_some())
                );
            }
            Err(e) => {
                assert!(e.status_code().is_client_error(), "{e} is not a 4xx");
                assert!(matches!(e, MasterError::InvalidInput { .. }), "{e:?}");
            }
        }
    }
    round_trip::<Heartbeat>(data);
    round_trip::<Notice>(data);
    round_trip::<Deregistration>(data);
    round_trip::<Registered>(data);
});

/// The message, when the bytes are one; it must encode and decode back to itself.
fn round_trip<T>(data: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let message: T = serde_json::from_slice(data).ok()?;
    let encoded = serde_json::to_vec(&message).expect("a message encodes");
    let decoded: T = serde_json::from_slice(&encoded).expect("an encoded message decodes");
    assert_eq!(decoded, message);
    Some(message)
}
