//! The one place master errors become HTTP statuses. The match is exhaustive on purpose:
//! a new variant must decide its status here.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use cocktail_common::oip::ErrorBody;

use super::views::MembersFailed;
use crate::MasterError;

impl ResponseError for MasterError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidInput { .. } | Self::ZooRefused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Malformed(_) => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::RateLimited { .. } | Self::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::UnknownTask { .. }
            | Self::UnknownRequest { .. }
            | Self::UnknownInstance { .. }
            | Self::UnknownPool { .. }
            | Self::NoController => StatusCode::NOT_FOUND,
            Self::NoWorkers { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Rejected { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY)
            }
            Self::AllMembersFailed(_) | Self::Provider(_) => StatusCode::BAD_GATEWAY,
            Self::AllMembersLate(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Common(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let error = if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %self, "request failed");
            "internal error in the master".to_owned()
        } else {
            self.to_string()
        };
        let mut response = HttpResponse::build(status);
        if matches!(self, Self::NoWorkers { .. }) {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from_static("1")));
        }
        match self {
            Self::Unauthorized { realm, .. } => {
                if let Ok(value) = HeaderValue::from_str(&format!("Bearer realm=\"{realm}\"")) {
                    response.insert_header((header::WWW_AUTHENTICATE, value));
                }
            }
            Self::RateLimited { retry_after, .. } | Self::Overloaded { retry_after, .. } => {
                let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                response.insert_header((header::RETRY_AFTER, seconds.to_string()));
            }
            _ => {}
        }
        if let Self::AllMembersFailed(failures) | Self::AllMembersLate(failures) = self {
            return response.json(MembersFailed {
                error,
                error_type: self.kind().to_owned(),
                members: failures.clone(),
            });
        }
        response.json(ErrorBody {
            error,
            error_type: self.kind().to_owned(),
        })
    }
}
