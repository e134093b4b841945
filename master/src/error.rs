//! The error enum of the master crate; `http::error` maps it to HTTP statuses.

use cocktail_common::CommonError;

/// Why one ensemble member gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct MemberFailure {
    pub model: String,
    pub error: String,
}

/// Everything the master can fail at. Input errors name the field and the limit.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    #[error("invalid input `{field}`: {message}")]
    InvalidInput { field: String, message: String },
    #[error("malformed body: {0}")]
    Malformed(String),
    #[error("body is over the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("unsupported media type: {0}")]
    UnsupportedMediaType(String),
    #[error("unknown task `{task}`; this master serves {known}")]
    UnknownTask { task: String, known: String },
    #[error("no request `{id}` is waiting for feedback (unknown, already labelled or expired)")]
    UnknownRequest { id: String },
    /// No or the wrong bearer secret; `realm` says which (`cluster`, `admin`, `api-key`).
    #[error("{message}")]
    Unauthorized {
        realm: &'static str,
        message: String,
    },
    /// Authenticated, but not allowed: names the field and the rule.
    #[error("forbidden `{field}`: {message}")]
    Forbidden { field: String, message: String },
    #[error("API key `{key}` is over its requests-per-second budget; retry after {retry_after:?}")]
    RateLimited {
        key: String,
        retry_after: std::time::Duration,
    },
    /// A member's pool has so many calls queued that this one, after its wait, could
    /// not finish before the request stops waiting: the request is refused at once
    /// rather than failed later.
    #[error(
        "overloaded: `{model}` has {queued} calls queued for {slots} slots, about {wait_ms:.0} ms of waiting before a call, too long for a request with a {latency_ms} ms target; retry after {retry_after:?}"
    )]
    Overloaded {
        model: String,
        queued: usize,
        slots: usize,
        wait_ms: f64,
        latency_ms: f64,
        retry_after: std::time::Duration,
    },
    #[error("no worker instance `{id}` is registered")]
    UnknownInstance { id: String },
    #[error("`{model}` is not a pool this controller manages")]
    UnknownPool { model: String },
    #[error("no worker of task `{task}` is registered yet; retry shortly")]
    NoWorkers { task: String },
    /// Every member refused the input as the client's mistake; their answer is passed on.
    #[error("{message}")]
    Rejected {
        status: u16,
        error_type: String,
        message: String,
    },
    #[error("no ensemble member answered: {}", summary(.0))]
    AllMembersFailed(Vec<MemberFailure>),
    /// Every member was still at work when the request stopped waiting (its latency
    /// target, plus `--deadline-grace-ms` unless the deadline is strict).
    #[error("no ensemble member answered in time: {}", summary(.0))]
    AllMembersLate(Vec<MemberFailure>),
    #[error("this master runs without a resource controller (start it with `--provider local`)")]
    NoController,
    /// A zoo reload found the manifest broken: the zoo served stays.
    #[error("zoo reload refused, the zoo served is unchanged: {0}")]
    ZooRefused(String),
    #[error("the cloud provider failed: {0}")]
    Provider(String),
    #[error(transparent)]
    Common(#[from] CommonError),
    #[error("{0}")]
    Internal(String),
}

fn summary(failures: &[MemberFailure]) -> String {
    failures
        .iter()
        .map(|f| format!("{}: {}", f.model, f.error))
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<cocktail_common::oip::tensor::WireError> for MasterError {
    fn from(error: cocktail_common::oip::tensor::WireError) -> Self {
        use cocktail_common::oip::tensor::WireError;
        match error {
            WireError::Malformed(message) => Self::Malformed(message),
            WireError::Invalid { field, message } => Self::invalid(field, message),
        }
    }
}

impl MasterError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidInput {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A short, bounded name for metrics and the `error_type` of error bodies.
    pub fn kind(&self) -> &str {
        match self {
            Self::InvalidInput { .. } => "invalid_input",
            Self::Malformed(_) => "malformed",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::UnknownTask { .. } => "unknown_task",
            Self::UnknownRequest { .. } => "unknown_request",
            Self::Unauthorized { .. } => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::RateLimited { .. } => "rate_limited",
            Self::Overloaded { .. } => "overloaded",
            Self::UnknownInstance { .. } => "unknown_instance",
            Self::UnknownPool { .. } => "unknown_pool",
            Self::NoWorkers { .. } => "no_workers",
            Self::Rejected { error_type, .. } => error_type,
            Self::AllMembersFailed(_) => "members_failed",
            Self::AllMembersLate(_) => "members_late",
            Self::NoController => "no_controller",
            Self::Provider(_) => "provider",
            Self::ZooRefused(_) => "zoo_refused",
            Self::Common(_) | Self::Internal(_) => "internal",
        }
    }
}
