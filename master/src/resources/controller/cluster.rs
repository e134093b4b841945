//! What the controller sees of its cluster, and what it does when it cannot: listing the
//! provider's live instances (a failing listing makes a step blind, never an empty
//! cluster), what the instances cost, and terminating them at shutdown.

use std::collections::HashMap;
use std::time::Duration;

use super::{Controller, CostReport};
use crate::MasterError;
use crate::resources::provider::{InstanceRecord, now_s};
use crate::resources::store::BlindRecord;

impl Controller {
    /// The provider's live instances, or why it cannot list them: a controller that
    /// cannot see its cluster must not act as if it were empty (it would launch every
    /// pool's minimum again on each step while the fault lasts).
    pub(super) async fn live_instances(&self) -> Result<Vec<InstanceRecord>, MasterError> {
        let described = self.provider.describe().await;
        metrics::gauge!("cocktail_master_cluster_visible").set(if described.is_ok() {
            1.0
        } else {
            0.0
        });
        let live: Vec<InstanceRecord> = described?
            .into_iter()
            .filter(InstanceRecord::is_live)
            .collect();
        self.admitted.lock().keep_live(&live);
        Ok(live)
    }

    /// A step that decided nothing because the provider could not list the instances:
    /// logged, counted and kept with the decisions.
    pub(super) fn blind(&self, step: &str, error: &MasterError) {
        tracing::error!(step, %error, "cannot see the cluster: this step decides nothing");
        metrics::counter!("cocktail_master_blind_steps_total", "step" => step.to_owned())
            .increment(1);
        self.store.save(&BlindRecord {
            at: now_s(),
            trigger: "blind".into(),
            step: step.to_owned(),
            error: error.to_string(),
        });
    }

    /// Per-second cost of every instance so far, per pool and in total, into `/metrics`.
    pub(super) async fn publish_costs(&self) {
        let cost = match self.cost().await {
            Ok(cost) => cost,
            Err(e) => {
                tracing::warn!(error = %e, "cannot price the instances: costs not published");
                return;
            }
        };
        for (pool, usd) in &cost.pools {
            metrics::gauge!("cocktail_master_cost_usd", "pool" => pool.clone()).set(*usd);
        }
        metrics::gauge!("cocktail_master_cost_usd_total").set(cost.total);
    }

    /// What the instances have cost, per pool and in total, and per 1,000 requests.
    pub async fn cost(&self) -> Result<CostReport, MasterError> {
        let now = now_s();
        let records = self.provider.describe().await?;
        let mut pools: HashMap<String, f64> = HashMap::new();
        for r in &records {
            *pools.entry(r.model.clone()).or_default() += r.cost(now);
        }
        let total: f64 = pools.values().sum();
        let requests = self.master.usage.snapshot().requests;
        Ok(CostReport {
            per_1000_requests: (requests > 0).then(|| total / requests as f64 * 1000.0),
            pools: pools.into_iter().collect(),
            total,
            requests,
        })
    }

    /// Terminates every live instance (the master is stopping); workers drain first.
    /// A provider that fails is asked again, with back-off, until `deadline`; returns
    /// the instances it could not terminate (empty when none is left), each logged.
    pub async fn shutdown(&self, deadline: Duration) -> Vec<String> {
        let give_up = tokio::time::Instant::now() + deadline;
        let mut pause = Duration::from_millis(100);
        let mut left: Vec<String> = Vec::new();
        loop {
            match self.live_instances().await {
                Ok(live) => {
                    let ids: Vec<String> = live.into_iter().map(|r| r.id).collect();
                    let stops = ids.iter().map(|id| self.provider.terminate(id));
                    let results = futures_util::future::join_all(stops).await;
                    left = ids
                        .into_iter()
                        .zip(results)
                        .filter_map(|(id, result)| {
                            result
                                .inspect_err(|e| {
                                    tracing::warn!(%id, error = %e, "terminate at shutdown failed");
                                })
                                .err()
                                .map(|_| id)
                        })
                        .collect();
                    if left.is_empty() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the instances to terminate at shutdown");
                    if left.is_empty() {
                        left.push("(the provider could not list them)".into());
                    }
                }
            }
            if tokio::time::Instant::now() + pause > give_up {
                tracing::error!(
                    ?left,
                    "shutdown leaves instances running: terminate them by hand"
                );
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
        self.provider.close().await;
        left
    }
}
