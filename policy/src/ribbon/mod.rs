//! Ribbon (§4): Bayesian optimisation over the number of instances of each
//! type in a pool. A Gaussian process with a Matern 5/2 kernel on rounded inputs (Eq. 3)
//! models the objective of Eq. 2; expected improvement picks the next configuration to
//! measure; configurations that cannot beat the best so far are pruned ("active
//! pruning"); after a load change the exploration record gives the new search a head
//! start ("warm start").
//!
//! The search is a state machine so that any [`ConfigEvaluator`](crate::mix::ConfigEvaluator)
//! can drive it: `suggest` a configuration, measure it, `observe` the result, repeat until
//! `suggest` has nothing left.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

use crate::mix::{Config, Space, dominated_by};

mod interval;
pub use interval::{IntervalSearch, LOAD_CHANGE, StepReport};

/// Ribbon's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `T_qos`: the share of queries that must meet the latency target (0.99 for p99).
    pub target: f64,
    /// `θ`: a configuration this far below the target proves its sub-configurations fail.
    pub prune_below: f64,
    /// Exploration margin of expected improvement.
    pub xi: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            target: 0.99,
            prune_below: 0.01,
            xi: 0.01,
        }
    }
}

/// One configuration and its satisfaction rate, measured or (after a load change)
/// estimated from the previous record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub config: Config,
    pub satisfaction: f64,
    pub cost_per_hour: f64,
    pub estimated: bool,
}

/// The search state for one pool at one load.
#[derive(Debug, Clone)]
pub struct Ribbon {
    space: Space,
    settings: Settings,
    configs: Vec<Config>,
    /// Normalised, rounded coordinates of each configuration.
    points: Vec<Vec<f64>>,
    costs: Vec<f64>,
    /// Measured, or excluded by pruning.
    closed: Vec<bool>,
    observed: Vec<Observation>,
}

/// Length scales (in units of each type's range) the GP chooses from by marginal
/// likelihood.
const LENGTH_SCALES: [f64; 5] = [0.15, 0.25, 0.4, 0.6, 1.0];
/// Observation noise in standardised units: measurements of a finite window are noisy.
const NOISE: f64 = 1e-3;

impl Ribbon {
    pub fn new(space: Space, settings: Settings) -> Self {
        let configs = space.configs();
        let points = configs.iter().map(|c| normalise(c, &space.max)).collect();
        let costs = configs.iter().map(|c| space.cost(c)).collect();
        let closed = vec![false; configs.len()];
        Self {
            space,
            settings,
            configs,
            points,
            costs,
            closed,
            observed: Vec::new(),
        }
    }

    pub fn space(&self) -> &Space {
        &self.space
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Configurations in the search space.
    pub fn size(&self) -> usize {
        self.configs.len()
    }

    /// Configurations neither measured nor pruned.
    pub fn open(&self) -> usize {
        self.closed.iter().filter(|c| !**c).count()
    }

    /// Eq. 2: below the target, half the satisfaction rate relative to the target; at or
    /// above it, one half plus half the cost saved against the largest configuration.
    pub fn objective(&self, satisfaction: f64, cost_per_hour: f64) -> f64 {
        objective(
            self.settings.target,
            self.space.max_cost(),
            satisfaction,
            cost_per_hour,
        )
    }

    /// The first configuration to measure: the middle of the space.
    pub fn start(&self) -> Config {
        self.space
            .max
            .iter()
            .map(|m| m.div_ceil(2).max(1))
            .collect()
    }

    /// The configuration to measure next, or `None` once every configuration is measured
    /// or pruned (the best found is then the optimum).
    pub fn suggest(&self) -> Option<Config> {
        if !self.observed.iter().any(|o| !o.estimated) {
            let start = self.start();
            if let Some(i) = self.index(&start).filter(|&i| !self.closed[i]) {
                return Some(self.configs[i].clone());
            }
        }
        let candidates: Vec<usize> = (0..self.configs.len())
            .filter(|&i| !self.closed[i])
            .collect();
        if candidates.is_empty() {
            return None;
        }
        if self.observed.is_empty() {
            return Some(self.configs[candidates[0]].clone());
        }
        let gp = Gp::fit(
            self.observed
                .iter()
                .map(|o| normalise(&o.config, &self.space.max))
                .collect(),
            self.observed
                .iter()
                .map(|o| self.objective(o.satisfaction, o.cost_per_hour))
                .collect(),
        )?;
        let best = self
            .observed
            .iter()
            .filter(|o| !o.estimated)
            .map(|o| self.objective(o.satisfaction, o.cost_per_hour))
            .fold(f64::NEG_INFINITY, f64::max);
        let points: Vec<&[f64]> = candidates
            .iter()
            .map(|&i| self.points[i].as_slice())
            .collect();
        let scores = gp.expected_improvement(&points, best, self.settings.xi);
        let pick = scores
            .iter()
            .enumerate()
            // Ties (EI is flat far from the data) go to the cheaper configuration.
            .max_by(|a, b| {
                a.1.total_cmp(b.1)
                    .then(self.costs[candidates[b.0]].total_cmp(&self.costs[candidates[a.0]]))
            })
            .map(|(k, _)| candidates[k])?;
        Some(self.configs[pick].clone())
    }

    /// Records a measurement and prunes what it rules out.
    pub fn observe(&mut self, config: &[u32], satisfaction: f64) {
        let cost_per_hour = self.space.cost(config);
        if let Some(i) = self.index(config) {
            self.closed[i] = true;
        }
        self.observed.push(Observation {
            config: config.to_vec(),
            satisfaction,
            cost_per_hour,
            estimated: false,
        });
        self.prune(config, satisfaction, cost_per_hour);
    }

    fn prune(&mut self, config: &[u32], satisfaction: f64, cost_per_hour: f64) {
        let target = self.settings.target;
        if satisfaction < target - self.settings.prune_below {
            // Fewer instances of every type cannot meet the target either.
            for (closed, c) in self.closed.iter_mut().zip(&self.configs) {
                *closed |= dominated_by(c, config);
            }
        } else if satisfaction >= target {
            // Nothing at least as expensive can beat a configuration that meets it.
            for (closed, cost) in self.closed.iter_mut().zip(&self.costs) {
                *closed |= *cost >= cost_per_hour;
            }
        }
    }

    /// The cheapest measured configuration that meets the target.
    pub fn best(&self) -> Option<&Observation> {
        self.observed
            .iter()
            .filter(|o| !o.estimated && o.satisfaction >= self.settings.target)
            .min_by(|a, b| a.cost_per_hour.total_cmp(&b.cost_per_hour))
    }

    /// Every measurement and estimate so far, in order.
    pub fn record(&self) -> &[Observation] {
        &self.observed
    }

    /// A search for a new load (Ribbon §4, "promptly responds to load changes"): it
    /// starts from the previous optimum, measured again under the new load
    /// (`now_satisfaction`). When that optimum now fails, every configuration of the old
    /// record that did clearly worse than it (by more than θ) fails too: each is pruned
    /// with its sub-configurations and fed to the GP with its rate scaled like the
    /// optimum's.
    pub fn warm_start(&self, now_satisfaction: f64) -> Option<Self> {
        let old_best = self.best()?.clone();
        let mut next = Self::new(self.space.clone(), self.settings);
        next.observe(&old_best.config, now_satisfaction);
        if now_satisfaction >= next.settings.target || old_best.satisfaction <= 0.0 {
            return Some(next);
        }
        let scale = now_satisfaction / old_best.satisfaction;
        for o in &self.observed {
            // "No better" by a clear margin (θ): near the target satisfaction saturates,
            // and a configuration that met it almost as well is not evidence of failure.
            let worse = o.satisfaction < old_best.satisfaction - next.settings.prune_below;
            if o.estimated || o.config == old_best.config || !worse {
                continue;
            }
            for (closed, c) in next.closed.iter_mut().zip(&next.configs) {
                *closed |= dominated_by(c, &o.config);
            }
            next.observed.push(Observation {
                config: o.config.clone(),
                satisfaction: o.satisfaction * scale,
                cost_per_hour: o.cost_per_hour,
                estimated: true,
            });
        }
        Some(next)
    }

    fn index(&self, config: &[u32]) -> Option<usize> {
        self.space.index(config)
    }
}

/// Eq. 2 for a space whose largest configuration costs `max_cost` per hour.
pub fn objective(target: f64, max_cost: f64, satisfaction: f64, cost_per_hour: f64) -> f64 {
    if satisfaction < target {
        0.5 * satisfaction / target
    } else {
        0.5 + 0.5
            * (1.0
                - if max_cost > 0.0 {
                    cost_per_hour / max_cost
                } else {
                    0.0
                })
    }
}

/// Counts rounded to integers (Eq. 3's `R(x)`), then scaled by each type's range so one
/// length scale fits every dimension.
fn normalise(config: &[u32], max: &[u32]) -> Vec<f64> {
    config
        .iter()
        .zip(max)
        .map(|(&c, &m)| f64::from(c).round() / f64::from(m.max(1)))
        .collect()
}

/// Matern 5/2 (Ribbon §4) with unit variance.
fn matern52(a: &[f64], b: &[f64], length: f64) -> f64 {
    let r = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
        / length;
    let s = 5.0_f64.sqrt() * r;
    (1.0 + s + s * s / 3.0) * (-s).exp()
}

/// A Gaussian process fitted to standardised objective values.
struct Gp {
    points: Vec<Vec<f64>>,
    length: f64,
    mean: f64,
    scale: f64,
    /// Lower Cholesky factor of `K + noise·I`.
    chol: DMatrix<f64>,
    alpha: DVector<f64>,
}

impl Gp {
    /// Fits the GP, choosing the length scale with the highest marginal likelihood.
    fn fit(points: Vec<Vec<f64>>, values: Vec<f64>) -> Option<Self> {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        let scale = if var > 1e-12 { var.sqrt() } else { 1.0 };
        let y = DVector::from_iterator(n, values.iter().map(|v| (v - mean) / scale));
        let mut best: Option<(f64, Self)> = None;
        for length in LENGTH_SCALES {
            let k = DMatrix::from_fn(n, n, |i, j| {
                matern52(&points[i], &points[j], length) + if i == j { NOISE } else { 0.0 }
            });
            let Some(chol) = k.cholesky() else {
                continue;
            };
            let alpha = chol.solve(&y);
            let log_det: f64 = chol.l_dirty().diagonal().iter().map(|d| d.ln()).sum();
            let likelihood = -0.5 * y.dot(&alpha) - log_det;
            if best.as_ref().is_none_or(|(l, _)| likelihood > *l) {
                best = Some((
                    likelihood,
                    Self {
                        points: points.clone(),
                        length,
                        mean,
                        scale,
                        chol: chol.l(),
                        alpha,
                    },
                ));
            }
        }
        best.map(|(_, gp)| gp)
    }

    /// Expected improvement over `best` (in objective units) at each point.
    fn expected_improvement(&self, at: &[&[f64]], best: f64, xi: f64) -> Vec<f64> {
        let n = self.points.len();
        let cross = DMatrix::from_fn(n, at.len(), |i, j| {
            matern52(&self.points[i], at[j], self.length)
        });
        let means = cross.tr_mul(&self.alpha);
        let solved = self
            .chol
            .solve_lower_triangular(&cross)
            .unwrap_or_else(|| DMatrix::zeros(n, at.len()));
        let Ok(normal) = Normal::new(0.0, 1.0) else {
            return vec![0.0; at.len()];
        };
        (0..at.len())
            .map(|j| {
                let mu = self.mean + self.scale * means[j];
                let var = (1.0 - solved.column(j).norm_squared()).max(1e-12);
                let sigma = self.scale * var.sqrt();
                let gain = mu - best - xi;
                let z = gain / sigma;
                (gain * normal.cdf(z) + sigma * normal.pdf(z)).max(0.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two types: `a` serves 10 units for 1.0/h, `b` 3 units for 0.25/h; demand 32.
    fn space() -> Space {
        Space {
            types: vec!["a".into(), "b".into()],
            prices: vec![1.0, 0.25],
            max: vec![5, 12],
        }
    }

    fn satisfaction(c: &[u32]) -> f64 {
        served(c, 32.0)
    }

    fn served(c: &[u32], demand: f64) -> f64 {
        let capacity = 10.0 * f64::from(c[0]) + 3.0 * f64::from(c[1]);
        (capacity / demand).min(1.0)
    }

    fn exhaustive_best() -> (Config, f64) {
        let s = space();
        s.configs()
            .into_iter()
            .filter(|c| satisfaction(c) >= 0.99)
            .map(|c| {
                let cost = s.cost(&c);
                (c, cost)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap()
    }

    #[test]
    fn eq_2_prefers_any_feasible_configuration_and_then_the_cheaper() {
        let r = Ribbon::new(space(), Settings::default());
        assert!(r.objective(0.98, 0.0) < 0.5);
        assert!(r.objective(0.99, 8.0) >= 0.5);
        assert!(r.objective(0.99, 1.0) > r.objective(1.0, 2.0));
        assert_eq!(r.size(), 6 * 13 - 1);
        assert_eq!(r.start(), vec![3, 6]);
    }

    #[test]
    fn finds_the_optimum_with_few_measurements() {
        let mut r = Ribbon::new(space(), Settings::default());
        let mut steps = 0;
        while let Some(c) = r.suggest() {
            r.observe(&c, satisfaction(&c));
            steps += 1;
        }
        let (best, cost) = exhaustive_best();
        let found = r.best().unwrap();
        assert_eq!(found.cost_per_hour, cost, "{:?} vs {best:?}", found.config);
        assert!(steps < r.size() / 3, "{steps} of {}", r.size());
    }

    #[test]
    fn pruning_closes_sub_configurations_and_dearer_ones() {
        let mut r = Ribbon::new(space(), Settings::default());
        r.observe(&[1, 2], 0.5);
        assert!(r.closed[r.index(&[1, 1]).unwrap()]);
        assert!(r.closed[r.index(&[0, 2]).unwrap()]);
        assert!(!r.closed[r.index(&[2, 1]).unwrap()]);
        r.observe(&[3, 2], 1.0);
        assert!(
            r.closed[r.index(&[5, 0]).unwrap()],
            "5.0/h is dearer than 3.5/h"
        );
        assert!(!r.closed[r.index(&[2, 4]).unwrap()], "3.0/h may do");
        assert_eq!(r.best().unwrap().config, vec![3, 2]);
    }

    #[test]
    fn a_warm_start_prunes_what_failed_no_better_than_the_old_optimum() {
        let mut r = Ribbon::new(space(), Settings::default());
        while let Some(c) = r.suggest() {
            r.observe(&c, satisfaction(&c));
        }
        let old = r.best().unwrap().clone();
        // The load grows 1.5x: the old optimum serves 2/3 of it.
        let next = r.warm_start(served(&old.config, 48.0)).unwrap();
        assert!(next.open() < next.size() - 1);
        assert!(next.record().iter().skip(1).all(|o| o.estimated));
        assert!(
            next.record()
                .iter()
                .all(|o| o.satisfaction <= old.satisfaction)
        );
        let mut next = next;
        let grown = |c: &[u32]| served(c, 48.0);
        let mut steps = 0;
        while let Some(c) = next.suggest() {
            next.observe(&c, grown(&c));
            steps += 1;
        }
        let best = next.best().unwrap();
        assert!(grown(&best.config) >= 0.99);
        assert!(steps < next.size() / 3);
    }
}
