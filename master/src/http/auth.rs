//! The master's callers, as request extractors: a handler that takes [`Admin`],
//! [`Cluster`] or [`Client`] runs only for a caller that presented the right bearer
//! secret (`crate::access`), and its signature says so. They are listed first among a
//! handler's arguments, so a refused call is answered before its body is read.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpRequest, web};
use cocktail_common::auth::{Secret, bearer_token};

use super::routes::AppState;
use crate::MasterError;
use crate::access::keys::Refusal;

fn state(request: &HttpRequest) -> Result<&web::Data<AppState>, MasterError> {
    request
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| MasterError::Internal("the app state is missing".into()))
}

fn token(request: &HttpRequest) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
}

/// `Ok` when `secret` is off or presented.
fn check(
    request: &HttpRequest,
    secret: Option<&Secret>,
    realm: &'static str,
    what: &str,
) -> Result<(), MasterError> {
    match secret {
        Some(secret) if !token(request).is_some_and(|t| secret.matches(t)) => {
            metrics::counter!("cocktail_master_unauthorized_total", "realm" => realm).increment(1);
            Err(MasterError::Unauthorized {
                realm,
                message: format!(
                    "{} needs {what} as `Authorization: Bearer <token>`",
                    request.path()
                ),
            })
        }
        _ => Ok(()),
    }
}

/// An operator: presented the admin token.
#[derive(Debug)]
pub struct Admin;

impl FromRequest for Admin {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(state(request).and_then(|s| {
            check(
                request,
                s.access.admin.as_ref(),
                "admin",
                "the admin token (see docs/security.md)",
            )
            .map(|()| Admin)
        }))
    }
}

/// A reader of `/metrics`: anyone on this host (a local Prometheus), else an operator.
#[derive(Debug)]
pub struct MetricsReader;

impl FromRequest for MetricsReader {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        if request.peer_addr().is_some_and(|a| a.ip().is_loopback()) {
            return ready(Ok(MetricsReader));
        }
        let admin = Admin::from_request(request, payload).into_inner();
        ready(admin.map(|Admin| MetricsReader))
    }
}

/// A worker of this cluster: presented the cluster secret.
#[derive(Debug)]
pub struct Cluster;

impl FromRequest for Cluster {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(state(request).and_then(|s| {
            check(
                request,
                s.access.cluster.as_ref(),
                "cluster",
                "the cluster secret the master was started with",
            )
            .map(|()| Cluster)
        }))
    }
}

/// A client of the inference endpoints: with `--api-keys`, one that presented a key
/// with budget left (counted per key name); otherwise anyone.
#[derive(Debug)]
pub struct Client;

impl FromRequest for Client {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(state(request).and_then(|s| {
            let Some(keys) = &s.access.keys else {
                return Ok(Client);
            };
            match keys.admit(token(request)) {
                Ok(name) => {
                    metrics::counter!("cocktail_master_key_requests_total", "key" => name.to_owned())
                        .increment(1);
                    Ok(Client)
                }
                Err(Refusal::Unknown) => {
                    metrics::counter!("cocktail_master_unauthorized_total", "realm" => "api-key")
                        .increment(1);
                    Err(MasterError::Unauthorized {
                        realm: "api-key",
                        message: format!(
                            "{} needs an API key as `Authorization: Bearer <key>`",
                            request.path()
                        ),
                    })
                }
                Err(Refusal::OverBudget { name, retry_after }) => {
                    metrics::counter!("cocktail_master_rate_limited_total").increment(1);
                    Err(MasterError::RateLimited {
                        key: name,
                        retry_after,
                    })
                }
            }
        }))
    }
}
