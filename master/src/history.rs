//! The dashboard's memory: a ring of [`Sample`]s of what the master and its resource
//! controller are doing, taken every [`SAMPLE_PERIOD`] by a task `server` starts. It
//! keeps [`SAMPLES_KEPT`] samples (an hour), each bounded by `serving::traffic`'s key
//! limit and the number of pools, so it holds at most a few megabytes. Rates (requests
//! per second) are differences between consecutive samples' counts.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;

use crate::Master;
use crate::resources::controller::Controller;
use crate::resources::provider::{InstanceRecord, InstanceStatus, now_s};
use crate::resources::store::DecisionRecord;

/// How often a sample is taken.
pub const SAMPLE_PERIOD: Duration = Duration::from_secs(5);
/// Samples kept: an hour at [`SAMPLE_PERIOD`].
pub const SAMPLES_KEPT: usize = 720;
/// Autoscaler decisions read from the store to count revocations per pool.
const DECISIONS_READ: usize = 1000;

/// One constraint key at a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct KeySample {
    pub key: String,
    pub task: String,
    pub target_ms: f64,
    pub target_accuracy: f64,
    /// Counts since the key was first seen.
    pub requests: u64,
    pub failed: u64,
    pub degraded: u64,
    pub substituted: u64,
    pub slo_violations: u64,
    pub members_asked: u64,
    /// Percentiles of the recent response times, in milliseconds.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub members: Vec<String>,
    pub window_accuracy: Option<f64>,
}

/// One managed pool at a sample.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolSample {
    pub model: String,
    /// Live instances by (instance type, spot).
    pub instances: BTreeMap<(String, bool), usize>,
    /// Calls in flight on its registered workers, and the slots they have (their
    /// packing factors' sum, Pf).
    pub in_flight: u64,
    pub slots: u64,
    /// Instances launched since the master started (terminated ones included).
    pub boots: usize,
    /// Autoscaler decisions for spot revocations (`interruption`) among the recent ones.
    pub revocations: usize,
    /// USD per hour of its live instances, spot and on-demand.
    pub spot_per_hour: f64,
    pub on_demand_per_hour: f64,
    /// USD spent so far (per-second billing).
    pub cost_usd: f64,
    /// Requests per second this pool had to serve and could serve at the controller's
    /// last interval.
    pub demand_rps: f64,
    pub capacity_rps: f64,
}

/// What the resource controller reports at a sample.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceSample {
    pub pools: Vec<PoolSample>,
    pub predicted_rps: f64,
    pub health_replacements: u64,
    pub cost_usd: f64,
    pub per_1000_requests: Option<f64>,
}

/// Everything at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the Unix epoch.
    pub at_s: f64,
    pub keys: Vec<KeySample>,
    /// `None` when the master runs without a resource controller.
    pub resources: Option<ResourceSample>,
}

impl Sample {
    /// The key's sample, if it was followed then.
    pub fn key(&self, key: &str) -> Option<&KeySample> {
        self.keys.iter().find(|k| k.key == key)
    }
}

/// The ring of samples, oldest first.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    pub fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock();
        if samples.len() == SAMPLES_KEPT {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// A copy of every sample, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().iter().cloned().collect()
    }
}

/// Requests per second of each consecutive pair of samples, by `pick`ed count, at the
/// later sample's time: `(at_s, rate)`.
pub fn rates(samples: &[Sample], pick: impl Fn(&Sample) -> Option<u64>) -> Vec<(f64, f64)> {
    samples
        .windows(2)
        .filter_map(|pair| {
            let (a, b) = (&pair[0], &pair[1]);
            let seconds = b.at_s - a.at_s;
            let (before, after) = (pick(a).unwrap_or(0), pick(b)?);
            (seconds > 0.0).then(|| (b.at_s, after.saturating_sub(before) as f64 / seconds))
        })
        .collect()
}

/// Takes a sample of `master` (and `controller`, when it manages pools).
pub async fn sample(master: &Master, controller: Option<&Controller>) -> Sample {
    let ensembles = master.ensembles.snapshot();
    master
        .traffic
        .retain(|k| ensembles.iter().any(|(key, _)| key.as_str() == k));
    let keys = master
        .traffic
        .keys()
        .into_iter()
        .map(|(key, t)| {
            let (members, window_accuracy) = ensembles
                .iter()
                .find(|(k, _)| k.as_str() == key)
                .map(|(_, keyed)| {
                    let s = keyed.state.lock();
                    let names = s
                        .members
                        .iter()
                        .filter_map(|&i| keyed.task.models.get(i).cloned())
                        .collect();
                    (names, s.window_accuracy())
                })
                .unwrap_or_default();
            KeySample {
                task: key.split('|').next().unwrap_or_default().to_owned(),
                target_ms: t.target_ms,
                target_accuracy: t.target_accuracy,
                requests: t.requests,
                failed: t.failed,
                degraded: t.degraded,
                substituted: t.substituted,
                slo_violations: t.slo_violations,
                members_asked: t.members_asked,
                p50_ms: t.percentile(0.5),
                p95_ms: t.percentile(0.95),
                p99_ms: t.percentile(0.99),
                members,
                window_accuracy,
                key,
            }
        })
        .collect();
    let resources = match controller {
        Some(c) => Some(resources(master, c).await),
        None => None,
    };
    Sample {
        at_s: now_s(),
        keys,
        resources,
    }
}

async fn resources(master: &Master, controller: &Controller) -> ResourceSample {
    let records = match controller.provider.describe().await {
        Ok(records) => records,
        Err(e) => {
            // The sample then shows no instances; the next one tries again.
            tracing::warn!(error = %e, "dashboard sample: cannot list instances");
            Vec::new()
        }
    };
    let decisions = controller
        .store
        .recent_records::<DecisionRecord>(DECISIONS_READ);
    let (predicted_rps, reports) = controller.pools_report();
    let workers = master.registry.view();
    let mut pools: BTreeMap<String, PoolSample> = BTreeMap::new();
    let now = now_s();
    for r in &records {
        let pool = pools.entry(r.model.clone()).or_default();
        pool.boots += 1;
        pool.cost_usd += r.cost(now);
        if billed_now(r) {
            *pool
                .instances
                .entry((r.instance_type.clone(), r.spot))
                .or_default() += 1;
            if r.spot {
                pool.spot_per_hour += r.price_per_hour;
            } else {
                pool.on_demand_per_hour += r.price_per_hour;
            }
        }
    }
    for report in &reports {
        let pool = pools.entry(report.model.clone()).or_default();
        pool.demand_rps = report.demand;
        pool.capacity_rps = report.capacity;
    }
    for w in workers.iter().filter(|w| !w.down && !w.draining) {
        if let Some(pool) = pools.get_mut(&w.model) {
            pool.in_flight += u64::from(w.in_flight);
            pool.slots += u64::from(w.packing_factor);
        }
    }
    for d in decisions.iter().filter(|d| d.trigger == "interruption") {
        if let Some(pool) = pools.get_mut(&d.decision.pool) {
            pool.revocations += 1;
        }
    }
    let cost_usd: f64 = pools.values().map(|p| p.cost_usd).sum();
    let requests = master.usage.snapshot().requests;
    ResourceSample {
        pools: pools
            .into_iter()
            .map(|(model, pool)| PoolSample { model, ..pool })
            .collect(),
        predicted_rps,
        health_replacements: controller.health_replacements(),
        cost_usd,
        per_1000_requests: (requests > 0).then(|| cost_usd / requests as f64 * 1000.0),
    }
}

/// Whether an instance is being paid for now (live and not stopped).
fn billed_now(r: &InstanceRecord) -> bool {
    !matches!(
        r.status,
        InstanceStatus::Terminated | InstanceStatus::Stopped
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(at_s: f64, requests: u64) -> Sample {
        Sample {
            at_s,
            keys: vec![KeySample {
                key: "t|1|0.5|accuracy".into(),
                task: "t".into(),
                target_ms: 1.0,
                target_accuracy: 0.5,
                requests,
                failed: 0,
                degraded: 0,
                substituted: 0,
                slo_violations: 0,
                members_asked: 0,
                p50_ms: None,
                p95_ms: None,
                p99_ms: None,
                members: Vec::new(),
                window_accuracy: None,
            }],
            resources: None,
        }
    }

    #[test]
    fn the_ring_is_bounded_and_rates_are_differences() {
        let history = History::default();
        for i in 0..SAMPLES_KEPT + 3 {
            history.push(at(i as f64 * 5.0, i as u64 * 50));
        }
        let samples = history.samples();
        assert_eq!(samples.len(), SAMPLES_KEPT);
        assert_eq!(samples[0].at_s, 15.0);
        let rates = rates(&samples[..3], |s| Some(s.keys[0].requests));
        assert_eq!(rates, vec![(20.0, 10.0), (25.0, 10.0)]);
    }
}
