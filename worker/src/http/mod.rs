//! The worker's HTTP surface: Open Inference Protocol v2 plus `/metrics` and
//! `/openapi.json`. Handlers are thin: they read the body, call `request::prepare`,
//! admit, batch, and answer.

mod error;
pub mod guard;
pub mod openapi;
mod routes;

pub use routes::{AppState, configure};
