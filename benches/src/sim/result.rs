//! What a simulated run reports.

use std::collections::VecDeque;

use serde::Serialize;

use super::config::Failure;
use crate::stats::nearest_rank;

/// Latency percentiles in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub min: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(samples: &mut [f32]) -> Self {
        samples.sort_unstable_by(f32::total_cmp);
        let samples = &*samples;
        let rank = |q: f64| nearest_rank(samples, q).map_or(0.0, f64::from);
        Self {
            min: samples.first().map_or(0.0, |v| f64::from(*v)),
            p25: rank(0.25),
            p50: rank(0.50),
            p75: rank(0.75),
            p90: rank(0.90),
            p99: rank(0.99),
            max: samples.last().map_or(0.0, |v| f64::from(*v)),
        }
    }
}

/// One constraint type's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TypeResult {
    pub name: String,
    pub latency_ms: f64,
    pub accuracy_target: f64,
    pub requests: u64,
    pub models_per_request: f64,
    pub accuracy: f64,
    pub accuracy_met: f64,
}

/// One time bucket of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub t_s: f64,
    pub rate: f64,
    pub models_per_request: f64,
    /// Accuracy over the last [`ACCURACY_WINDOW`] requests, and since the start.
    pub window_accuracy: f64,
    pub cumulative_accuracy: f64,
    pub accuracy_met: f64,
    /// Instances per model pool (same order as [`SimResult::pools`]), booting included.
    pub vms: Vec<usize>,
    pub cost: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub task: String,
    pub scheme: String,
    pub autoscaler: String,
    pub mix: String,
    pub importance_weights: bool,
    pub failure: Option<Failure>,
    pub requests: u64,
    /// Requests no member answered in time.
    pub failed: u64,
    /// Requests answered without some member (it missed its deadline or had no instance).
    pub degraded: u64,
    /// The share of requests answered after their latency target (the master's deadline
    /// grace lets members answer later, but such an answer is still late) or not at all.
    pub slo_violations: f64,
    pub latency_ms: Percentiles,
    pub accuracy: f64,
    /// The share of requests whose constraint type's last 200 answers met its accuracy.
    pub accuracy_met: f64,
    pub models_per_request: f64,
    pub cost: f64,
    pub vms_mean: f64,
    pub vms_max: usize,
    pub launches: u64,
    pub revocations: u64,
    pub types: Vec<TypeResult>,
    pub pools: Vec<String>,
    pub series: Vec<Bucket>,
    /// Wall-clock seconds the run took; not serialised, so that the committed results
    /// regenerate bit for bit (`tests/tests/results_page.rs`).
    #[serde(skip)]
    pub elapsed_s: f64,
    /// The latency of every request (milliseconds), for box plots; not serialised.
    #[serde(skip)]
    pub latencies: Vec<f32>,
}

/// The moving window of §6.1 for "accuracy met".
pub const ACCURACY_WINDOW: usize = 200;

/// The last [`ACCURACY_WINDOW`] outcomes.
#[derive(Debug, Default, Clone)]
pub(super) struct Outcomes {
    ring: VecDeque<bool>,
    correct: usize,
}

impl Outcomes {
    pub fn push(&mut self, correct: bool) {
        self.ring.push_back(correct);
        self.correct += usize::from(correct);
        if self.ring.len() > ACCURACY_WINDOW
            && let Some(old) = self.ring.pop_front()
        {
            self.correct -= usize::from(old);
        }
    }

    pub fn accuracy(&self) -> f64 {
        if self.ring.is_empty() {
            0.0
        } else {
            self.correct as f64 / self.ring.len() as f64
        }
    }
}

#[derive(Debug, Default, Clone)]
pub(super) struct Tally {
    pub requests: u64,
    pub models: u64,
    pub correct: u64,
    pub met: u64,
}

/// The run of `scheme` (its label, e.g. `Cocktail-M`) among `results`.
pub fn by_scheme<'a>(results: &'a [SimResult], scheme: &str) -> Option<&'a SimResult> {
    results.iter().find(|r| r.scheme == scheme)
}
