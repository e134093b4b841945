//! Ribbon against exhaustive search, hill climbing and random search (Ribbon §5.3):
//! how many configurations each measures before it first measures the optimum, and what
//! those measurements cost as a share of measuring every configuration (Fig. 13).
//!
//! Every configuration's satisfaction is measured once into a [`Table`] (that is the
//! exhaustive search); the strategies then read the table, so all of them see the same
//! measurements and only their order differs.

use cocktail_policy::mix::{Config, ConfigEvaluator, Space, dominated_by};
use cocktail_policy::ribbon::{self, Ribbon, Settings};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Every configuration of a space and its measured satisfaction at one load.
#[derive(Debug, Clone)]
pub struct Table {
    pub space: Space,
    pub configs: Vec<Config>,
    pub satisfaction: Vec<f64>,
    pub costs: Vec<f64>,
    pub target: f64,
}

impl Table {
    pub fn measure<E: ConfigEvaluator>(
        space: Space,
        evaluator: &mut E,
        rate_qps: f64,
        target: f64,
    ) -> Result<Self, E::Error> {
        let configs = space.configs();
        let satisfaction = configs
            .iter()
            .map(|c| evaluator.measure(c, rate_qps).map(|m| m.satisfaction))
            .collect::<Result<Vec<_>, _>>()?;
        let costs = configs.iter().map(|c| space.cost(c)).collect();
        Ok(Self {
            space,
            configs,
            satisfaction,
            costs,
            target,
        })
    }

    /// The cost of the cheapest configuration that meets the target.
    pub fn optimum_cost(&self) -> Option<f64> {
        self.meeting().map(|i| self.costs[i]).reduce(f64::min)
    }

    /// The cheapest configuration of a single type that meets the target.
    pub fn best_homogeneous(&self) -> Option<(Config, f64)> {
        self.meeting()
            .filter(|&i| self.configs[i].iter().filter(|&&n| n > 0).count() == 1)
            .map(|i| (self.configs[i].clone(), self.costs[i]))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    fn meeting(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.configs.len()).filter(|&i| self.satisfaction[i] >= self.target)
    }

    fn index(&self, config: &[u32]) -> Option<usize> {
        self.space.index(config)
    }

    fn is_optimum(&self, i: usize) -> bool {
        self.satisfaction[i] >= self.target
            && self
                .optimum_cost()
                .is_some_and(|best| self.costs[i] <= best + 1e-9)
    }

    fn objective(&self, i: usize) -> f64 {
        ribbon::objective(
            self.target,
            self.space.max_cost(),
            self.satisfaction[i],
            self.costs[i],
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Exhaustive,
    HillClimb,
    Random,
    Ribbon,
}

impl Strategy {
    pub const ALL: [Self; 4] = [
        Self::Ribbon,
        Self::HillClimb,
        Self::Random,
        Self::Exhaustive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Exhaustive => "exhaustive",
            Self::HillClimb => "hill climbing",
            Self::Random => "random",
            Self::Ribbon => "Ribbon",
        }
    }
}

/// One search on one table.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRun {
    pub strategy: Strategy,
    /// Configurations measured up to and including the optimum (all it measured when it
    /// never did).
    pub evaluations: usize,
    pub found: bool,
    /// Their cost (one measurement window each) over the cost of measuring every one.
    pub exploration_share: f64,
    /// Measured configurations that missed the target.
    pub violations: usize,
    /// What the search settled on, USD per hour.
    pub chosen_cost: Option<f64>,
}

/// The measurements of one search, stopping at the optimum.
struct Log<'a> {
    table: &'a Table,
    order: Vec<usize>,
    found: bool,
}

impl<'a> Log<'a> {
    fn new(table: &'a Table) -> Self {
        Self {
            table,
            order: Vec::new(),
            found: false,
        }
    }

    /// Measures configuration `i`; true once the optimum has been measured.
    fn measure(&mut self, i: usize) -> bool {
        if !self.order.contains(&i) {
            self.order.push(i);
            self.found |= self.table.is_optimum(i);
        }
        self.found
    }

    fn finish(self, strategy: Strategy, chosen_cost: Option<f64>) -> SearchRun {
        let t = self.table;
        let all: f64 = t.costs.iter().sum();
        let spent: f64 = self.order.iter().map(|&i| t.costs[i]).sum();
        SearchRun {
            strategy,
            evaluations: self.order.len(),
            found: self.found,
            exploration_share: if all > 0.0 { spent / all } else { 0.0 },
            violations: self
                .order
                .iter()
                .filter(|&&i| t.satisfaction[i] < t.target)
                .count(),
            chosen_cost,
        }
    }

    fn cheapest_meeting(&self) -> Option<f64> {
        self.order
            .iter()
            .filter(|&&i| self.table.satisfaction[i] >= self.table.target)
            .map(|&i| self.table.costs[i])
            .reduce(f64::min)
    }
}

/// Runs `strategy` on `table` with the randomness of `seed`.
pub fn run(strategy: Strategy, table: &Table, seed: u64) -> SearchRun {
    let mut log = Log::new(table);
    let mut rng = SmallRng::seed_from_u64(seed);
    match strategy {
        Strategy::Exhaustive => {
            // It cannot know the optimum before it has measured everything.
            for i in 0..table.configs.len() {
                log.measure(i);
            }
        }
        Strategy::Random => random(table, &mut log, &mut rng),
        Strategy::HillClimb => hill_climb(table, &mut log, &mut rng),
        Strategy::Ribbon => {
            let settings = Settings {
                target: table.target,
                ..Settings::default()
            };
            let mut search = Ribbon::new(table.space.clone(), settings);
            ribbon_until_optimum(table, &mut log, &mut search);
        }
    }
    let chosen = log.cheapest_meeting();
    log.finish(strategy, chosen)
}

/// Runs `search` on `table` until it measures the optimum or has nothing left.
fn ribbon_until_optimum(table: &Table, log: &mut Log<'_>, search: &mut Ribbon) {
    while let Some(config) = search.suggest() {
        let Some(i) = table.index(&config) else {
            break;
        };
        let done = log.measure(i);
        search.observe(&config, table.satisfaction[i]);
        if done {
            break;
        }
    }
}

/// Ribbon after a load change (Ribbon §5.5): a search that ran to the end on
/// `before` warm-starts on `after` (re-measuring its optimum first, which counts) and
/// runs until it measures the new optimum. `None` when the first search found nothing
/// that met the target.
pub fn run_warm(before: &Table, after: &Table) -> Option<SearchRun> {
    let settings = Settings {
        target: before.target,
        ..Settings::default()
    };
    let mut first = Ribbon::new(before.space.clone(), settings);
    while let Some(config) = first.suggest() {
        let i = before.index(&config)?;
        first.observe(&config, before.satisfaction[i]);
    }
    let old = after.index(&first.best()?.config)?;
    let mut log = Log::new(after);
    let done = log.measure(old);
    let mut search = first.warm_start(after.satisfaction[old])?;
    if !done {
        ribbon_until_optimum(after, &mut log, &mut search);
    }
    let chosen = log.cheapest_meeting();
    Some(log.finish(Strategy::Ribbon, chosen))
}

/// Random order, skipping what earlier measurements already decide (Ribbon §5.3):
/// a configuration under one that failed, or over one that met the target more cheaply.
fn random(table: &Table, log: &mut Log<'_>, rng: &mut SmallRng) {
    let mut order: Vec<usize> = (0..table.configs.len()).collect();
    order.shuffle(rng);
    for i in order {
        let c = &table.configs[i];
        let decided = log.order.iter().any(|&e| {
            let other = &table.configs[e];
            let met = table.satisfaction[e] >= table.target;
            (!met && dominated_by(c, other)) || (met && dominated_by(other, c))
        });
        if !decided && log.measure(i) {
            return;
        }
    }
}

/// From the middle, move to the best neighbour (one instance more or fewer of one type)
/// while Eq. 2 improves; at a local optimum restart from a random unmeasured
/// configuration (Ribbon §5.3, Fig. 12).
fn hill_climb(table: &Table, log: &mut Log<'_>, rng: &mut SmallRng) {
    let max = &table.space.max;
    let start: Config = max.iter().map(|m| m.div_ceil(2).max(1)).collect();
    let Some(mut current) = table.index(&start) else {
        return;
    };
    if log.measure(current) {
        return;
    }
    while log.order.len() < table.configs.len() {
        let here = table.configs[current].clone();
        let mut neighbours = Vec::new();
        for d in 0..here.len() {
            for step in [-1_i64, 1] {
                let n = i64::from(here[d]) + step;
                if n < 0 || n > i64::from(max[d]) {
                    continue;
                }
                let mut next = here.clone();
                next[d] = n as u32;
                if let Some(i) = table.index(&next) {
                    neighbours.push(i);
                }
            }
        }
        for &i in &neighbours {
            if log.measure(i) {
                return;
            }
        }
        let best = neighbours
            .iter()
            .copied()
            .max_by(|&a, &b| table.objective(a).total_cmp(&table.objective(b)));
        match best {
            Some(b) if table.objective(b) > table.objective(current) => current = b,
            _ => {
                let unmeasured: Vec<usize> = (0..table.configs.len())
                    .filter(|i| !log.order.contains(i))
                    .collect();
                if unmeasured.is_empty() {
                    return;
                }
                current = unmeasured[rng.random_range(0..unmeasured.len())];
                if log.measure(current) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cocktail_policy::mix::Measurement;

    /// Capacity per instance 10, 3 and 2 for 1.0, 0.25 and 0.2 per hour; demand 37.
    struct Capacity;
    impl ConfigEvaluator for Capacity {
        type Error = String;
        fn measure(&mut self, c: &[u32], rate: f64) -> Result<Measurement, String> {
            let capacity = 10.0 * f64::from(c[0]) + 3.0 * f64::from(c[1]) + 2.0 * f64::from(c[2]);
            Ok(Measurement {
                satisfaction: (capacity / rate).min(1.0),
                queries: 1,
            })
        }
    }

    #[test]
    fn every_strategy_finds_the_optimum_and_ribbon_needs_the_fewest() {
        let space = Space {
            types: vec!["a".into(), "b".into(), "c".into()],
            prices: vec![1.0, 0.25, 0.2],
            max: vec![5, 10, 10],
        };
        let table = Table::measure(space, &mut Capacity, 37.0, 0.99).unwrap();
        let optimum = table.optimum_cost().unwrap();
        assert_eq!(table.best_homogeneous().unwrap().1, 4.0);
        assert!(optimum < 4.0);
        let mut mean = std::collections::HashMap::new();
        for strategy in Strategy::ALL {
            let mut total = 0;
            for seed in 0..10 {
                let r = run(strategy, &table, seed);
                assert!(r.found, "{strategy:?} seed {seed}");
                assert_eq!(r.chosen_cost, Some(optimum));
                assert!(r.exploration_share <= 1.0 + 1e-9);
                total += r.evaluations;
            }
            mean.insert(strategy.name(), total);
        }
        assert_eq!(mean["exhaustive"], 10 * table.configs.len());
        assert!(mean["Ribbon"] < mean["random"], "{mean:?}");
        assert!(mean["Ribbon"] < mean["hill climbing"], "{mean:?}");
    }
}
