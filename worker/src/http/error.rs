//! The one place worker errors become HTTP statuses. The match is exhaustive on purpose:
//! a new variant must decide its status here.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use cocktail_common::oip::ErrorBody;

use crate::WorkerError;

impl ResponseError for WorkerError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidInput { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::MalformedJson(_) => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Draining => StatusCode::SERVICE_UNAVAILABLE,
            Self::UnknownModel { .. } => StatusCode::NOT_FOUND,
            Self::Runtime(_)
            | Self::Ort(_)
            | Self::ModelMismatch { .. }
            | Self::Tokenizer { .. }
            | Self::Emulation(_)
            | Self::Common(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        // Internal details stay in the log; the client learns only that it was not its fault.
        let error = if status.is_server_error() && !matches!(self, Self::Draining) {
            tracing::error!(error = %self, "request failed");
            "internal error while running the model".to_owned()
        } else {
            self.to_string()
        };
        let mut response = HttpResponse::build(status);
        if matches!(self, Self::Overloaded { .. } | Self::Draining) {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from_static("1")));
        }
        response.json(ErrorBody {
            error,
            error_type: self.kind().to_owned(),
        })
    }
}
