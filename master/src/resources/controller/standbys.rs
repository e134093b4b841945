//! The controller's cold standbys (MArk §4.5): stopped burstable instances kept per
//! pool, resumed on a spot interruption and stopped again once the pool's regular
//! instances cover its demand.

use super::Controller;
use crate::resources::provider::{InstanceRecord, InstanceStatus};
use cocktail_policy::autoscale::{Action, Decision};
use cocktail_policy::control::{IntervalReport, Measurements};

impl Controller {
    /// Keeps `standbys` stopped burstable instances per pool (MArk §4.5): launches the
    /// missing ones, stops them once ready, and stops a resumed one again when the pool's
    /// regular instances cover its demand.
    pub(super) fn tend_standbys(
        &self,
        records: &[InstanceRecord],
        measurements: &Measurements,
        report: &IntervalReport,
    ) -> Vec<(&'static str, Decision)> {
        if self.config.standbys == 0 {
            return Vec::new();
        }
        let Some(ty) = self
            .allowed_types()
            .filter(|t| t.burstable)
            .min_by(|a, b| a.on_demand_per_hour.total_cmp(&b.on_demand_per_hour))
        else {
            return Vec::new();
        };
        let mut standbys = self.standbys.lock();
        let mut decisions = Vec::new();
        for pool in &measurements.pools {
            let plan = report.pools.iter().find(|p| p.model == pool.model);
            let weight = plan.map_or(0.0, |p| p.weight);
            let demand = plan.map_or(0.0, |p| p.demand);
            let capacity = pool.capacity(&self.config.control.autoscale);
            let decide = |action: Action, reason: String| Decision {
                pool: pool.model.clone(),
                action,
                weight,
                demand,
                capacity,
                reason,
            };
            let mine: Vec<&InstanceRecord> = records
                .iter()
                .filter(|r| r.model == pool.model && standbys.all.contains(&r.id))
                .collect();
            let missing = self.config.standbys.saturating_sub(mine.len());
            if missing > 0 {
                decisions.push((
                    "standby",
                    decide(
                        Action::Launch {
                            instance_type: ty.name.clone(),
                            count: missing as u32,
                            spot: false,
                            price_per_hour: ty.on_demand_per_hour,
                        },
                        format!(
                            "cold standby (mark.txt §4.5): {missing} × {} to stop once ready",
                            ty.name
                        ),
                    ),
                ));
            }
            let regular_running = records.iter().any(|r| {
                r.model == pool.model
                    && r.status == InstanceStatus::Running
                    && !standbys.all.contains(&r.id)
            });
            for r in mine.iter().filter(|r| r.status == InstanceStatus::Running) {
                if !standbys.active.contains(&r.id) {
                    decisions.push((
                        "standby",
                        decide(
                            Action::Stop { id: r.id.clone() },
                            "cold standby ready: stopped until a spot interruption".into(),
                        ),
                    ));
                } else if regular_running && capacity >= demand {
                    standbys.active.remove(&r.id);
                    decisions.push((
                        "standby",
                        decide(
                            Action::Stop { id: r.id.clone() },
                            format!("regular capacity {capacity:.1} req/s covers {demand:.1} again: standby stopped"),
                        ),
                    ));
                }
            }
        }
        decisions
    }
}
