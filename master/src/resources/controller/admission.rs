//! Which workers may join a pool the controller manages: only the instances it launched,
//! each at its own host. A holder of the cluster secret could otherwise register any URL
//! as a worker of any pool and receive a share of the clients' inputs.

use std::collections::HashMap;

use cocktail_common::control::Registration;

use super::Controller;
use crate::MasterError;
use crate::resources::provider::InstanceRecord;

/// The registrations admitted against a listing, by instance id, while the instance is
/// live. A worker the master dropped (it missed its heartbeats: a paused process, a
/// network blip) registers again, and it must get back in while the provider cannot
/// list the instances; otherwise a listing outage would empty the pools one missed
/// heartbeat at a time.
#[derive(Debug, Default)]
pub(super) struct Admitted(HashMap<String, Registration>);

impl Admitted {
    /// Whether `registration` is one admitted before, unchanged (same model and URL).
    fn before(&self, registration: &Registration) -> bool {
        self.0.get(&registration.id).is_some_and(|admitted| {
            admitted.model == registration.model && admitted.url == registration.url
        })
    }

    fn remember(&mut self, registration: &Registration) {
        self.0.insert(registration.id.clone(), registration.clone());
    }

    /// Forgets the instances a listing no longer shows live.
    pub(super) fn keep_live(&mut self, live: &[InstanceRecord]) {
        self.0.retain(|id, _| live.iter().any(|r| &r.id == id));
    }

    /// Forgets an instance the controller stops or terminates.
    pub(super) fn forget(&mut self, id: &str) {
        self.0.remove(id);
    }
}

impl Controller {
    /// Whether it manages `model`'s pool.
    pub fn manages(&self, model: &str) -> bool {
        self.models.read().contains_key(model)
    }

    /// `Ok` for a registration as a live instance this controller launched for that
    /// model, at that instance's host, and for a model it does not manage (a static
    /// worker: the cluster secret is all it needs); 403 naming the field otherwise.
    /// While the provider cannot list the instances, only a registration admitted before
    /// (same instance, model and URL, not stopped or terminated since) gets in; any other
    /// gets the provider's error.
    pub async fn admits(&self, registration: &Registration) -> Result<(), MasterError> {
        if !self.models.read().contains_key(&registration.model) {
            return Ok(());
        }
        let live: Vec<InstanceRecord> = match self.live_instances().await {
            Ok(live) => live,
            Err(error) if self.admitted.lock().before(registration) => {
                tracing::warn!(id = %registration.id, %error,
                    "cannot list the instances; admitting a worker admitted before at the same URL");
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        admit_listed(&live, registration)?;
        self.admitted.lock().remember(registration);
        Ok(())
    }
}

/// `Ok` when `registration` is one of the `live` instances, for its model, at its host;
/// 403 naming the field otherwise.
fn admit_listed(live: &[InstanceRecord], registration: &Registration) -> Result<(), MasterError> {
    let forbidden = |field: &str, message: String| MasterError::Forbidden {
        field: field.into(),
        message,
    };
    let Some(record) = live.iter().find(|r| r.id == registration.id) else {
        return Err(forbidden(
            "id",
            format!(
                "`{}` is not a running instance this master launched; pool `{}` takes only those",
                registration.id, registration.model
            ),
        ));
    };
    if record.model != registration.model {
        return Err(forbidden(
            "model",
            format!(
                "instance `{}` was launched for `{}`, not `{}`",
                record.id, record.model, registration.model
            ),
        ));
    }
    let host = reqwest::Url::parse(&registration.url).ok().and_then(|u| {
        u.host_str()
            .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
    });
    match (&record.host, host) {
        (Some(expected), Some(host)) if expected.eq_ignore_ascii_case(&host) => Ok(()),
        (Some(expected), _) => Err(forbidden(
            "url",
            format!(
                "instance `{}` listens on host `{expected}`; given `{}`",
                record.id, registration.url
            ),
        )),
        (None, _) => Err(forbidden(
            "url",
            format!("the address of instance `{}` is not known yet", record.id),
        )),
    }
}
