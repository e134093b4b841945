//! Which workers may join a pool the controller manages: only the instances it launched,
//! each at its own host. A holder of the cluster secret could otherwise register any URL
//! as a worker of any pool and receive a share of the clients' inputs.

use cocktail_common::control::Registration;

use super::Controller;
use crate::MasterError;

impl Controller {
    /// Whether it manages `model`'s pool.
    pub fn manages(&self, model: &str) -> bool {
        self.models.read().contains_key(model)
    }

    /// `Ok` for a registration as a live instance this controller launched for that
    /// model, at that instance's host, and for a model it does not manage (a static
    /// worker: the cluster secret is all it needs); 403 naming the field otherwise.
    pub async fn admits(&self, registration: &Registration) -> Result<(), MasterError> {
        if !self.models.read().contains_key(&registration.model) {
            return Ok(());
        }
        let forbidden = |field: &str, message: String| MasterError::Forbidden {
            field: field.into(),
            message,
        };
        let records = self.provider.describe().await?;
        let Some(record) = records
            .iter()
            .find(|r| r.id == registration.id && r.is_live())
        else {
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
}
