//! What each constraint key's requests met (answered, failed, degraded, substituted,
//! late, their recent response times and ensemble sizes) and O2's recent decisions with
//! their reasons: the figures the dashboard (`crate::history`) samples. Bounded: at most
//! [`MAX_KEYS`] keys, [`LATENCIES_KEPT`] response times per key and [`DECISIONS_KEPT`]
//! decisions.

use std::collections::{HashMap, VecDeque};

use cocktail_policy::selection::{Adjustment, Constraint};
use cocktail_policy::tracking::Reselect;
use parking_lot::Mutex;

/// Constraint keys followed at once; requests of further keys are counted under none
/// until [`Traffic::retain`] forgets a key (clients choose keys, so they are bounded).
pub const MAX_KEYS: usize = 256;
/// Response times kept per key for its percentiles (the most recent ones).
pub const LATENCIES_KEPT: usize = 1024;
/// O2 decisions kept, newest last.
pub const DECISIONS_KEPT: usize = 200;

/// One constraint key's counts since the master started (or the key was first seen).
#[derive(Debug, Clone, Default)]
pub struct KeyTraffic {
    pub target_ms: f64,
    pub target_accuracy: f64,
    pub requests: u64,
    pub failed: u64,
    /// Answered with fewer voters than members.
    pub degraded: u64,
    /// Answered with a substitute standing in for a member.
    pub substituted: u64,
    /// Answered after `latency_ms`.
    pub slo_violations: u64,
    /// Members asked, summed over answered requests.
    pub members_asked: u64,
    latencies_ms: VecDeque<f64>,
}

impl KeyTraffic {
    /// The `q`-quantile (0 to 1) of the recent response times, nearest rank.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        if self.latencies_ms.is_empty() {
            return None;
        }
        let mut sorted: Vec<f64> = self.latencies_ms.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        Some(sorted[rank - 1])
    }

    fn latency(&mut self, ms: f64) {
        if self.latencies_ms.len() == LATENCIES_KEPT {
            self.latencies_ms.pop_front();
        }
        self.latencies_ms.push_back(ms);
    }
}

/// How one request ended, as [`Traffic::record`] counts it.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    Answered {
        members: usize,
        degraded: bool,
        substituted: bool,
    },
    Failed,
}

/// One O2 (or measured selection) change of an ensemble.
#[derive(Debug, Clone)]
pub struct SelectionDecision {
    /// Seconds since the Unix epoch.
    pub at_s: f64,
    pub key: String,
    pub kind: &'static str,
    pub members: Vec<String>,
    /// The accuracy of the window the decision was made on.
    pub window_accuracy: Option<f64>,
    pub reason: String,
}

/// Every key's [`KeyTraffic`] and the recent [`SelectionDecision`]s.
#[derive(Debug, Default)]
pub struct Traffic {
    keys: Mutex<HashMap<String, KeyTraffic>>,
    decisions: Mutex<VecDeque<SelectionDecision>>,
}

impl Traffic {
    /// Counts one request of `key` that took `elapsed_ms` and ended with `outcome`.
    pub fn record(&self, key: &str, constraint: &Constraint, elapsed_ms: f64, outcome: Outcome) {
        let mut keys = self.keys.lock();
        if !keys.contains_key(key) && keys.len() >= MAX_KEYS {
            return;
        }
        let k = keys.entry(key.to_owned()).or_default();
        k.target_ms = constraint.latency_ms;
        k.target_accuracy = constraint.accuracy;
        k.requests += 1;
        match outcome {
            Outcome::Failed => k.failed += 1,
            Outcome::Answered {
                members,
                degraded,
                substituted,
            } => {
                k.degraded += u64::from(degraded);
                k.substituted += u64::from(substituted);
                k.members_asked += members as u64;
                k.slo_violations += u64::from(elapsed_ms > constraint.latency_ms);
                k.latency(elapsed_ms);
            }
        }
    }

    /// A copy of every key's counts.
    pub fn keys(&self) -> Vec<(String, KeyTraffic)> {
        let mut all: Vec<_> = self
            .keys
            .lock()
            .iter()
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Forgets the keys `keep` says no (the master forgot their ensembles).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.keys.lock().retain(|k, _| keep(k));
    }

    /// Records an ensemble change of `key` to `members`.
    pub fn decided(
        &self,
        key: &str,
        change: &Adjustment,
        members: Vec<String>,
        window_accuracy: Option<f64>,
        at_s: f64,
    ) {
        let (kind, reason) = describe(change);
        let mut decisions = self.decisions.lock();
        if decisions.len() == DECISIONS_KEPT {
            decisions.pop_front();
        }
        decisions.push_back(SelectionDecision {
            at_s,
            key: key.to_owned(),
            kind,
            members,
            window_accuracy,
            reason: reason.to_owned(),
        });
    }

    /// The recent decisions, newest first.
    pub fn decisions(&self) -> Vec<SelectionDecision> {
        self.decisions.lock().iter().rev().cloned().collect()
    }
}

/// The kind of an ensemble change and why selection makes it (`policy::selection::adjust`,
/// `policy::tracking`).
pub fn describe(change: &Adjustment) -> (&'static str, &'static str) {
    match change {
        Adjustment::Keep => ("keep", "the window met the target with no member to spare"),
        Adjustment::Prune(_) => (
            "prune",
            "the window beat the accuracy target: the least accurate member left",
        ),
        Adjustment::Add(_) => (
            "add",
            "the window missed the accuracy target: the best candidate outside joined",
        ),
        Adjustment::Revert(_) => (
            "revert",
            "the window after the last addition did not confirm it: taken back",
        ),
        Adjustment::Refit(_) => (
            "refit",
            "a member's predicted response time no longer fits the latency target: O1 chose again",
        ),
        Adjustment::Measured(_) => (
            "measured",
            "measured selection: the set most accurate on the labelled buffer within the latency target",
        ),
        Adjustment::Tracked(_, Reselect::Interval) => (
            "tracked",
            "tracking: the cheapest choice that meets the target on the recent labels",
        ),
        Adjustment::Tracked(_, Reselect::Shift) => (
            "shift",
            "tracking: the ensemble fell short on the latest labels; chosen again on what came after",
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use cocktail_policy::selection::Objective;

    fn constraint() -> Constraint {
        Constraint {
            latency_ms: 10.0,
            accuracy: 0.9,
            objective: Objective::Accuracy,
        }
    }

    #[test]
    fn counts_and_percentiles() {
        let traffic = Traffic::default();
        for ms in 1..=100 {
            let outcome = Outcome::Answered {
                members: 3,
                degraded: ms == 50,
                substituted: ms == 60,
            };
            traffic.record("t|10|0.9|accuracy", &constraint(), f64::from(ms), outcome);
        }
        traffic.record("t|10|0.9|accuracy", &constraint(), 5.0, Outcome::Failed);
        let (_, k) = traffic.keys().pop().unwrap();
        assert_eq!(
            (k.requests, k.failed, k.degraded, k.substituted),
            (101, 1, 1, 1)
        );
        assert_eq!(k.slo_violations, 90);
        assert_eq!(k.members_asked, 300);
        assert_eq!(k.percentile(0.5), Some(50.0));
        assert_eq!(k.percentile(0.99), Some(99.0));
    }

    #[test]
    fn keys_and_latencies_are_bounded() {
        let traffic = Traffic::default();
        for i in 0..MAX_KEYS + 10 {
            traffic.record(&format!("k{i}"), &constraint(), 1.0, Outcome::Failed);
        }
        assert_eq!(traffic.keys().len(), MAX_KEYS);
        let ok = Outcome::Answered {
            members: 1,
            degraded: false,
            substituted: false,
        };
        for _ in 0..LATENCIES_KEPT + 5 {
            traffic.record("k0", &constraint(), 1.0, ok);
        }
        let k0 = traffic
            .keys()
            .into_iter()
            .find(|(k, _)| k == "k0")
            .unwrap()
            .1;
        assert_eq!(k0.latencies_ms.len(), LATENCIES_KEPT);
        traffic.retain(|k| k == "k0");
        assert_eq!(traffic.keys().len(), 1);
    }
}
