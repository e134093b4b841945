//! Latency summaries for benchmark tables.

use std::time::Duration;

/// The median (the upper one of an even count), `NaN` for no values; sorts `values`.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
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
        let rank = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).saturating_sub(1);
            samples.get(i).copied().unwrap_or_default()
        };
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
    format!("{:.1}", d.as_secs_f64() * 1e6)
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
}
