//! What a zoo reload (`crate::reload`) asks of the controller: to manage the new
//! models (their pools are launched, as any other, once an ensemble uses them) and to
//! give up the removed ones, terminating their instances once their calls are done.

use std::time::Duration;

use cocktail_common::Zoo;
use cocktail_policy::autoscale::{Action, Decision};
use cocktail_policy::control::Control;

use super::{Controller, ModelInfo};
use crate::serving::service::ZooChange;

/// How many times the instances of a removed model are listed before giving up.
const LISTING_ATTEMPTS: u32 = 10;

impl Controller {
    /// Manages the models `change` added: every one, unless `--models` named a subset of
    /// the zoo; pinned too when it named every model (`cocktail up`).
    pub fn adopt(&self, zoo: &Zoo, change: &ZooChange) {
        if !self.config.models.is_empty() && !self.pins_every_model {
            return;
        }
        let scale = self.master.config.speed_scale;
        let added: Vec<_> = zoo
            .models()
            .iter()
            .filter(|m| change.added.contains(&m.name))
            .collect();
        {
            let mut models = self.models.write();
            for m in &added {
                models.insert(m.name.clone(), ModelInfo::of(m, scale));
            }
        }
        if self.pins_every_model {
            self.pinned
                .write()
                .extend(added.iter().map(|m| m.name.clone()));
        }
        self.adopted
            .lock()
            .extend(added.iter().map(|m| m.name.clone()));
        self.master
            .manage(added.into_iter().map(|m| m.name.clone()));
    }

    /// Launches the minimum of each pool a reload added as soon as an ensemble uses it
    /// (the health checks' period), rather than at the next predictive interval.
    pub(super) async fn launch_adopted(&self, control: &mut Control) {
        if self.adopted.lock().is_empty() {
            return;
        }
        let Ok((mut measurements, _)) = self.measure(Vec::new()).await else {
            return;
        };
        {
            let mut adopted = self.adopted.lock();
            measurements
                .pools
                .retain(|p| p.in_use && adopted.remove(&p.model));
        }
        measurements
            .pools
            .retain(|p| p.instances.is_empty() && !p.booting);
        if measurements.pools.is_empty() {
            return;
        }
        for decision in control.warm_start(&measurements) {
            self.execute("zoo", 0.0, decision).await;
        }
    }

    /// Stops managing `model` (removed from the zoo) and terminates its instances:
    /// call this once its pool has drained. Returns the instances terminated.
    pub async fn retire(&self, model: &str) -> Vec<String> {
        self.adopted.lock().remove(model);
        // The manifest is the later word: a model pinned with `--models` goes too.
        if self.pinned.write().remove(model) {
            tracing::info!(%model, "a model pinned with --models left the zoo: unpinned");
        }
        if self.models.write().remove(model).is_none() {
            return Vec::new();
        }
        self.master.unmanage(model);
        let mut attempt = 0;
        let records = loop {
            match self.live_instances().await {
                Ok(records) => break records,
                Err(e) => {
                    self.blind("zoo", &e);
                    attempt += 1;
                    if attempt == LISTING_ATTEMPTS {
                        tracing::error!(%model, "the instances of a removed model could not be listed: terminate them by hand");
                        return Vec::new();
                    }
                    tokio::time::sleep(self.config.health_interval.max(Duration::from_secs(1)))
                        .await;
                }
            }
        };
        let ids: Vec<String> = records
            .into_iter()
            .filter(|r| r.model == model)
            .map(|r| r.id)
            .collect();
        for id in &ids {
            self.standbys.lock().all.remove(id);
            let decision = Decision {
                pool: model.to_owned(),
                action: Action::Terminate { id: id.clone() },
                weight: 0.0,
                demand: 0.0,
                capacity: 0.0,
                reason: "removed from the zoo".into(),
            };
            self.execute("zoo", 0.0, decision).await;
        }
        ids
    }
}
