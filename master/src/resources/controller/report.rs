//! What the controller reports of its pools (`/v1/pools`) and their cost (`/v1/cost`).

use serde::Serialize;

use super::Controller;

/// The last view of a pool, for `/v1/pools`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PoolReport {
    pub model: String,
    pub weight: f64,
    pub demand: f64,
    pub capacity: f64,
    pub instances: usize,
    pub requests: u64,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CostReport {
    pub total: f64,
    pub pools: std::collections::BTreeMap<String, f64>,
    pub requests: u64,
    pub per_1000_requests: Option<f64>,
}

impl Controller {
    /// The predicted load and each pool as the last predictive interval saw them.
    pub fn pools_report(&self) -> (f64, Vec<PoolReport>) {
        let last = self.last_interval.lock();
        let Some(report) = last.as_ref() else {
            return (0.0, Vec::new());
        };
        let pools = report
            .pools
            .iter()
            .map(|p| PoolReport {
                model: p.model.clone(),
                weight: p.weight,
                demand: p.demand,
                capacity: p.capacity,
                instances: p.instances,
                requests: p.requests,
            })
            .collect();
        (report.predicted, pools)
    }
}
