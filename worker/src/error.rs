//! The error enum of the worker crate; `http::error` maps it to HTTP statuses.

use cocktail_common::CommonError;

/// Everything the worker can fail at. Input errors name the field and the limit.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Runtime(#[from] cocktail_onnx::OnnxError),
    #[error("ONNX Runtime: {0}")]
    Ort(String),
    #[error("model `{model}` does not match the manifest: {message}")]
    ModelMismatch { model: String, message: String },
    #[error("cannot load tokenizer `{path}`: {message}")]
    Tokenizer { path: String, message: String },
    #[error("invalid input `{field}`: {message}")]
    InvalidInput {
        field: &'static str,
        message: String,
    },
    #[error("malformed JSON body: {0}")]
    MalformedJson(String),
    #[error("body is over the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("overloaded: {capacity} items are in service or queued; retry shortly")]
    Overloaded { capacity: usize },
    #[error("this worker is draining and takes no new requests")]
    Draining,
    #[error("this worker serves `{served}`, not `{requested}`")]
    UnknownModel { served: String, requested: String },
    #[error("cannot emulate the instance type: {0}")]
    Emulation(String),
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

    /// A short, bounded name for metrics and the `error_type` of error bodies.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Runtime(_) => "runtime",
            Self::Ort(_) => "inference",
            Self::ModelMismatch { .. } | Self::Tokenizer { .. } | Self::Common(_) => "model",
            Self::Emulation(_) => "emulation",
            Self::InvalidInput { .. } => "invalid_input",
            Self::MalformedJson(_) => "malformed_json",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::Overloaded { .. } => "overloaded",
            Self::Draining => "draining",
            Self::UnknownModel { .. } => "unknown_model",
        }
    }
}

impl From<cocktail_common::oip::tensor::WireError> for WorkerError {
    fn from(error: cocktail_common::oip::tensor::WireError) -> Self {
        use cocktail_common::oip::tensor::WireError;
        match error {
            WireError::Malformed(message) => Self::MalformedJson(message),
            WireError::Invalid { field, message } => Self::InvalidInput { field, message },
        }
    }
}

impl From<ort::Error> for WorkerError {
    fn from(e: ort::Error) -> Self {
        Self::Ort(e.to_string())
    }
}
