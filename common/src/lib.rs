//! Types shared by every Cocktail-rs crate: the model-zoo manifest (`zoo.toml`), the
//! committed test sets and the recorded per-model predictions. No HTTP framework and no
//! async runtime live here, so the simulator and the tests can use it as plain data.

pub mod auth;
pub mod batching;
pub mod catalog;
pub mod control;
pub mod error;
pub mod latency;
pub mod oip;
pub mod predictions;
pub mod preprocess;
pub mod redact;
pub mod testset;
pub mod whole;
pub mod zoo;

pub use error::CommonError;
pub use predictions::{Predictions, Probabilities};
pub use testset::{Input, TestSet};
pub use zoo::{ModelEntry, Preprocess, Profile, TaskSpec, Zoo};
