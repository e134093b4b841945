//! Adaptive batching parameters (MArk §4.3): a batch is submitted when it holds
//! `max_items` items or its first request has waited `window`. Both are tuned from the
//! model's profile on the instance: grow the batch size b while
//! `W + T_b ≤ RT_max` (no request misses the response-time target) and
//! `W + T_b ≤ b · T_1` (batching beats serving the b requests one by one), taking the
//! largest window both allow; the batch never exceeds the packing factor.

use std::time::Duration;

use crate::Profile;

/// When a worker submits a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPolicy {
    pub max_items: usize,
    pub window: Duration,
}

/// Response-time target used when none is configured: twice the single-item latency, so
/// a request waits at most about as long as one more inference.
pub const DEFAULT_RT_FACTOR: f64 = 2.0;

/// Tunes the policy for `threads` intra-op threads; `rt_max_us` defaults to
/// [`DEFAULT_RT_FACTOR`] times the single-item latency. Without a profile for that thread
/// count, batching is off (one item, no wait).
pub fn tune(profile: Option<&Profile>, threads: usize, rt_max_us: Option<f64>) -> BatchPolicy {
    let off = BatchPolicy {
        max_items: 1,
        window: Duration::ZERO,
    };
    let Some(profile) = profile else { return off };
    let Some(row) = profile.threads.iter().position(|&t| t == threads) else {
        return off;
    };
    let (Some(latencies), Some(pf)) =
        (profile.latency_us.get(row), profile.packing_factor.get(row))
    else {
        return off;
    };
    let Some(&single) = latencies.first() else {
        return off;
    };
    let rt_max = rt_max_us.unwrap_or(single * DEFAULT_RT_FACTOR);
    let mut best = off;
    for (&b, &t_b) in profile.batch_sizes.iter().zip(latencies) {
        if b > *pf as usize {
            break;
        }
        let window_us = (rt_max - t_b).min(b as f64 * single - t_b);
        if window_us < 0.0 {
            break;
        }
        best = BatchPolicy {
            max_items: b,
            window: Duration::from_secs_f64(window_us / 1e6),
        };
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(latencies: Vec<f64>, pf: u32) -> Profile {
        Profile {
            host: "test".into(),
            seq_len: None,
            threads: vec![1],
            batch_sizes: vec![1, 2, 4, 8, 16, 32],
            latency_us: vec![latencies],
            packing_factor: vec![pf],
        }
    }

    #[test]
    fn tiny_model_batches_up_to_pf_with_a_short_window() {
        let p = profile(vec![10.0, 10.5, 11.0, 12.0, 13.0, 14.0], 32);
        let policy = tune(Some(&p), 1, None);
        assert_eq!(policy.max_items, 32);
        // RT_max = 20 µs, T_32 = 14 µs: a 6 µs window.
        assert_eq!(policy.window, Duration::from_micros(6));
    }

    #[test]
    fn compute_bound_model_does_not_wait() {
        let p = profile(vec![1000.0, 2000.0, 4000.0, 8000.0, 16000.0, 32000.0], 1);
        assert_eq!(
            tune(Some(&p), 1, None),
            BatchPolicy {
                max_items: 1,
                window: Duration::ZERO
            }
        );
    }

    #[test]
    fn response_time_target_caps_the_batch() {
        let p = profile(vec![100.0, 110.0, 130.0, 170.0, 300.0, 600.0], 32);
        // RT_max 150 µs: b=4 (130) leaves 20 µs, b=8 (170) breaks it.
        let policy = tune(Some(&p), 1, Some(150.0));
        assert_eq!(policy.max_items, 4);
        assert_eq!(policy.window, Duration::from_micros(20));
        // Pf caps the batch before the target does.
        let capped = profile(vec![100.0, 110.0, 130.0, 170.0, 300.0, 600.0], 2);
        assert_eq!(tune(Some(&capped), 1, Some(1e6)).max_items, 2);
    }

    #[test]
    fn unknown_threads_or_profile_turn_batching_off() {
        let p = profile(vec![10.0; 6], 32);
        assert_eq!(tune(Some(&p), 4, None).max_items, 1);
        assert_eq!(tune(None, 1, None).max_items, 1);
    }
}
