//! The instance mix of one pool: how many instances of each type in a short list
//! (Ribbon §3.2, Kairos §5.2), the configurations a search may try, and how a
//! configuration is measured ([`ConfigEvaluator`]). Ribbon ([`crate::ribbon`]) and
//! Kairos ([`crate::kairos`]) search this space.

use serde::{Deserialize, Serialize};

/// Types one pool may mix at most (Ribbon Fig. 8: the gains stop beyond three; the
/// fourth is Kairos' pool of Table 4).
pub const MAX_TYPES: usize = 4;

/// Instances per type, in the order of the pool's type list.
pub type Config = Vec<u32>;

/// The types a pool may mix, their prices and the most instances of each to consider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Space {
    pub types: Vec<String>,
    /// USD per hour of one instance of each type.
    pub prices: Vec<f64>,
    /// The upper bound `m_i` per type (Ribbon Eq. 2).
    pub max: Vec<u32>,
}

impl Space {
    /// Every configuration with `0..=max[i]` instances of type `i` and at least one
    /// instance, in increasing order along each dimension (Ribbon §4: "arranges the
    /// configurations in increasing order").
    pub fn configs(&self) -> Vec<Config> {
        let mut all = vec![Vec::new()];
        for &m in &self.max {
            all = all
                .into_iter()
                .flat_map(|prefix: Config| {
                    (0..=m).map(move |c| {
                        let mut next = prefix.clone();
                        next.push(c);
                        next
                    })
                })
                .collect();
        }
        all.retain(|c| c.iter().any(|&n| n > 0));
        all
    }

    /// Where `config` stands in [`Space::configs`] (`None` outside the space or empty):
    /// the configurations are in mixed-radix order of the counts, less the empty one at
    /// the front.
    pub fn index(&self, config: &[u32]) -> Option<usize> {
        if config.len() != self.max.len() || config.iter().zip(&self.max).any(|(c, m)| c > m) {
            return None;
        }
        let flat = config
            .iter()
            .zip(&self.max)
            .fold(0usize, |acc, (&c, &m)| acc * (m as usize + 1) + c as usize);
        flat.checked_sub(1)
    }

    /// The configurations that cost at most `budget` per hour.
    pub fn configs_within(&self, budget: f64) -> Vec<Config> {
        self.configs()
            .into_iter()
            .filter(|c| self.cost(c) <= budget + 1e-9)
            .collect()
    }

    /// USD per hour of a configuration.
    pub fn cost(&self, config: &[u32]) -> f64 {
        config
            .iter()
            .zip(&self.prices)
            .map(|(&n, p)| f64::from(n) * p)
            .sum()
    }

    /// The cost of the largest configuration, `Σ p_i m_i` (Eq. 2's normaliser).
    pub fn max_cost(&self) -> f64 {
        self.cost(&self.max)
    }

    /// Configurations of at least one instance costing at most `budget` per hour, each
    /// type up to what the budget alone buys (Kairos §5.2).
    pub fn within_budget(types: Vec<String>, prices: Vec<f64>, budget: f64) -> Self {
        let max = prices
            .iter()
            .map(|p| {
                if *p > 0.0 {
                    (budget / p).floor() as u32
                } else {
                    0
                }
            })
            .collect();
        Self { types, prices, max }
    }
}

/// `a ≤ b` in every dimension: `a` is a sub-configuration of `b` (Kairos §5.2).
pub fn dominated_by(a: &[u32], b: &[u32]) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y)
}

/// How a configuration performed, measured by a [`ConfigEvaluator`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Share of queries answered within the latency target (`R_sat`, Ribbon Eq. 2).
    pub satisfaction: f64,
    /// Queries measured.
    pub queries: usize,
}

/// Deploys a configuration, sends it queries and reports how many met the latency target:
/// the simulator (fast) or the live system (a measurement window on real workers).
pub trait ConfigEvaluator {
    type Error: std::fmt::Display;

    /// Serves `rate_qps` queries per second with `config` for one measurement window.
    fn measure(&mut self, config: &[u32], rate_qps: f64) -> Result<Measurement, Self::Error>;

    /// The highest rate `config` serves with at least `target` of its queries in time
    /// (Kairos §7: raise the rate until QoS breaks), by bisection between 0 and
    /// `ceiling_qps` to within 1 %.
    fn throughput(
        &mut self,
        config: &[u32],
        target: f64,
        ceiling_qps: f64,
    ) -> Result<f64, Self::Error> {
        let (mut low, mut high) = (0.0, ceiling_qps);
        if self.measure(config, high)?.satisfaction >= target {
            return Ok(high);
        }
        while high - low > 0.01 * high.max(1e-9) {
            let mid = 0.5 * (low + high);
            if self.measure(config, mid)?.satisfaction >= target {
                low = mid;
            } else {
                high = mid;
            }
        }
        Ok(low)
    }
}

/// What moves a pool's instances to `target`: per type, how many to launch, and which
/// instances to terminate (the longest idle first). `instances` are `(id, type, idle_s)`.
pub fn reconcile(
    target: &[u32],
    types: &[String],
    instances: &[(String, String, f64)],
) -> (Vec<(usize, u32)>, Vec<String>) {
    let mut launch = Vec::new();
    let mut terminate = Vec::new();
    for (t, name) in types.iter().enumerate() {
        let want = target.get(t).copied().unwrap_or(0) as usize;
        let mut mine: Vec<&(String, String, f64)> =
            instances.iter().filter(|i| &i.1 == name).collect();
        if mine.len() < want {
            launch.push((t, (want - mine.len()) as u32));
        } else {
            mine.sort_by(|a, b| b.2.total_cmp(&a.2));
            terminate.extend(mine[..mine.len() - want].iter().map(|i| i.0.clone()));
        }
    }
    (launch, terminate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Space {
        Space {
            types: vec!["a".into(), "b".into()],
            prices: vec![1.0, 0.25],
            max: vec![2, 3],
        }
    }

    #[test]
    fn configs_cover_the_box_without_the_empty_one() {
        let configs = space().configs();
        assert_eq!(configs.len(), 3 * 4 - 1);
        assert_eq!(configs[0], vec![0, 1]);
        assert_eq!(configs.last().unwrap(), &vec![2, 3]);
        for (i, c) in configs.iter().enumerate() {
            assert_eq!(space().index(c), Some(i));
        }
        assert_eq!(space().index(&[0, 0]), None);
        assert_eq!(space().index(&[3, 0]), None);
        assert_eq!(space().max_cost(), 2.75);
        assert_eq!(space().cost(&[1, 2]), 1.5);
    }

    #[test]
    fn a_budget_bounds_each_type() {
        let s = Space::within_budget(vec!["a".into(), "b".into()], vec![1.0, 0.3], 2.5);
        assert_eq!(s.max, vec![2, 8]);
        let within = s.configs_within(2.5);
        assert!(within.iter().all(|c| s.cost(c) <= 2.5 + 1e-9));
        assert!(within.contains(&vec![1, 5]) && !within.contains(&vec![2, 2]));
        assert!(dominated_by(&[1, 2], &[1, 3]));
        assert!(!dominated_by(&[2, 2], &[1, 3]));
    }

    #[test]
    fn reconcile_launches_the_missing_and_ends_the_idlest() {
        let types = vec!["a".to_owned(), "b".to_owned()];
        let have = vec![
            ("a1".to_owned(), "a".to_owned(), 5.0),
            ("a2".to_owned(), "a".to_owned(), 50.0),
            ("a3".to_owned(), "a".to_owned(), 1.0),
            ("x".to_owned(), "other".to_owned(), 9.0),
        ];
        let (launch, terminate) = reconcile(&[1, 2], &types, &have);
        assert_eq!(launch, vec![(1, 2)]);
        assert_eq!(terminate, vec!["a2".to_owned(), "a1".to_owned()]);
    }

    struct Linear;
    impl ConfigEvaluator for Linear {
        type Error = String;
        fn measure(&mut self, config: &[u32], rate: f64) -> Result<Measurement, String> {
            let capacity = 10.0 * f64::from(config[0]);
            Ok(Measurement {
                satisfaction: if rate <= capacity { 1.0 } else { 0.5 },
                queries: 100,
            })
        }
    }

    #[test]
    fn throughput_bisects_to_the_capacity() {
        let t = Linear.throughput(&[3], 0.99, 100.0).unwrap();
        assert!((29.5..=30.0).contains(&t), "{t}");
        assert_eq!(Linear.throughput(&[20], 0.99, 100.0).unwrap(), 100.0);
    }
}
