//! The master's callers, as request extractors: a handler that takes [`Admin`],
//! [`Cluster`] or [`Client`] runs only for a caller that presented the right bearer
//! secret (`crate::access`), and its signature says so. They are listed first among a
//! handler's arguments, so a refused call is answered before its body is read.

use std::future::{Ready, ready};
use std::marker::PhantomData;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use cocktail_common::auth::Secret;
use cocktail_service::net::{bearer, presents};

use super::routes::AppState;
use crate::MasterError;
use crate::access::Access;

fn state(request: &HttpRequest) -> Result<&web::Data<AppState>, MasterError> {
    request
        .app_data::<web::Data<AppState>>()
        .ok_or_else(|| MasterError::Internal("the app state is missing".into()))
}

/// A 401 for a call to `request`'s path without `what`, counted by realm.
fn unauthorized(request: &HttpRequest, realm: &'static str, what: &str) -> MasterError {
    metrics::counter!("cocktail_master_unauthorized_total", "realm" => realm).increment(1);
    MasterError::Unauthorized {
        realm,
        message: format!(
            "{} needs {what} as `Authorization: Bearer <token>`",
            request.path()
        ),
    }
}

/// `Ok` when `secret` is off or presented.
fn check(
    request: &HttpRequest,
    secret: Option<&Secret>,
    realm: &'static str,
    what: &str,
) -> Result<(), MasterError> {
    match secret {
        Some(secret) if !presents(request, secret) => Err(unauthorized(request, realm, what)),
        _ => Ok(()),
    }
}

/// Which of the master's secrets a caller presents.
pub trait Role {
    /// The realm of the 401's challenge.
    const REALM: &'static str;
    /// What to present, as the 401 says it.
    const WHAT: &'static str;
    fn secret(access: &Access) -> Option<&Secret>;
}

/// A caller that presented the secret of role `R` (or any caller while it is off).
#[derive(Debug)]
pub struct Presented<R>(PhantomData<R>);

impl<R: Role> FromRequest for Presented<R> {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(state(request).and_then(|s| {
            check(request, R::secret(&s.access), R::REALM, R::WHAT).map(|()| Self(PhantomData))
        }))
    }
}

/// An operator: presented the admin token.
#[derive(Debug)]
pub enum AdminRole {}

impl Role for AdminRole {
    const REALM: &'static str = "admin";
    const WHAT: &'static str = "the admin token (see docs/security.md)";
    fn secret(access: &Access) -> Option<&Secret> {
        access.admin.as_ref()
    }
}

pub type Admin = Presented<AdminRole>;

/// A worker of this cluster: presented the cluster secret.
#[derive(Debug)]
pub enum ClusterRole {}

impl Role for ClusterRole {
    const REALM: &'static str = "cluster";
    const WHAT: &'static str = "the cluster secret the master was started with";
    fn secret(access: &Access) -> Option<&Secret> {
        access.cluster.as_ref()
    }
}

pub type Cluster = Presented<ClusterRole>;

/// A reader of `/metrics`: anyone on this host (a local Prometheus), a member of the
/// cluster (a Prometheus beside it, which needs the cluster secret to scrape the workers
/// anyway), else an operator.
#[derive(Debug)]
pub struct MetricsReader;

impl FromRequest for MetricsReader {
    type Error = MasterError;
    type Future = Ready<Result<Self, MasterError>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        if request.peer_addr().is_some_and(|a| a.ip().is_loopback()) {
            return ready(Ok(MetricsReader));
        }
        let member = state(request).is_ok_and(|s| {
            s.access
                .cluster
                .as_ref()
                .is_some_and(|secret| presents(request, secret))
        });
        if member {
            return ready(Ok(MetricsReader));
        }
        ready(
            Admin::from_request(request, payload)
                .into_inner()
                .map(|_| MetricsReader),
        )
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
            let needs = || {
                format!(
                    "{} needs an API key as `Authorization: Bearer <token>`",
                    request.path()
                )
            };
            keys.admit_client(bearer(request), needs).map(|()| Client)
        }))
    }
}
