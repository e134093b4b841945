//! The master's HTTP surface: OIP v2 for ensembles, `/v1/classify`, `/v1/feedback`, the
//! worker control plane, `/openapi.json`, `/metrics` and the `/dashboard`. Handlers are thin: they read
//! the body, call [`crate::serving::request`] and [`crate::Master`], and shape the answer.

mod auth;
mod certificate;
mod classify;
pub mod dashboard;
mod error;
mod openapi;
pub mod present;
mod repository;
mod routes;
mod views;

pub use classify::classify_request;
pub use routes::{AppState, configure};
