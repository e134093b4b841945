//! Latency summaries for benchmark tables.

use std::time::Duration;

/// The nearest-rank `q` quantile of `sorted` (ascending): the smallest value with at
/// least a share `q` of the values at or below it; `None` for no values. The one
/// percentile rule of every table, report and simulated run.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = (sorted.len() as f64 * q).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1).min(sorted.len().saturating_sub(1)))
        .copied()
}

/// The median (the upper one of an even count), `NaN` for no values; sorts `values`.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    upper_median(values).unwrap_or(f64::NAN)
}

/// The middle value of `sorted`, the upper one of an even count (unlike
/// [`nearest_rank`]`(sorted, 0.5)`, the lower one); `None` for no values.
pub fn upper_median<T: Copy>(sorted: &[T]) -> Option<T> {
    sorted.get(sorted.len() / 2).copied()
}

/// Percentiles of a sample of latencies (nearest-rank).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    pub fn of(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        let rank = |q: f64| nearest_rank(samples, q).unwrap_or_default();
        Self {
            count: samples.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: samples.last().copied().unwrap_or_default(),
        }
    }
}

/// Microseconds with one decimal, for tables.
pub fn us(d: Duration) -> String {
    format!("{:.1}", micros(d))
}

/// A duration in microseconds.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A goal's verdict as the benchmarks' tables print it.
pub fn said(met: bool) -> &'static str {
    if met { "met" } else { "not met" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        let s = Summary::of(&mut samples);
        assert_eq!(
            (s.count, s.p50, s.p99, s.max),
            (
                100,
                Duration::from_micros(50),
                Duration::from_micros(99),
                Duration::from_micros(100)
            )
        );
        assert_eq!(Summary::of(&mut []).p50, Duration::ZERO);
    }

    #[test]
    fn nearest_rank_and_upper_median() {
        let sorted = [1, 2, 3, 4];
        let cases = [
            (0.0, 1),
            (0.25, 1),
            (0.26, 2),
            (0.5, 2),
            (0.75, 3),
            (0.99, 4),
            (1.0, 4),
        ];
        for (q, want) in cases {
            assert_eq!(nearest_rank(&sorted, q), Some(want), "q = {q}");
        }
        assert_eq!(nearest_rank::<u32>(&[], 0.5), None);
        assert_eq!(upper_median(&sorted), Some(3));
        assert_eq!(upper_median(&[7]), Some(7));
        assert!(median(&mut []).is_nan());
    }
}
