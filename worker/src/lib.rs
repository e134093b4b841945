//! A Cocktail-rs worker serves one zoo model: it turns raw inputs (images, text) into the
//! model's tensors exactly as training did, batches requests adaptively (MArk §4.3),
//! admits at most its packing factor plus a bounded queue, and runs a [`Backend`] (ONNX
//! Runtime) on its own thread.

pub mod backend;
pub mod batcher;
pub mod control;
pub mod error;
pub mod http;
pub mod metrics;
pub mod preprocess;
pub mod request;
pub mod server;

pub use backend::{Backend, Batch, OnnxBackend, Probabilities};
pub use error::WorkerError;
pub use preprocess::Preprocessor;
