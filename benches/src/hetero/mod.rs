//! A pool that mixes instance types, serving batched queries of varying size
//! (Ribbon §5.1, Kairos §7): a discrete-event simulation of one model's pool, the
//! [`ConfigEvaluator`] the optimisers run on, the baselines they are compared against
//! ([`search`]) and the study behind `docs/results.md` ([`study`]).
//!
//! Each instance serves one query (a batch) at a time, as in both papers; a query's
//! latency on a type comes from [`BatchLatency`], the model's profile fitted and carried
//! to the type. Arrivals are Poisson and batch sizes heavy-tailed log-normal; both are
//! drawn once per seed at unit rate, so every configuration and every rate sees the same
//! queries (common random numbers keep the search spaces smooth).

pub mod live;
pub mod search;
pub mod study;

use std::collections::VecDeque;

use anyhow::Context;
use cocktail_common::Zoo;
use cocktail_common::catalog::{Catalog, GpuModel, InstanceType};
use cocktail_common::latency::BatchLatency;
use cocktail_policy::kairos::{self, Server, Waiting};
use cocktail_policy::mix::{ConfigEvaluator, Measurement, Space};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// One model on a short list of instance types, with its latency target.
#[derive(Debug, Clone)]
pub struct PoolModel {
    pub model: String,
    pub types: Vec<InstanceType>,
    pub latency: BatchLatency,
    pub gpu: GpuModel,
    pub qos_ms: f64,
}

impl PoolModel {
    /// `model` from the zoo on `types` from the catalog.
    pub fn load(
        zoo: &Zoo,
        catalog: &Catalog,
        model: &str,
        types: &[&str],
        qos_ms: f64,
    ) -> anyhow::Result<Self> {
        let entry = zoo.model(model)?;
        let profile = entry
            .profile
            .as_ref()
            .with_context(|| format!("`{model}` has no profile"))?;
        let latency = BatchLatency::fit(profile)
            .with_context(|| format!("`{model}`'s profile has too few batch sizes"))?;
        let types = types
            .iter()
            .map(|name| {
                catalog
                    .get(name)
                    .cloned()
                    .with_context(|| format!("no instance type `{name}` in the catalog"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            model: model.to_owned(),
            types,
            latency,
            gpu: catalog.gpu,
            qos_ms,
        })
    }

    pub fn latency_ms(&self, type_index: usize, batch: usize) -> f64 {
        self.types
            .get(type_index)
            .map_or(f64::INFINITY, |t| self.latency.ms_on(t, &self.gpu, batch))
    }

    pub fn prices(&self) -> Vec<f64> {
        self.types.iter().map(|t| t.on_demand_per_hour).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.types.iter().map(|t| t.name.clone()).collect()
    }

    /// The search space with at most `max[i]` instances of type `i`.
    pub fn space(&self, max: Vec<u32>) -> Space {
        Space {
            types: self.names(),
            prices: self.prices(),
            max,
        }
    }

    /// Kairos' heterogeneity coefficients, from each type's latency on the largest query.
    pub fn coefficients(&self, largest_batch: usize) -> Vec<f64> {
        let largest: Vec<f64> = (0..self.types.len())
            .map(|t| self.latency_ms(t, largest_batch))
            .collect();
        kairos::coefficients(&largest)
    }
}

/// Heavy-tailed log-normal batch sizes (Kairos §7, Ribbon §5.1), within `1..=max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchSizes {
    pub median: f64,
    pub sigma: f64,
    pub max: usize,
}

impl BatchSizes {
    pub const DEFAULT: Self = Self {
        median: 8.0,
        sigma: 1.0,
        max: 128,
    };
}

/// Queries at unit rate: arrival offsets (seconds at 1 query/s) and batch sizes.
#[derive(Debug, Clone)]
pub struct Workload {
    unit_arrivals: Vec<f64>,
    pub batches: Vec<usize>,
}

impl Workload {
    pub fn new(queries: usize, sizes: BatchSizes, seed: u64) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut t = 0.0;
        let mut unit_arrivals = Vec::with_capacity(queries);
        let mut batches = Vec::with_capacity(queries);
        for _ in 0..queries {
            t += -(1.0 - rng.random::<f64>()).ln();
            unit_arrivals.push(t);
            // Box-Muller for one standard normal: rand 0.9 alone has no normal
            // distribution, and one line does not warrant another crate.
            let (u1, u2) = (1.0 - rng.random::<f64>(), rng.random::<f64>());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let b = (sizes.median.ln() + sizes.sigma * z).exp().round();
            batches.push((b as usize).clamp(1, sizes.max));
        }
        Self {
            unit_arrivals,
            batches,
        }
    }

    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    pub fn largest(&self) -> usize {
        self.batches.iter().copied().max().unwrap_or(1)
    }
}

/// How a pool's queries go to its instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// First come first served, to the instance that has been free the longest.
    Fcfs,
    /// First come first served, preferring the types in the pool's order (Ribbon's
    /// "following the heterogeneous type order", Ribbon §5.1).
    TypeOrder,
    /// Kairos' min-cost matching of the waiting queries to the instances (§5.1).
    Kairos,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Self::Fcfs => "FCFS",
            Self::TypeOrder => "Ribbon order",
            Self::Kairos => "Kairos",
        }
    }
}

/// At most this many waiting queries enter one matching (the oldest).
const MATCH_WINDOW: usize = 64;

/// Serves `workload` at `rate_qps` on `config` and counts the queries answered within
/// the pool's target. A configuration without instances answers nothing.
pub fn simulate(
    pool: &PoolModel,
    config: &[u32],
    workload: &Workload,
    rate_qps: f64,
    placement: Placement,
) -> Measurement {
    let n = workload.len();
    let mut types: Vec<usize> = Vec::new();
    for (t, &count) in config.iter().enumerate() {
        types.extend(std::iter::repeat_n(t, count as usize));
    }
    if types.is_empty() || n == 0 || rate_qps <= 0.0 {
        return Measurement {
            satisfaction: 0.0,
            queries: n,
        };
    }
    let arrival = |i: usize| workload.unit_arrivals[i] / rate_qps * 1000.0; // ms
    let coefficients = pool.coefficients(workload.largest());
    let mut free_at = vec![0.0_f64; types.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut next = 0;
    let mut met = 0usize;
    let mut now = 0.0_f64;
    loop {
        let next_arrival = if next < n {
            arrival(next)
        } else {
            f64::INFINITY
        };
        let next_free = if queue.is_empty() {
            f64::INFINITY
        } else {
            free_at
                .iter()
                .copied()
                .filter(|&f| f > now)
                .fold(f64::INFINITY, f64::min)
        };
        now = next_arrival.min(next_free);
        if !now.is_finite() {
            break;
        }
        while next < n && arrival(next) <= now {
            queue.push_back(next);
            next += 1;
        }
        let mut start = |q: usize, j: usize, free_at: &mut [f64]| {
            let done = now + pool.latency_ms(types[j], workload.batches[q]);
            free_at[j] = done;
            if done - arrival(q) <= pool.qos_ms {
                met += 1;
            }
        };
        match placement {
            Placement::Fcfs | Placement::TypeOrder => {
                while let Some(&q) = queue.front() {
                    let idle = (0..types.len()).filter(|&j| free_at[j] <= now);
                    let choice = if placement == Placement::Fcfs {
                        idle.min_by(|&a, &b| free_at[a].total_cmp(&free_at[b]))
                    } else {
                        idle.min_by_key(|&j| types[j])
                    };
                    let Some(j) = choice else {
                        break;
                    };
                    queue.pop_front();
                    start(q, j, &mut free_at);
                }
            }
            Placement::Kairos => {
                if !free_at.iter().any(|&f| f <= now) {
                    continue;
                }
                let waiting: Vec<usize> = queue.iter().take(MATCH_WINDOW).copied().collect();
                let queries: Vec<Waiting> = waiting
                    .iter()
                    .map(|&q| Waiting {
                        batch: workload.batches[q],
                        waited_ms: now - arrival(q),
                    })
                    .collect();
                let servers: Vec<Server> = types
                    .iter()
                    .zip(&free_at)
                    .map(|(&t, &f)| Server {
                        type_index: t,
                        busy_ms: (f - now).max(0.0),
                    })
                    .collect();
                let plan = kairos::distribute(
                    &queries,
                    &servers,
                    &coefficients,
                    |t, b| pool.latency_ms(t, b),
                    pool.qos_ms,
                );
                let mut started = Vec::new();
                for (k, server) in plan.iter().enumerate() {
                    // Pairs with a busy instance wait for the next matching.
                    if let Some(j) = *server
                        && free_at[j] <= now
                    {
                        start(waiting[k], j, &mut free_at);
                        started.push(waiting[k]);
                    }
                }
                queue.retain(|q| !started.contains(q));
            }
        }
    }
    Measurement {
        satisfaction: met as f64 / n as f64,
        queries: n,
    }
}

/// The simulator as a [`ConfigEvaluator`]: one pool, one workload, one placement.
#[derive(Debug, Clone)]
pub struct SimEvaluator<'a> {
    pub pool: &'a PoolModel,
    pub workload: &'a Workload,
    pub placement: Placement,
    /// Measurements made, for the exploration-cost accounting.
    pub measured: usize,
}

impl<'a> SimEvaluator<'a> {
    pub fn new(pool: &'a PoolModel, workload: &'a Workload, placement: Placement) -> Self {
        Self {
            pool,
            workload,
            placement,
            measured: 0,
        }
    }
}

impl ConfigEvaluator for SimEvaluator<'_> {
    type Error = std::convert::Infallible;

    fn measure(&mut self, config: &[u32], rate_qps: f64) -> Result<Measurement, Self::Error> {
        self.measured += 1;
        Ok(simulate(
            self.pool,
            config,
            self.workload,
            rate_qps,
            self.placement,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> PoolModel {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let catalog = Catalog::embedded().unwrap();
        PoolModel::load(
            &zoo,
            &catalog,
            "resnet",
            &["g4dn.xlarge", "c5n.2xlarge", "r5n.large"],
            2.6,
        )
        .unwrap()
    }

    #[test]
    fn batches_are_heavy_tailed_and_replay_for_a_seed() {
        let w = Workload::new(5000, BatchSizes::DEFAULT, 3);
        let mut sorted = w.batches.clone();
        sorted.sort_unstable();
        let median = crate::stats::upper_median(&sorted).unwrap();
        assert!((6..=10).contains(&median), "{median}");
        let p99 = crate::stats::nearest_rank(&sorted, 0.99).unwrap();
        assert!(p99 > 5 * median, "a heavy tail");
        assert_eq!(
            w.batches,
            Workload::new(5000, BatchSizes::DEFAULT, 3).batches
        );
    }

    #[test]
    fn more_instances_serve_more_and_kairos_beats_fcfs_on_a_mixed_pool() {
        let pool = pool();
        let w = Workload::new(3000, BatchSizes::DEFAULT, 1);
        let at = |config: &[u32], rate: f64, p| simulate(&pool, config, &w, rate, p).satisfaction;
        assert!(at(&[1, 0, 0], 900.0, Placement::Fcfs) < at(&[2, 0, 0], 900.0, Placement::Fcfs));
        assert_eq!(at(&[0, 0, 0], 10.0, Placement::Fcfs), 0.0);
        assert!(
            at(&[4, 0, 0], 1.0, Placement::Fcfs) > 0.999,
            "an idle pool meets it"
        );
        let mut sim = SimEvaluator::new(&pool, &w, Placement::Kairos);
        let kairos = sim.throughput(&[1, 2, 2], 0.99, 50_000.0).unwrap();
        let mut sim = SimEvaluator::new(&pool, &w, Placement::Fcfs);
        let fcfs = sim.throughput(&[1, 2, 2], 0.99, 50_000.0).unwrap();
        assert!(kairos > fcfs, "kairos {kairos} fcfs {fcfs}");
    }
}
