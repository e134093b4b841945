//! The error enum of the worker crate.

use cocktail_common::CommonError;

/// Everything the worker can fail at. Input errors name the field and the limit.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "ONNX Runtime library not found at {tried}. Run `scripts/setup.sh` (it fetches onnxruntime=={version} from PyPI into .deps/), or set ORT_DYLIB_PATH / pass --ort-lib with the path of libonnxruntime.so.{version}"
    )]
    RuntimeMissing { tried: String, version: &'static str },
    #[error("cannot load ONNX Runtime from `{path}`: {message}")]
    RuntimeLoad { path: String, message: String },
    #[error("ONNX Runtime: {0}")]
    Ort(String),
    #[error("model `{model}` does not match the manifest: {message}")]
    ModelMismatch { model: String, message: String },
    #[error("cannot load tokenizer `{path}`: {message}")]
    Tokenizer { path: String, message: String },
    #[error("invalid input `{field}`: {message}")]
    InvalidInput { field: &'static str, message: String },
    #[error(transparent)]
    Common(#[from] CommonError),
}

impl WorkerError {
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::InvalidInput {
            field,
            message: message.into(),
        }
    }
}

impl From<ort::Error> for WorkerError {
    fn from(e: ort::Error) -> Self {
        Self::Ort(e.to_string())
    }
}
