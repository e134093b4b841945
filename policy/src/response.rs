//! Predicted response time of a member call (issue 14): a request's `latency_ms` is the
//! end-to-end time the client wants, so a candidate fits when its inference on the
//! instance type it runs on *plus* what the call adds around it (the network hop,
//! (de)serialisation, waiting for a slot, the worker's queue) fits. The master measures
//! that overhead per pool on every answered member call, and the simulator on every
//! simulated one, with [`Overhead`]; [`predicted`] turns a task's candidates into
//! candidates whose `latency_ms` is the predicted response time.

use crate::selection::Candidate;

/// Calls a pool's estimate looks back on: enough for a stable 90th percentile, few
/// enough to follow a pool that starts queueing within a second or two of load.
const WINDOW: usize = 64;

/// The share of recent calls whose overhead the prediction covers. A quantile, not the
/// mean plus a spread: when a few calls in a hundred wait for a slot, the others still
/// answer in time, and the prediction should say so.
const QUANTILE: f64 = 0.9;

/// How long a request waits for members that are all predicted to be late (nothing the
/// constraint may use fits its target under the load of the moment, as
/// [`crate::selection::initial_or_feasible`] falls back to): their late answer, an SLO
/// violation, beats no answer at all.
pub const LATE_LIMIT_MS: f64 = 1000.0;

/// How long after its arrival a request stops waiting for its members: its `latency_ms`
/// plus the grace (members that answer later are left out of the vote), or, when none of
/// its members is predicted to answer in time (`none_fits`), up to [`LATE_LIMIT_MS`].
pub fn wait_ms(latency_ms: f64, grace_ms: f64, none_fits: bool) -> f64 {
    let due = latency_ms + grace_ms;
    if none_fits {
        due.max(LATE_LIMIT_MS)
    } else {
        due
    }
}

/// How long a pool's measured overhead speaks for it without a new call. Selection sends
/// nothing to a pool its estimate predicts too slow, so an estimate made during a burst
/// that queued the pool's calls, or from a cold start's first calls, would otherwise
/// rule the model out for good: nothing would ever replace those samples. Once its last
/// call is this old, the pool is predicted as an unmeasured one is (with the prior, the
/// other pools' median), and its next calls start a new estimate. O2's interval: a
/// model left out that long is worth another look.
pub const MAX_AGE_S: f64 = 30.0;

/// A pool's member-call overhead: call time minus predicted inference, over its last
/// [`WINDOW`] answered calls, forgotten [`MAX_AGE_S`] after the last one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Overhead {
    /// The last calls' overheads in ms, a ring once full.
    recent: Vec<f64>,
    next: usize,
    samples: u64,
    /// When the last call was observed, in the caller's seconds (the simulator's clock,
    /// or the master's since it started).
    last_s: f64,
}

impl Overhead {
    /// One call answered at `at_s`: how long it took from the master's point of view
    /// (from asking the pool for a slot to reading the answer) and the inference it
    /// needed on its instance's type. Negative overheads (a worker faster than its
    /// profile) count as 0; overheads are kept to the microsecond, the resolution calls
    /// are timed at. The first call after [`MAX_AGE_S`] without one starts a new window.
    pub fn observe(&mut self, at_s: f64, call_ms: f64, inference_ms: f64) {
        let sample = ((call_ms - inference_ms) * 1e3).round().max(0.0) / 1e3;
        if !sample.is_finite() {
            return;
        }
        if self.stale(at_s) {
            self.recent.clear();
            self.next = 0;
        }
        self.last_s = self.last_s.max(at_s);
        if self.recent.len() < WINDOW {
            self.recent.push(sample);
        } else if let Some(slot) = self.recent.get_mut(self.next) {
            *slot = sample;
        }
        self.next = (self.next + 1) % WINDOW;
        self.samples += 1;
    }

    /// The overhead to expect at `now_s` of the next call (the [`QUANTILE`] of the
    /// recent calls'), once one has been measured and while the last is at most
    /// [`MAX_AGE_S`] old.
    pub fn estimate_ms(&self, now_s: f64) -> Option<f64> {
        if self.recent.is_empty() || self.stale(now_s) {
            return None;
        }
        let mut sorted = self.recent.clone();
        sorted.sort_by(f64::total_cmp);
        // Nearest rank: the smallest overhead at least QUANTILE of the calls stayed within.
        let rank = ((QUANTILE * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted.get(rank - 1).copied()
    }

    /// Whether the calls measured so far are too old to speak for the pool at `now_s`.
    fn stale(&self, now_s: f64) -> bool {
        now_s - self.last_s > MAX_AGE_S
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// The overhead to assume for a pool that has not answered a call yet: the median of
/// the pools that have (the hop is the same network), else none.
pub fn prior(estimates: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let mut known: Vec<f64> = estimates.into_iter().flatten().collect();
    if known.is_empty() {
        return None;
    }
    known.sort_by(f64::total_cmp);
    Some(known[known.len() / 2])
}

/// `models` with each `latency_ms` replaced by the predicted response time: the
/// inference time on the type it runs on (`inference_ms[m]`, `None`: the profile's) plus
/// its pool's overhead (`overhead_ms[m]`, `None`: `prior`, and none before any call was
/// measured anywhere). A model that cannot serve keeps an infinite latency.
pub fn predicted(
    models: &[Candidate],
    inference_ms: &[Option<f64>],
    overhead_ms: &[Option<f64>],
    prior: Option<f64>,
) -> Vec<Candidate> {
    models
        .iter()
        .enumerate()
        .map(|(m, c)| {
            let inference = inference_ms
                .get(m)
                .copied()
                .flatten()
                .unwrap_or(c.latency_ms);
            let overhead = overhead_ms
                .get(m)
                .copied()
                .flatten()
                .or(prior)
                .unwrap_or(0.0);
            Candidate {
                latency_ms: inference + overhead,
                ..c.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_waits_past_its_target_only_when_no_member_fits() {
        assert_eq!(wait_ms(2.0, 0.0, false), 2.0);
        assert_eq!(wait_ms(2.0, 5.0, false), 7.0, "the grace counts");
        assert_eq!(wait_ms(2.0, 0.0, true), LATE_LIMIT_MS);
        assert_eq!(
            wait_ms(2.0, 5000.0, true),
            5002.0,
            "never less than the grace"
        );
    }

    #[test]
    fn the_estimate_is_a_high_quantile_of_the_recent_calls() {
        let mut o = Overhead::default();
        assert_eq!(o.estimate_ms(0.0), None, "nothing measured yet");
        o.observe(0.0, 1.3, 0.3);
        assert_eq!(o.estimate_ms(0.0), Some(1.0), "the first call sets it");
        // Five calls in a hundred wait 4 ms for a slot: the rest still answer after the
        // hop alone, and so does the prediction.
        for k in 0..100 {
            o.observe(0.0, if k % 20 == 0 { 5.3 } else { 0.8 }, 0.3);
        }
        assert_eq!(o.estimate_ms(0.0), Some(0.5));
        // A pool that starts queueing: within a window the estimate says so.
        for _ in 0..WINDOW / 5 {
            o.observe(0.0, 10.3, 0.3);
        }
        assert!(
            o.estimate_ms(0.0).unwrap() > 9.0,
            "{:?}",
            o.estimate_ms(0.0)
        );
        o.observe(0.0, 0.1, 0.3);
        assert_eq!(o.samples(), 1 + 100 + WINDOW as u64 / 5 + 1);
        // And forgets it once the queue is gone.
        for _ in 0..WINDOW {
            o.observe(0.0, 0.8, 0.3);
        }
        assert_eq!(o.estimate_ms(0.0), Some(0.5));
    }

    #[test]
    fn a_pool_left_without_calls_is_measured_afresh() {
        // A burst queues the pool's calls; selection then sends it nothing.
        let mut o = Overhead::default();
        for k in 0..WINDOW {
            o.observe(k as f64 * 0.01, 20.3, 0.3);
        }
        let last = (WINDOW - 1) as f64 * 0.01;
        assert_eq!(o.estimate_ms(last + MAX_AGE_S), Some(20.0), "still its own");
        assert_eq!(
            o.estimate_ms(last + MAX_AGE_S + 1.0),
            None,
            "too old: the pool takes the prior, as an unmeasured one"
        );
        // The next call, after the queue is gone, starts a new window: the burst's
        // calls do not outvote it.
        o.observe(last + MAX_AGE_S + 1.0, 0.8, 0.3);
        assert_eq!(o.estimate_ms(last + MAX_AGE_S + 1.0), Some(0.5));
        assert_eq!(o.samples(), WINDOW as u64 + 1);
    }

    #[test]
    fn predictions_add_the_pools_overhead_or_the_fleets_to_the_inference_on_its_type() {
        let models = [
            Candidate {
                latency_ms: 0.2,
                accuracy: 0.9,
                packing_factor: 1,
            },
            Candidate {
                latency_ms: 0.1,
                accuracy: 0.8,
                packing_factor: 2,
            },
            Candidate {
                latency_ms: f64::INFINITY,
                accuracy: 0.7,
                packing_factor: 1,
            },
        ];
        let prior = prior([Some(0.5), None, Some(0.3), Some(0.9)]);
        assert_eq!(prior, Some(0.5));
        let p = predicted(
            &models,
            &[Some(0.4), None, None],
            &[Some(1.0), None, None],
            prior,
        );
        let latency: Vec<f64> = p.iter().map(|c| c.latency_ms).collect();
        assert_eq!(latency, [1.4, 0.6, f64::INFINITY]);
        assert_eq!(p[1].packing_factor, 2);
        let unmeasured = predicted(&models, &[None, None, None], &[None, None, None], None);
        assert_eq!(unmeasured, models, "before any call: the profiles alone");
    }
}
