//! What the resource controller measures on the request path: requests received and
//! served, and per model pool the requests that used it, the member calls and the
//! deadlines missed.
//! Counters only grow; the controller works with the differences between snapshots.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

/// One model's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelUsage {
    /// Requests whose ensemble included the model.
    pub requests: u64,
    /// Member calls that missed their deadline.
    pub misses: u64,
}

impl ModelUsage {
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            requests: self.requests.saturating_sub(earlier.requests),
            misses: self.misses.saturating_sub(earlier.misses),
        }
    }
}

/// All counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Requests a served task received, answered or not: the load the control loop
    /// forecasts, as the simulator counts it. Answers lag it by their wait: while a
    /// cold start's pools work off their backlog the answered rate climbs, and the
    /// climb would count as the forecast's misses.
    pub arrived: u64,
    /// Requests answered.
    pub requests: u64,
    pub models: HashMap<String, ModelUsage>,
}

impl Snapshot {
    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            arrived: self.arrived.saturating_sub(earlier.arrived),
            requests: self.requests.saturating_sub(earlier.requests),
            models: self
                .models
                .iter()
                .map(|(m, u)| {
                    let before = earlier.models.get(m).copied().unwrap_or_default();
                    (m.clone(), u.since(&before))
                })
                .collect(),
        }
    }
}

/// Member outcomes kept per model for SLO tracking over the last requests.
pub const RECENT_OUTCOMES: usize = 1000;

#[derive(Debug, Default)]
pub struct Usage {
    /// [`Snapshot::arrived`], counted apart: an arrival takes no lock.
    arrived: AtomicU64,
    inner: Mutex<Snapshot>,
    /// Per model, whether each of its last member calls missed its deadline.
    recent: Mutex<HashMap<String, VecDeque<bool>>>,
}

impl Usage {
    /// A request for a served task came in.
    pub fn arrive(&self) {
        self.arrived.fetch_add(1, Ordering::Relaxed);
    }

    /// A request served by its members: each member's model, and whether its call
    /// missed the deadline. Keys are allocated only the first time a model is seen.
    pub fn record<'a>(&self, members: impl Iterator<Item = (&'a str, bool)> + Clone) {
        {
            let mut s = self.inner.lock();
            s.requests += 1;
            for (model, missed) in members.clone() {
                let add = ModelUsage {
                    requests: 1,
                    misses: u64::from(missed),
                };
                match s.models.get_mut(model) {
                    Some(u) => {
                        u.requests += add.requests;
                        u.misses += add.misses;
                    }
                    None => {
                        s.models.insert(model.to_owned(), add);
                    }
                }
            }
        }
        let mut recent = self.recent.lock();
        for (model, missed) in members {
            match recent.get_mut(model) {
                Some(outcomes) => {
                    outcomes.push_back(missed);
                    if outcomes.len() > RECENT_OUTCOMES {
                        outcomes.pop_front();
                    }
                }
                None => {
                    recent.insert(model.to_owned(), VecDeque::from([missed]));
                }
            }
        }
    }

    /// Share of deadline misses among the model's last `count` member calls (MArk §4.4),
    /// per model with any calls.
    pub fn recent_misses(&self, count: usize) -> HashMap<String, f64> {
        let recent = self.recent.lock();
        recent
            .iter()
            .filter(|(_, o)| !o.is_empty())
            .map(|(m, outcomes)| {
                let last: Vec<bool> = outcomes.iter().rev().take(count.max(1)).copied().collect();
                let missed = last.iter().filter(|&&x| x).count();
                (m.clone(), missed as f64 / last.len() as f64)
            })
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            arrived: self.arrived.load(Ordering::Relaxed),
            ..self.inner.lock().clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_between_snapshots() {
        let usage = Usage::default();
        usage.record([("a", false), ("b", false)].into_iter());
        let first = usage.snapshot();
        usage.record([("a", true)].into_iter());
        usage.record([("b", false)].into_iter());
        let delta = usage.snapshot().since(&first);
        assert_eq!(delta.requests, 2);
        assert_eq!(
            delta.models["a"],
            ModelUsage {
                requests: 1,
                misses: 1
            }
        );
        assert_eq!(
            delta.models["b"],
            ModelUsage {
                requests: 1,
                misses: 0
            }
        );
    }
}
