//! A zoo reload end to end (`POST /v1/zoo/reload`, SIGHUP): the manifest is re-read and
//! checked ([`Master::stage_zoo`]; a broken one is refused and the zoo served stays),
//! the new tables are served ([`Master::commit_zoo`]), the controller manages the new models, and each removed
//! model's pool drains in the background before the controller terminates its
//! instances. Triton's explicit model control is the model; here the manifest is the
//! one source of truth, so a reload adds and removes whatever it says.

use std::sync::Arc;

use crate::resources::controller::Controller;
use crate::serving::service::ZooChange;
use crate::{Master, MasterError};

/// Runs reloads one at a time.
#[derive(Debug)]
pub struct Reloader {
    master: Arc<Master>,
    controller: Option<Arc<Controller>>,
    running: tokio::sync::Mutex<()>,
}

impl Reloader {
    pub fn new(master: Arc<Master>, controller: Option<Arc<Controller>>) -> Self {
        Self {
            master,
            controller,
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// Re-reads the zoo (`trigger` says who asked, for the log and the metrics).
    pub async fn reload(&self, trigger: &'static str) -> Result<ZooChange, MasterError> {
        let _one_at_a_time = self.running.lock().await;
        let result = self.apply();
        let outcome = match &result {
            Ok(change) => {
                tracing::info!(
                    trigger,
                    added = ?change.added,
                    removed = ?change.removed,
                    tasks = ?change.tasks,
                    forgotten = change.forgotten,
                    models = change.models,
                    "zoo reloaded"
                );
                "ok"
            }
            Err(error) => {
                tracing::warn!(trigger, %error, "zoo reload refused; the zoo served is unchanged");
                "refused"
            }
        };
        metrics::counter!("cocktail_master_zoo_reloads_total", "outcome" => outcome).increment(1);
        result
    }

    fn apply(&self) -> Result<ZooChange, MasterError> {
        let staged = self.master.stage_zoo()?;
        let (zoo, change) = self.master.commit_zoo(staged);
        if let Some(controller) = &self.controller {
            controller.adopt(&zoo, &change);
        }
        for model in &change.removed {
            let (master, controller) = (Arc::clone(&self.master), self.controller.clone());
            let model = model.clone();
            tokio::spawn(async move { retire(&master, controller.as_deref(), &model).await });
        }
        Ok(change)
    }
}

/// Once `model`'s pool has drained, its instances are terminated by the controller
/// (unless a later reload brought the model back); static workers are their
/// operator's to stop.
async fn retire(master: &Master, controller: Option<&Controller>, model: &str) {
    if !master.drained(model).await {
        tracing::warn!(%model, "a removed model's pool still had calls under way; stopping it anyway");
    }
    if master
        .tasks()
        .values()
        .any(|t| t.model_index(model).is_some())
    {
        return;
    }
    match controller {
        Some(controller) => {
            let terminated = controller.retire(model).await;
            tracing::info!(%model, ?terminated, "removed model drained; its instances are terminated");
        }
        None => {
            tracing::info!(%model, "removed model drained; stop its workers (they are not this master's)");
        }
    }
}
