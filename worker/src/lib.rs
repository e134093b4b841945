//! A Cocktail-rs worker serves one zoo model: it turns raw inputs (images, text) into the
//! model's tensors exactly as training did, and runs them through a [`Backend`] (ONNX
//! Runtime by default).

pub mod backend;
pub mod error;
pub mod preprocess;
pub mod runtime;

pub use backend::{Backend, Batch, OnnxBackend, Probabilities};
pub use error::WorkerError;
pub use preprocess::Preprocessor;
