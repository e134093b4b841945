//! The worker's HTTP surface: Open Inference Protocol v2 plus `/metrics`. Handlers are
//! thin: they read the body, call `request::prepare`, admit, batch, and answer.

mod error;
mod routes;

pub use routes::{AppState, configure};
