//! Request-rate traces, one rate per interval, seeded and scaled to a mean rate: a
//! diurnal Wikipedia-like one, a bursty Twitter-like one, a Markov-modulated Poisson
//! process, plain Poisson, and a strong daily cycle with bursts that last minutes. The load generator and the simulator (issue 6) replay them;
//! the predictor bench scores predictors on them.

use cocktail_common::catalog::unit_random;

/// The trace names [`generate`] knows.
pub const NAMES: &[&str] = &["wiki", "twitter", "mmpp", "poisson", "diurnal"];

/// `len` rates with mean about `mean`, one per interval of `interval_s` seconds.
pub fn generate(name: &str, len: usize, mean: f64, interval_s: f64, seed: u64) -> Option<Vec<f64>> {
    let day = (86_400.0 / interval_s).max(1.0);
    let mut counter = 0_u64;
    let mut uniform = || {
        counter += 1;
        unit_random(seed, counter)
    };
    let rates: Vec<f64> = match name {
        // Two daily peaks of different height, slow weekly drift, mild noise.
        "wiki" => (0..len)
            .map(|t| {
                let phase = std::f64::consts::TAU * t as f64 / day;
                let shape = 1.0 + 0.35 * phase.sin() + 0.12 * (2.0 * phase).sin();
                let drift = 1.0 + 0.05 * (phase / 7.0).sin();
                shape * drift * (1.0 + 0.05 * (2.0 * uniform() - 1.0))
            })
            .collect(),
        // A lower diurnal base with sudden bursts that decay.
        "twitter" => {
            let mut burst = 0.0;
            (0..len)
                .map(|t| {
                    let phase = std::f64::consts::TAU * t as f64 / day;
                    if uniform() < 0.02 {
                        burst += 1.5 + 2.0 * uniform();
                    }
                    burst *= 0.85;
                    (1.0 + 0.2 * phase.sin()) * (1.0 + 0.15 * (2.0 * uniform() - 1.0)) + burst
                })
                .collect()
        }
        // Two states, low and high, switching at random.
        "mmpp" => {
            let mut high = false;
            (0..len)
                .map(|_| {
                    if uniform() < 0.05 {
                        high = !high;
                    }
                    let level = if high { 1.8 } else { 0.6 };
                    level * (1.0 + 0.1 * (2.0 * uniform() - 1.0))
                })
                .collect()
        }
        // Counts of a Poisson process (normal approximation per interval).
        "poisson" => (0..len)
            .map(|_| {
                let events = mean * interval_s;
                let (u1, u2) = (uniform().max(1e-12), uniform());
                let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                ((events + events.sqrt() * normal).max(0.0) / interval_s) / mean.max(1e-12)
            })
            .collect(),
        // A day from its trough (×0.4 at the start, ×1.6 at noon), with bursts of half
        // to one and a half times the base about every 20 minutes, each fading over a few
        // minutes: long enough for an autoscaler to act on, unlike Twitter's seconds.
        "diurnal" => {
            let mut burst = 0.0;
            let decay = (-interval_s / 180.0).exp();
            (0..len)
                .map(|t| {
                    let phase = std::f64::consts::TAU * t as f64 / day;
                    if uniform() < interval_s / 1200.0 {
                        burst += 0.5 + uniform();
                    }
                    burst *= decay;
                    let base = 1.0 - 0.6 * phase.cos();
                    base * (1.0 + burst) * (1.0 + 0.05 * (2.0 * uniform() - 1.0))
                })
                .collect()
        }
        _ => return None,
    };
    let average = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    Some(
        rates
            .iter()
            .map(|r| r / average.max(1e-12) * mean)
            .collect(),
    )
}

/// How a trace file lists its load (`--trace-format`: `rates`, `timestamps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FileFormat {
    /// One request rate per line, one line per second.
    Rates,
    /// One arrival time in seconds per line (any order); binned per second.
    Timestamps,
}

/// Reads a trace file as one rate per second. Blank lines and lines starting with `#`
/// are skipped; a first line that is not a number is taken as a header.
pub fn load(path: &std::path::Path, format: FileFormat) -> anyhow::Result<Vec<f64>> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the trace {}", path.display()))?;
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => values.push(v),
            Err(_) if values.is_empty() && i == 0 => {} // a header
            _ => anyhow::bail!(
                "{} line {}: `{line}` is not a non-negative number",
                path.display(),
                i + 1
            ),
        }
    }
    if values.is_empty() {
        anyhow::bail!("{} holds no load", path.display());
    }
    Ok(match format {
        FileFormat::Rates => values,
        FileFormat::Timestamps => {
            let start = values.iter().copied().fold(f64::INFINITY, f64::min);
            let end = values.iter().copied().fold(0.0, f64::max);
            let mut rates = vec![0.0; (end - start).floor() as usize + 1];
            for v in values {
                if let Some(r) = rates.get_mut((v - start).floor() as usize) {
                    *r += 1.0;
                }
            }
            rates
        }
    })
}

/// Scales `rates` to average `mean` (unchanged when they are all zero).
pub fn scale_to(rates: &mut [f64], mean: f64) {
    let average = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    if average > 0.0 {
        for r in rates.iter_mut() {
            *r *= mean / average;
        }
    }
}

/// The arrival times (seconds) of an open-loop Poisson process whose rate changes every
/// second as `rates` says; seeded, so the load generator and the simulator replay the
/// same arrivals.
#[derive(Debug, Clone)]
pub struct Arrivals<'a> {
    rates: &'a [f64],
    rng: rand::rngs::SmallRng,
    t: f64,
}

impl<'a> Arrivals<'a> {
    pub fn new(rates: &'a [f64], seed: u64) -> Self {
        use rand::SeedableRng;
        Self {
            rates,
            rng: rand::rngs::SmallRng::seed_from_u64(seed ^ 0xA5A5_5A5A_0F0F_F0F0),
            t: 0.0,
        }
    }
}

impl Iterator for Arrivals<'_> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        use rand::Rng;
        loop {
            let second = self.t.floor() as usize;
            let rate = *self.rates.get(second)?;
            let next = if rate > 0.0 {
                self.t - (1.0 - self.rng.random::<f64>()).ln() / rate
            } else {
                f64::INFINITY
            };
            if next < (second + 1) as f64 {
                self.t = next;
                return Some(next);
            }
            self.t = (second + 1) as f64; // memoryless: draw again in the next second
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_seeded_and_scaled_to_their_mean() {
        for name in NAMES {
            let a = generate(name, 2000, 50.0, 60.0, 3).unwrap();
            let mean = a.iter().sum::<f64>() / a.len() as f64;
            assert!((mean - 50.0).abs() < 1e-6, "{name}: {mean}");
            assert!(a.iter().all(|r| *r >= 0.0));
            assert_eq!(a, generate(name, 2000, 50.0, 60.0, 3).unwrap());
            assert_ne!(a, generate(name, 2000, 50.0, 60.0, 4).unwrap());
        }
        assert!(generate("nope", 10, 1.0, 1.0, 1).is_none());
    }

    #[test]
    fn trace_files_hold_rates_or_timestamps() {
        let dir = std::env::temp_dir().join(format!("cocktail-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rates = dir.join("rates.txt");
        std::fs::write(&rates, "rate\n1\n3\n\n# comment\n2\n").unwrap();
        assert_eq!(load(&rates, FileFormat::Rates).unwrap(), [1.0, 3.0, 2.0]);
        let stamps = dir.join("stamps.txt");
        std::fs::write(&stamps, "10.5\n10.1\n12.9\n").unwrap();
        assert_eq!(
            load(&stamps, FileFormat::Timestamps).unwrap(),
            [2.0, 0.0, 1.0]
        );
        let bad = dir.join("bad.txt");
        std::fs::write(&bad, "1\n-2\n").unwrap();
        let error = load(&bad, FileFormat::Rates).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
        let mut scaled = vec![1.0, 3.0];
        scale_to(&mut scaled, 10.0);
        assert_eq!(scaled, [5.0, 15.0]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn arrivals_follow_the_rate_and_replay_for_a_seed() {
        let rates = [100.0, 0.0, 300.0];
        let times: Vec<f64> = Arrivals::new(&rates, 7).collect();
        let in_second = |s: f64| times.iter().filter(|t| t.floor() == s).count();
        assert!((70..130).contains(&in_second(0.0)), "{}", in_second(0.0));
        assert_eq!(in_second(1.0), 0);
        assert!((240..360).contains(&in_second(2.0)), "{}", in_second(2.0));
        assert!(times.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(times, Arrivals::new(&rates, 7).collect::<Vec<_>>());
    }
}
