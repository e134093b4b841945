//! The controller's health reconciliation: every health interval it joins the provider's
//! running instances with the registry ([`cocktail_policy::health::diagnose`]) and terminates and
//! replaces, at once, each instance that is dead, hung or never registered; every
//! replacement is a decision with its reason in the store.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use cocktail_common::control::MISSED_HEARTBEATS;

use super::Controller;
use crate::resources::provider::{InstanceRecord, InstanceStatus};
use crate::serving::registry::UNANSWERED_LIMIT;
use cocktail_policy::autoscale::{Action, Decision};
use cocktail_policy::health::{self, BACKOFF_RESET, HealthConfig, Heard, Observed};

/// What the health check remembers between its runs.
#[derive(Debug, Default)]
pub(super) struct HealthState {
    /// When each running instance was first seen running.
    running_since: HashMap<String, Instant>,
    /// Running instances whose worker has registered.
    registered: HashSet<String>,
    /// Instances already terminated for their health, until the provider forgets them.
    replaced: HashSet<String>,
    /// Per pool: health replacements since the last quiet spell, and the latest one.
    pauses: HashMap<String, (u32, Instant)>,
    /// Health replacements since the master started (the dashboard shows them).
    replacements: u64,
}

impl Controller {
    /// Instances replaced for their health since the master started.
    pub fn health_replacements(&self) -> u64 {
        self.health.lock().replacements
    }

    fn health_config(&self) -> HealthConfig {
        HealthConfig {
            heartbeat: self.master.config.heartbeat,
            missed_heartbeats: MISSED_HEARTBEATS,
            unanswered_limit: UNANSWERED_LIMIT,
            register_within: self.config.register_within,
        }
    }

    /// One health check: replaces every unhealthy running instance.
    /// A check that cannot list the instances replaces nothing: it cannot tell a dead
    /// instance from one it does not see.
    pub async fn health_step(&self) {
        let records = match self.live_instances().await {
            Ok(records) => records,
            Err(e) => {
                self.blind("health", &e);
                return;
            }
        };
        let heard: HashMap<String, Heard> = self
            .master
            .registry
            .view()
            .into_iter()
            .map(|v| {
                let heard = Heard {
                    silent: Duration::from_millis(v.last_seen_ms),
                    down: v.down,
                    unanswered: v.unanswered,
                    draining: v.draining,
                };
                (v.id, heard)
            })
            .collect();
        let config = self.health_config();
        let now = Instant::now();
        let unhealthy: Vec<(InstanceRecord, String)> = {
            let mut state = self.health.lock();
            let running: HashSet<&str> = records
                .iter()
                .filter(|r| matches!(r.status, InstanceStatus::Running | InstanceStatus::Failed))
                .map(|r| r.id.as_str())
                .collect();
            // A stopped standby that resumes starts over: it has to register again.
            state
                .running_since
                .retain(|id, _| running.contains(id.as_str()));
            state.registered.retain(|id| running.contains(id.as_str()));
            state.replaced.retain(|id| running.contains(id.as_str()));
            let mut unhealthy = Vec::new();
            // A removed model's instances are the zoo reload's to terminate.
            let managed = self.models.read();
            for r in records
                .iter()
                .filter(|r| running.contains(r.id.as_str()) && managed.contains_key(&r.model))
            {
                let since = *state.running_since.entry(r.id.clone()).or_insert(now);
                let registered = heard.get(&r.id).copied();
                if registered.is_some() {
                    state.registered.insert(r.id.clone());
                }
                if state.replaced.contains(&r.id) {
                    continue;
                }
                let observed = Observed {
                    exited: r.status == InstanceStatus::Failed,
                    running_for: now.saturating_duration_since(since),
                    registered,
                    was_registered: state.registered.contains(&r.id),
                };
                if let Some(reason) = health::diagnose(&observed, &config) {
                    unhealthy.push((r.clone(), reason));
                }
            }
            unhealthy
        };
        for (record, reason) in unhealthy {
            self.replace_unhealthy(record, reason).await;
        }
    }

    /// Terminates `record` and launches one of its type (spot when it was spot and the
    /// price is still under the bid), unless the pool is in its back-off pause.
    async fn replace_unhealthy(&self, record: InstanceRecord, reason: String) {
        {
            let mut state = self.health.lock();
            let (recent, last) = state
                .pauses
                .get(&record.model)
                .copied()
                .filter(|(_, last)| last.elapsed() < BACKOFF_RESET)
                .unwrap_or((0, Instant::now()));
            if recent > 0 && last.elapsed() < health::replacement_pause(recent) {
                return; // Looked at again at the next check.
            }
            state
                .pauses
                .insert(record.model.clone(), (recent + 1, Instant::now()));
            state.replacements += 1;
            state.replaced.insert(record.id.clone());
        }
        tracing::warn!(id = %record.id, model = %record.model, %reason, "unhealthy instance; replacing it");
        metrics::counter!("cocktail_master_health_replacements_total", "model" => record.model.clone())
            .increment(1);
        let decide = |action: Action, reason: String| Decision {
            pool: record.model.clone(),
            action,
            weight: 0.0,
            demand: 0.0,
            capacity: 0.0,
            reason,
        };
        self.execute(
            "health",
            0.0,
            decide(
                Action::Terminate {
                    id: record.id.clone(),
                },
                format!("unhealthy: {reason}"),
            ),
        )
        .await;
        let Some(ty) = self.catalog.get(&record.instance_type).cloned() else {
            return;
        };
        let spot_price = self.provider.spot_price(&ty);
        let spot = record.spot && self.config.spot && spot_price <= self.catalog.bid(&ty);
        self.execute(
            "health",
            0.0,
            decide(
                Action::Launch {
                    instance_type: ty.name.clone(),
                    count: 1,
                    spot,
                    price_per_hour: if spot {
                        spot_price
                    } else {
                        ty.on_demand_per_hour
                    },
                },
                format!("replaces {}, unhealthy: {reason}", record.id),
            ),
        )
        .await;
    }
}
