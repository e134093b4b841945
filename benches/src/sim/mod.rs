//! `cocktail sim`: a discrete-event simulator that runs the master's own policies
//! (selection and O2 from `policy::ensemble`, voting, `autoscale::{plan, mark, react,
//! procure}`, the load predictors) on a trace, in simulated time.
//!
//! What is real: every model's answer comes from the recorded predictions on the test
//! set, so ensemble accuracy is the accuracy the zoo would give; latencies per call come
//! from the measured profile; prices, Pf per instance type and the spot process come from
//! the catalog. What is modelled: the network hop (`overhead_ms`), launch delays, spot
//! revocations (price above the bid, plus a chaos rate) and instance failures.

pub mod cluster;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use anyhow::Context;
use cocktail_common::catalog::{self, Catalog};
use cocktail_common::{Predictions, Zoo};
use cocktail_master::autoscale::{self, Action, AutoscaleConfig, Decision, PoolState};
use cocktail_master::ensemble::Ensemble;
use cocktail_master::predict::{self, Predictor};
use cocktail_master::selection::{self, Candidate, Constraint, SelectionConfig};
use cocktail_master::tasks;
use cocktail_master::voting::{self, Ballot, ClassWeights};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::traces::Arrivals;
use crate::workload::{self, ConstraintType, Mix};
use cluster::{Cluster, Served};

/// The serving schemes compared (cocktail.txt §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// The single model that meets the constraint, on-demand, reactive scaling.
    Infaas,
    /// Every candidate model, static, on-demand.
    Clipper,
    /// Every candidate, then drops one model at a time while accuracy holds.
    ClipperX,
    /// The full design: O1/O2, weighted voting, spot, predictive weighted autoscaling.
    Cocktail,
}

impl Scheme {
    pub const ALL: [Self; 4] = [Self::Infaas, Self::Clipper, Self::ClipperX, Self::Cocktail];

    pub fn name(self) -> &'static str {
        match self {
            Self::Infaas => "InFaaS",
            Self::Clipper => "Clipper",
            Self::ClipperX => "Clipper-X",
            Self::Cocktail => "Cocktail",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    fn spot(self) -> bool {
        self == Self::Cocktail
    }

    fn voting(self) -> voting::Scheme {
        match self {
            Self::Cocktail => voting::Scheme::Weighted,
            _ => voting::Scheme::Majority,
        }
    }

    pub fn autoscaler(self) -> Autoscaler {
        match self {
            Self::Cocktail => Autoscaler::Cocktail,
            _ => Autoscaler::Reactive,
        }
    }
}

/// How pools are sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Autoscaler {
    /// Algorithm 2: the predicted load at T + Tp, weighted by each pool's share of
    /// requests, covered at the least cost; plus the reactive SLO check.
    Cocktail,
    /// MArk's greedy least cost per request over the forecast; plus the SLO check.
    Mark,
    /// The load of the interval that just ended, covered at the least cost; plus the SLO
    /// check (no prediction).
    Reactive,
    /// SageMaker's target tracking: capacity for twice the load just seen (mark.txt §5.1).
    TargetTracking,
}

impl Autoscaler {
    pub const ALL: [Self; 4] = [
        Self::Cocktail,
        Self::Mark,
        Self::Reactive,
        Self::TargetTracking,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Cocktail => "cocktail",
            Self::Mark => "mark",
            Self::Reactive => "reactive",
            Self::TargetTracking => "target-2x",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// A share of the instances failing at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Failure {
    pub at_s: f64,
    pub fraction: f64,
}

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub scheme: Scheme,
    pub autoscaler: Autoscaler,
    pub mix: Mix,
    /// Requests per second, one rate per second of simulated time.
    pub rates: Vec<f64>,
    pub seed: u64,
    /// Size pools by their share of requests (Algorithm 2); off: every pool as if it
    /// received every request (Fig. 12a's comparison).
    pub importance_weights: bool,
    pub failure: Option<Failure>,
    /// Seconds from a launch to serving.
    pub launch_s: f64,
    /// Spot revocations per instance-hour beyond those the price causes.
    pub revocations_per_hour: f64,
    /// The predictive autoscaler's period, horizon and importance window (seconds).
    pub interval_s: f64,
    pub horizon_s: f64,
    pub importance_window_s: f64,
    /// The reactive check's period (seconds).
    pub reactive_interval_s: f64,
    /// O2's interval (seconds), as the master's `--interval-s`.
    pub o2_interval_s: f64,
    /// O2's interval in requests per constraint instead, as `--interval-requests`.
    pub o2_interval_requests: Option<u64>,
    pub predictor: String,
    /// Added to the latency target to form the deadline, as `--deadline-grace-ms`.
    pub grace_ms: f64,
    /// One network hop master ↔ worker, added to every answer.
    pub hop_ms: f64,
    pub selection: SelectionConfig,
    pub autoscale: AutoscaleConfig,
    /// The weight prior of the class weights, as `--weight-prior`.
    pub weight_prior: f64,
    /// Time-series resolution (seconds).
    pub bucket_s: f64,
    /// Catalog types that may be bought (empty: all).
    pub instance_types: Vec<String>,
}

impl SimConfig {
    /// The defaults of the live master and controller, for `scheme` on `rates`.
    pub fn new(scheme: Scheme, mix: Mix, rates: Vec<f64>, seed: u64) -> Self {
        Self {
            scheme,
            autoscaler: scheme.autoscaler(),
            mix,
            rates,
            seed,
            importance_weights: true,
            failure: None,
            launch_s: 60.0,
            revocations_per_hour: 0.05,
            interval_s: 60.0,
            horizon_s: 600.0,
            importance_window_s: 300.0,
            reactive_interval_s: 10.0,
            o2_interval_s: 30.0,
            o2_interval_requests: None,
            predictor: "ewma".into(),
            grace_ms: 20.0,
            hop_ms: 0.5,
            selection: SelectionConfig {
                latency_margin_ms: 0.0,
                ..SelectionConfig::default()
            },
            autoscale: AutoscaleConfig::default(),
            weight_prior: 100.0,
            bucket_s: 60.0,
            instance_types: Vec::new(),
        }
    }
}

/// One task's models, their recorded answers and the catalog: everything a run reads.
#[derive(Debug)]
pub struct World {
    pub task: String,
    pub models: Vec<String>,
    pub candidates: Vec<Candidate>,
    pub accuracy: Vec<f64>,
    pub class_accuracy: Vec<Vec<f64>>,
    pub classes: usize,
    /// `answers[model][item]`: the class each model gave each test item.
    pub answers: Vec<Vec<u16>>,
    pub labels: Vec<u16>,
    pub types: Vec<ConstraintType>,
    pub catalog: Catalog,
    /// `packing[model][type]`: Pf of the model on each catalog type.
    pub packing: Vec<Vec<u32>>,
}

impl World {
    pub fn load(zoo: &Zoo, task: &str) -> anyhow::Result<Self> {
        let tables = tasks::from_zoo(zoo, 1.0);
        let table = tables
            .get(task)
            .with_context(|| format!("the zoo has no task `{task}`"))?;
        let spec = zoo.task(task)?;
        let predictions = Predictions::load(&zoo.resolve(&spec.predictions))?;
        let answers = table
            .models
            .iter()
            .map(|m| {
                predictions
                    .model_index(m)
                    .and_then(|i| predictions.classes.get(i).cloned())
                    .with_context(|| format!("no recorded predictions for `{m}`"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let catalog = Catalog::embedded()?;
        let packing = table
            .models
            .iter()
            .map(|m| {
                let profile = zoo.model(m).ok().and_then(|e| e.profile.as_ref());
                catalog
                    .types
                    .iter()
                    .map(|ty| catalog::packing_factor(profile, ty, &catalog.gpu))
                    .collect()
            })
            .collect();
        Ok(Self {
            task: task.to_owned(),
            models: table.models.clone(),
            candidates: table.candidates.clone(),
            accuracy: table.accuracy.clone(),
            class_accuracy: zoo
                .models_for(task)
                .map(|m| m.class_accuracy.clone())
                .collect(),
            classes: table.labels.len(),
            answers,
            labels: predictions.labels.clone(),
            types: workload::constraint_types(&table.candidates),
            catalog,
            packing,
        })
    }
}

impl World {
    /// The same world with every model `factor` times slower (latencies, and so the
    /// constraint types): our models run in microseconds, the papers' in 10–300 ms, and
    /// the autoscaling studies need pools that take more than one instance.
    pub fn with_latency_scale(&self, factor: f64) -> Self {
        let mut candidates = self.candidates.clone();
        for c in &mut candidates {
            c.latency_ms *= factor;
        }
        Self {
            types: workload::constraint_types(&candidates),
            candidates,
            task: self.task.clone(),
            models: self.models.clone(),
            accuracy: self.accuracy.clone(),
            class_accuracy: self.class_accuracy.clone(),
            classes: self.classes,
            answers: self.answers.clone(),
            labels: self.labels.clone(),
            catalog: self.catalog.clone(),
            packing: self.packing.clone(),
        }
    }
}

/// Latency percentiles in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub min: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(samples: &mut [f32]) -> Self {
        samples.sort_unstable_by(f32::total_cmp);
        let rank = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).saturating_sub(1);
            samples.get(i).map_or(0.0, |v| f64::from(*v))
        };
        Self {
            min: samples.first().map_or(0.0, |v| f64::from(*v)),
            p25: rank(0.25),
            p50: rank(0.50),
            p75: rank(0.75),
            p90: rank(0.90),
            p99: rank(0.99),
            max: samples.last().map_or(0.0, |v| f64::from(*v)),
        }
    }
}

/// One constraint type's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TypeResult {
    pub name: String,
    pub latency_ms: f64,
    pub accuracy_target: f64,
    pub requests: u64,
    pub models_per_request: f64,
    pub accuracy: f64,
    pub accuracy_met: f64,
}

/// One time bucket of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub t_s: f64,
    pub rate: f64,
    pub models_per_request: f64,
    /// Accuracy over the last [`ACCURACY_WINDOW`] requests, and since the start.
    pub window_accuracy: f64,
    pub cumulative_accuracy: f64,
    pub accuracy_met: f64,
    /// Instances per model pool (same order as [`SimResult::pools`]), booting included.
    pub vms: Vec<usize>,
    pub cost: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub task: String,
    pub scheme: String,
    pub autoscaler: String,
    pub mix: String,
    pub importance_weights: bool,
    pub failure: Option<Failure>,
    pub requests: u64,
    /// Requests no member answered in time.
    pub failed: u64,
    /// Requests answered without some member (it missed its deadline or had no instance).
    pub degraded: u64,
    /// The share of requests answered after their deadline (latency target + grace) or
    /// not at all.
    pub slo_violations: f64,
    pub latency_ms: Percentiles,
    pub accuracy: f64,
    /// The share of requests whose constraint type's last 200 answers met its accuracy.
    pub accuracy_met: f64,
    pub models_per_request: f64,
    pub cost: f64,
    pub vms_mean: f64,
    pub vms_max: usize,
    pub launches: u64,
    pub revocations: u64,
    pub types: Vec<TypeResult>,
    pub pools: Vec<String>,
    pub series: Vec<Bucket>,
    /// Wall-clock seconds the run took.
    pub elapsed_s: f64,
    /// The latency of every request (milliseconds), for box plots; not serialised.
    #[serde(skip)]
    pub latencies: Vec<f32>,
}

/// The moving window of §6.1 for "accuracy met".
pub const ACCURACY_WINDOW: usize = 200;

/// The last [`ACCURACY_WINDOW`] outcomes.
#[derive(Debug, Default, Clone)]
struct Outcomes {
    ring: VecDeque<bool>,
    correct: usize,
}

impl Outcomes {
    fn push(&mut self, correct: bool) {
        self.ring.push_back(correct);
        self.correct += usize::from(correct);
        if self.ring.len() > ACCURACY_WINDOW
            && let Some(old) = self.ring.pop_front()
        {
            self.correct -= usize::from(old);
        }
    }

    fn accuracy(&self) -> f64 {
        if self.ring.is_empty() {
            0.0
        } else {
            self.correct as f64 / self.ring.len() as f64
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Tally {
    requests: u64,
    models: u64,
    correct: u64,
    met: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Ready(usize),
    End(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Timed(f64, usize, Event);

impl Eq for Timed {}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// InFaaS's choice: the fastest model meeting the accuracy within the latency; else the
/// fastest meeting the accuracy at all; else the most accurate within the latency.
pub fn infaas_choice(models: &[Candidate], c: &Constraint, config: &SelectionConfig) -> usize {
    let within = selection::candidates(models, c, config);
    let fastest = |it: &mut dyn Iterator<Item = usize>| {
        it.min_by(|&a, &b| models[a].latency_ms.total_cmp(&models[b].latency_ms))
    };
    fastest(
        &mut within
            .iter()
            .copied()
            .filter(|&i| models[i].accuracy >= c.accuracy),
    )
    .or_else(|| {
        fastest(
            &mut (0..models.len())
                .filter(|&i| models[i].accuracy >= c.accuracy && models[i].latency_ms.is_finite()),
        )
    })
    .or_else(|| {
        within
            .iter()
            .copied()
            .max_by(|&a, &b| models[a].accuracy.total_cmp(&models[b].accuracy))
    })
    .unwrap_or(0)
}

/// Clipper-X's step: drop the member right least often while the window beats the
/// target; put the last dropped one back when it falls below.
fn clipper_x_step(
    models: &[Candidate],
    ensemble: &mut Ensemble,
    dropped: &mut Vec<usize>,
    margin: f64,
) {
    let window = ensemble.window();
    let Some(accuracy) = window.accuracy() else {
        return;
    };
    let target = ensemble.constraint.accuracy;
    let members = ensemble.members.clone();
    if accuracy >= target + margin && members.len() > 1 {
        let worst = members
            .iter()
            .enumerate()
            .min_by(|&(a, ma), &(b, mb)| {
                let correct = |slot: usize| window.member_correct.get(slot).copied().unwrap_or(0);
                correct(a)
                    .cmp(&correct(b))
                    .then(models[*ma].accuracy.total_cmp(&models[*mb].accuracy))
            })
            .map(|(slot, _)| slot);
        if let Some(slot) = worst {
            let mut kept = members;
            dropped.push(kept.remove(slot));
            let generation = ensemble.generation + 1;
            ensemble.replace(kept, generation);
            return;
        }
    }
    if accuracy < target
        && let Some(back) = dropped.pop()
    {
        let mut grown = members;
        grown.push(back);
        let generation = ensemble.generation + 1;
        ensemble.replace(grown, generation);
        return;
    }
    let generation = ensemble.generation;
    ensemble.replace(members, generation); // a new window
}

/// Runs one scheme on the trace. `progress` is set to the simulated second.
pub fn run(
    world: &World,
    config: &SimConfig,
    progress: Option<&indicatif::ProgressBar>,
) -> SimResult {
    let started = std::time::Instant::now();
    let mut rng = SmallRng::seed_from_u64(config.seed ^ 0x5EED);
    // Which constraint type and test item each request is: the load generator draws the
    // same sequence for the same seed.
    let mut requests = SmallRng::seed_from_u64(config.seed);
    let models = &world.candidates;
    let allowed: Vec<usize> = world
        .catalog
        .types
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            config.instance_types.is_empty() || config.instance_types.contains(&t.name)
        })
        .map(|(k, _)| k)
        .collect();
    let latency_ms: Vec<f64> = models.iter().map(|m| m.latency_ms).collect();
    let mut cluster = Cluster::new(
        world.catalog.clone(),
        allowed,
        &latency_ms,
        world.packing.clone(),
        config.seed,
    );
    let mut weights = ClassWeights::seeded(&world.class_accuracy, config.weight_prior);
    let mut ensembles: Vec<Ensemble> = world
        .types
        .iter()
        .map(|t| {
            let c = t.constraint;
            match config.scheme {
                Scheme::Cocktail => Ensemble::select(models, c, &config.selection),
                Scheme::Infaas => Ensemble::new(
                    models,
                    c,
                    vec![infaas_choice(models, &c, &config.selection)],
                    0,
                    &config.selection,
                ),
                Scheme::Clipper | Scheme::ClipperX => {
                    let mut all = selection::candidates(models, &c, &config.selection);
                    if all.is_empty() {
                        all.push(infaas_choice(models, &c, &config.selection));
                    }
                    Ensemble::new(models, c, all, 0, &config.selection)
                }
            }
        })
        .collect();
    let mut dropped: Vec<Vec<usize>> = vec![Vec::new(); world.types.len()];
    let mix = config.mix.cumulative(world.types.len());
    let shares: Vec<f64> = mix
        .iter()
        .scan(0.0, |prev, c| {
            let share = c - *prev;
            *prev = *c;
            Some(share)
        })
        .collect();
    let period = (86_400.0 / config.interval_s).round().max(1.0) as usize;
    let mut predictor: Box<dyn Predictor> = predict::by_name(&config.predictor, period)
        .unwrap_or_else(|| Box::new(predict::Ewma::new(0.5)));
    let steps = ((config.horizon_s / config.interval_s).round() as usize).max(1);
    let window_len = ((config.importance_window_s / config.interval_s).round() as usize).max(1);
    let duration = config.rates.len() as f64;
    let mut events: BinaryHeap<Reverse<Timed>> = BinaryHeap::new();
    let mut sequence = 0_usize;
    let mut launches = 0_u64;

    // Pools start sized for the first interval's load, ready at once (a warm start).
    let first_rate = config
        .rates
        .iter()
        .take(config.interval_s as usize)
        .sum::<f64>()
        / config.interval_s.min(duration).max(1.0);
    let used = used_pools(&ensembles, models.len());
    for (pool, &in_use) in used.iter().enumerate() {
        if !in_use {
            continue;
        }
        let share: f64 = if config.importance_weights {
            ensembles
                .iter()
                .zip(&shares)
                .filter(|(e, _)| e.members.contains(&pool))
                .map(|(_, s)| s)
                .sum()
        } else {
            1.0
        };
        let factor = if config.autoscaler == Autoscaler::TargetTracking {
            2.0
        } else {
            1.0
        };
        let offers = cluster.offers(pool, config.scheme.spot(), 0.0);
        if let Some((offer, count)) = autoscale::procure(
            (first_rate * share * factor).max(f64::MIN_POSITIVE),
            latency_ms[pool],
            &offers,
            &config.autoscale,
        ) {
            let name = offer.instance_type.clone();
            for id in cluster.launch(pool, &name, offer.spot, count, 0.0, 0.0) {
                cluster.ready(id);
                launches += 1;
            }
        }
    }

    let mut latencies: Vec<f32> =
        Vec::with_capacity(config.rates.iter().sum::<f64>() as usize + 16);
    let mut all = Tally::default();
    let mut per_type = vec![Tally::default(); world.types.len()];
    let mut outcomes = vec![Outcomes::default(); world.types.len()];
    let mut overall = Outcomes::default();
    let mut bucket = Tally::default();
    let mut series = Vec::new();
    let mut violations = 0_u64;
    let mut failed = 0_u64;
    let mut degraded = 0_u64;
    let mut interval_requests = 0_u64;
    let mut window_requests: VecDeque<u64> = VecDeque::new();
    let mut vms_sum = 0.0;
    let mut vms_max = 0;
    let mut next_reactive = config.reactive_interval_s;
    let mut next_predictive = config.interval_s;
    let mut next_o2 = if config.o2_interval_requests.is_some() {
        f64::INFINITY
    } else {
        config.o2_interval_s
    };
    let mut since_o2 = vec![0_u64; world.types.len()];
    let mut next_bucket = config.bucket_s;
    let mut failure = config.failure;
    let deadline_s: Vec<f64> = world
        .types
        .iter()
        .map(|t| (t.constraint.latency_ms + config.grace_ms) / 1000.0)
        .collect();
    let hop_s = config.hop_ms / 1000.0;
    let mut members: Vec<usize> = Vec::new();
    let mut member_classes: Vec<Option<usize>> = Vec::new();
    let mut ballots: Vec<Ballot<'static>> = Vec::new();
    let items = world.labels.len().max(1);
    let chaos = config.revocations_per_hour * config.reactive_interval_s / 3600.0;

    // A last pseudo-arrival at the end lets the final ticks (the last bucket) happen.
    for t in Arrivals::new(&config.rates, config.seed).chain(std::iter::once(duration)) {
        // Everything scheduled before this arrival.
        loop {
            let event_at = events.peek().map_or(f64::INFINITY, |Reverse(e)| e.0);
            let failure_at = failure.map_or(f64::INFINITY, |f| f.at_s);
            let at = event_at
                .min(next_reactive)
                .min(next_predictive)
                .min(next_o2)
                .min(next_bucket)
                .min(failure_at);
            if at > t {
                break;
            }
            if at == event_at {
                if let Some(Reverse(Timed(_, _, event))) = events.pop() {
                    match event {
                        Event::Ready(id) => cluster.ready(id),
                        Event::End(id) => cluster.end(id, at),
                    }
                }
            } else if at == failure_at {
                if let Some(f) = failure.take() {
                    let serving: Vec<usize> = (0..cluster.instances.len())
                        .filter(|&id| cluster.instances.get(id).is_some_and(|i| i.serving))
                        .collect();
                    let kill = (serving.len() as f64 * f.fraction).round() as usize;
                    let mut pick = serving;
                    for k in 0..kill.min(pick.len()) {
                        let j = rng.random_range(k..pick.len());
                        pick.swap(k, j);
                        if let Some(&id) = pick.get(k) {
                            cluster.end(id, at);
                            // The health check replaces it at once, same type and market
                            // (`controller::health`).
                            let Some(dead) = cluster.instances.get(id) else {
                                continue;
                            };
                            let (pool, spot) = (dead.pool, dead.spot);
                            let Some(name) = cluster
                                .catalog
                                .types
                                .get(dead.instance_type)
                                .map(|t| t.name.clone())
                            else {
                                continue;
                            };
                            launches += launch(
                                &mut cluster,
                                (pool, &name, spot, 1),
                                at,
                                config.launch_s,
                                &mut events,
                                &mut sequence,
                            );
                        }
                    }
                }
            } else if at == next_reactive {
                next_reactive += config.reactive_interval_s;
                cluster.bill(at);
                let mut coin = || rng.random::<f64>() < chaos;
                let revoked = cluster.revoked(at, &mut coin);
                for id in revoked {
                    cluster.revocations += 1;
                    cluster.stop_serving(id);
                    sequence += 1;
                    events.push(Reverse(Timed(
                        at + cluster.catalog.spot.notice_seconds,
                        sequence,
                        Event::End(id),
                    )));
                    // The interruption handler replaces it with the cheapest cover.
                    let pool = cluster.instances.get(id).map_or(0, |i| i.pool);
                    let offers = cluster.offers(pool, config.scheme.spot(), at);
                    if let Some((offer, _)) = autoscale::procure(
                        f64::MIN_POSITIVE,
                        latency_ms[pool],
                        &offers,
                        &config.autoscale,
                    ) {
                        let name = offer.instance_type.clone();
                        launches += launch(
                            &mut cluster,
                            (pool, &name, offer.spot, 1),
                            at,
                            config.launch_s,
                            &mut events,
                            &mut sequence,
                        );
                    }
                }
                if config.autoscaler != Autoscaler::TargetTracking {
                    let used = used_pools(&ensembles, models.len());
                    let states: Vec<PoolState> = used
                        .iter()
                        .enumerate()
                        .filter(|(_, u)| **u)
                        .map(|(p, _)| {
                            // A pool still provisioning help is not asked again.
                            let misses = cluster.take_misses(p);
                            let misses = if cluster.booting(p, at) { 0.0 } else { misses };
                            cluster.pool_state(p, &world.models[p], latency_ms[p], 0, misses, at)
                        })
                        .collect();
                    let decisions = autoscale::react(
                        &states,
                        &|s| offers_for(&cluster, world, s, config.scheme.spot(), at),
                        &config.autoscale,
                    );
                    launches += execute(
                        &mut cluster,
                        world,
                        decisions,
                        at,
                        config.launch_s,
                        &mut events,
                        &mut sequence,
                    );
                }
            } else if at == next_predictive {
                next_predictive += config.interval_s;
                let calls = cluster.close_interval(window_len);
                let rate = interval_requests as f64 / config.interval_s;
                window_requests.push_back(interval_requests);
                interval_requests = 0;
                while window_requests.len() > window_len {
                    window_requests.pop_front();
                }
                let total: u64 = window_requests.iter().sum();
                predictor.observe(rate);
                let used = used_pools(&ensembles, models.len());
                let states: Vec<PoolState> = used
                    .iter()
                    .enumerate()
                    .filter(|(_, u)| **u)
                    .map(|(p, _)| {
                        let requests = if config.importance_weights {
                            calls.get(p).copied().unwrap_or(0)
                        } else {
                            total
                        };
                        cluster.pool_state(p, &world.models[p], latency_ms[p], requests, 0.0, at)
                    })
                    .collect();
                let offers =
                    |s: &PoolState| offers_for(&cluster, world, s, config.scheme.spot(), at);
                let mut decisions = match config.autoscaler {
                    Autoscaler::Cocktail => autoscale::plan(
                        predictor.forecast(steps),
                        total,
                        &states,
                        &offers,
                        &config.autoscale,
                    ),
                    Autoscaler::Mark => {
                        let forecast: Vec<f64> =
                            (1..=steps).map(|k| predictor.forecast(k)).collect();
                        autoscale::mark(
                            &forecast,
                            total,
                            &states,
                            &offers,
                            &config.autoscale,
                            config.interval_s,
                            config.launch_s,
                        )
                    }
                    Autoscaler::Reactive => {
                        autoscale::plan(rate, total, &states, &offers, &config.autoscale)
                    }
                    Autoscaler::TargetTracking => {
                        autoscale::plan(2.0 * rate, total, &states, &offers, &config.autoscale)
                    }
                };
                // Pools no ensemble uses any more go once idle.
                for (p, in_use) in used.iter().enumerate() {
                    if *in_use {
                        continue;
                    }
                    let state = cluster.pool_state(p, &world.models[p], latency_ms[p], 0, 0.0, at);
                    decisions.extend(
                        state
                            .instances
                            .iter()
                            .filter(|i| i.idle_s >= config.autoscale.idle_timeout_s)
                            .map(|i| Decision {
                                pool: state.model.clone(),
                                action: Action::Terminate { id: i.id.clone() },
                                weight: 0.0,
                                demand: 0.0,
                                capacity: 0.0,
                                reason: "no ensemble uses the model".into(),
                            }),
                    );
                }
                launches += execute(
                    &mut cluster,
                    world,
                    decisions,
                    at,
                    config.launch_s,
                    &mut events,
                    &mut sequence,
                );
            } else if at == next_o2 {
                next_o2 += config.o2_interval_s;
                for (ensemble, dropped) in ensembles.iter_mut().zip(&mut dropped) {
                    o2(config, models, ensemble, dropped);
                }
            } else {
                next_bucket += config.bucket_s;
                let counts = cluster.counts();
                let vms: usize = counts.iter().sum();
                vms_sum += vms as f64;
                vms_max = vms_max.max(vms);
                cluster.bill(at);
                let n = bucket.requests.max(1) as f64;
                series.push(Bucket {
                    t_s: at,
                    rate: bucket.requests as f64 / config.bucket_s,
                    models_per_request: bucket.models as f64 / n,
                    window_accuracy: overall.accuracy(),
                    cumulative_accuracy: all.correct as f64 / all.requests.max(1) as f64,
                    accuracy_met: bucket.met as f64 / n,
                    vms: counts,
                    cost: cluster.cost,
                });
                bucket = Tally::default();
                if let Some(bar) = progress {
                    bar.set_position(at as u64);
                }
            }
        }

        if t >= duration {
            break;
        }
        // The request.
        let (kind, item) = workload::draw(&mut requests, &mix, items);
        let (Some(ensemble), Some(&deadline), Some(&label)) = (
            ensembles.get_mut(kind),
            deadline_s.get(kind),
            world.labels.get(item),
        ) else {
            continue;
        };
        let label = usize::from(label);
        members.clear();
        members.extend_from_slice(&ensemble.members);
        let generation = ensemble.generation;
        member_classes.clear();
        ballots.clear();
        let mut finish = t;
        let mut missed = false;
        let mut spares: Option<Vec<usize>> = None;
        for &m in &members {
            let answer = world
                .answers
                .get(m)
                .and_then(|a| a.get(item))
                .map(|&c| usize::from(c));
            match cluster.serve(m, t, t + deadline) {
                Served::At(at) => {
                    finish = finish.max(at);
                    member_classes.push(answer);
                    if let Some(class) = answer {
                        ballots.push(Ballot {
                            model: m,
                            class,
                            probabilities: &[],
                        });
                    }
                }
                Served::Late(_) | Served::Missed => {
                    finish = finish.max(t + deadline);
                    missed = true;
                    member_classes.push(None);
                }
                Served::NoInstance => {
                    // The member's slot learns nothing either way, as live.
                    member_classes.push(None);
                    let spares = spares.get_or_insert_with(|| {
                        selection::substitutes(models, &ensemble.pool, &members)
                    });
                    match stand_in(&mut cluster, spares, t, t + deadline) {
                        Some((model, Served::At(at))) => {
                            finish = finish.max(at);
                            let answer = world.answers.get(model).and_then(|a| a.get(item));
                            if let Some(&class) = answer {
                                ballots.push(Ballot {
                                    model,
                                    class: usize::from(class),
                                    probabilities: &[],
                                });
                            }
                        }
                        Some(_) => {
                            finish = finish.max(t + deadline);
                            missed = true;
                        }
                        None => missed = true,
                    }
                }
            }
        }
        let outcome = voting::vote(
            config.scheme.voting(),
            &ballots,
            &weights,
            &world.accuracy,
            world.classes,
        );
        let correct = outcome.as_ref().is_some_and(|o| o.class == label);
        if let Some(o) = &outcome {
            for b in &ballots {
                weights.record(b.model, label, b.class);
            }
            ensemble.record(generation, &member_classes, o.class, o.winning_votes, label);
        } else {
            failed += 1;
        }
        let latency = finish - t + hop_s;
        degraded += u64::from(missed && outcome.is_some());
        if outcome.is_none() || latency > deadline {
            violations += 1;
        }
        latencies.push((latency * 1000.0) as f32);
        let Some(window) = outcomes.get_mut(kind) else {
            continue;
        };
        window.push(correct);
        overall.push(correct);
        let met = window.accuracy() >= ensemble.constraint.accuracy;
        for tally in [&mut all, &mut bucket]
            .into_iter()
            .chain(per_type.get_mut(kind))
        {
            tally.requests += 1;
            tally.models += members.len() as u64;
            tally.correct += u64::from(correct);
            tally.met += u64::from(met);
        }
        interval_requests += 1;
        if let (Some(n), Some(count), Some(dropped)) = (
            config.o2_interval_requests,
            since_o2.get_mut(kind),
            dropped.get_mut(kind),
        ) {
            *count += 1;
            if *count >= n.max(1) {
                *count = 0;
                o2(config, models, ensemble, dropped);
            }
        }
    }
    cluster.bill(duration);
    let used = used_pools(&ensembles, models.len());
    let ever: Vec<bool> = (0..models.len())
        .map(|p| {
            used.get(p).copied().unwrap_or(false)
                || series.iter().any(|b| b.vms.get(p).is_some_and(|&v| v > 0))
        })
        .collect();
    let keep = |v: &Vec<usize>| -> Vec<usize> {
        v.iter()
            .zip(&ever)
            .filter(|(_, e)| **e)
            .map(|(c, _)| *c)
            .collect()
    };
    for b in &mut series {
        b.vms = keep(&b.vms);
    }
    let n = all.requests.max(1) as f64;
    let mut sorted = latencies.clone();
    SimResult {
        task: world.task.clone(),
        scheme: config.scheme.name().to_owned(),
        autoscaler: config.autoscaler.name().to_owned(),
        mix: config.mix.name().to_owned(),
        importance_weights: config.importance_weights,
        failure: config.failure,
        requests: all.requests,
        failed,
        degraded,
        slo_violations: violations as f64 / n,
        latency_ms: Percentiles::of(&mut sorted),
        accuracy: all.correct as f64 / n,
        accuracy_met: all.met as f64 / n,
        models_per_request: all.models as f64 / n,
        cost: cluster.cost,
        vms_mean: vms_sum / series.len().max(1) as f64,
        vms_max,
        launches,
        revocations: cluster.revocations,
        types: world
            .types
            .iter()
            .zip(&per_type)
            .map(|(t, tally)| {
                let n = tally.requests.max(1) as f64;
                TypeResult {
                    name: t.name.clone(),
                    latency_ms: t.constraint.latency_ms,
                    accuracy_target: t.constraint.accuracy,
                    requests: tally.requests,
                    models_per_request: tally.models as f64 / n,
                    accuracy: tally.correct as f64 / n,
                    accuracy_met: tally.met as f64 / n,
                }
            })
            .collect(),
        pools: world
            .models
            .iter()
            .zip(&ever)
            .filter(|(_, e)| **e)
            .map(|(m, _)| m.clone())
            .collect(),
        series,
        elapsed_s: started.elapsed().as_secs_f64(),
        latencies,
    }
}

/// The end of a constraint type's interval: Cocktail's O2, or Clipper-X's step.
/// Failover as the live master does it (`cocktail_master::failover`): for a member whose
/// pool has no instance, the best unused candidate that has one answers, and the call
/// that reached an instance is returned with its model. Hedging is not modelled.
fn stand_in(
    cluster: &mut Cluster,
    spares: &mut Vec<usize>,
    t: f64,
    deadline: f64,
) -> Option<(usize, Served)> {
    while !spares.is_empty() {
        let model = spares.remove(0);
        match cluster.serve(model, t, deadline) {
            Served::NoInstance => {}
            served => return Some((model, served)),
        }
    }
    None
}

fn o2(config: &SimConfig, models: &[Candidate], ensemble: &mut Ensemble, dropped: &mut Vec<usize>) {
    match config.scheme {
        Scheme::Cocktail => {
            ensemble.revisit(models, &config.selection);
        }
        Scheme::ClipperX => {
            clipper_x_step(models, ensemble, dropped, config.selection.accuracy_margin)
        }
        Scheme::Infaas | Scheme::Clipper => {}
    }
}

/// Which model pools some ensemble uses now.
fn used_pools(ensembles: &[Ensemble], models: usize) -> Vec<bool> {
    let mut used = vec![false; models];
    for e in ensembles {
        for &m in &e.members {
            if let Some(u) = used.get_mut(m) {
                *u = true;
            }
        }
    }
    used
}

fn offers_for(
    cluster: &Cluster,
    world: &World,
    state: &PoolState,
    spot: bool,
    at: f64,
) -> Vec<autoscale::Offer> {
    world
        .models
        .iter()
        .position(|m| *m == state.model)
        .map(|p| cluster.offers(p, spot, at))
        .unwrap_or_default()
}

/// Launches `count` instances of a type for a pool, `(pool, type, spot, count)`, serving
/// `launch_s` after `at`; returns how many.
fn launch(
    cluster: &mut Cluster,
    (pool, instance_type, spot, count): (usize, &str, bool, u32),
    at: f64,
    launch_s: f64,
    events: &mut BinaryHeap<Reverse<Timed>>,
    sequence: &mut usize,
) -> u64 {
    let ids = cluster.launch(pool, instance_type, spot, count, at, launch_s);
    for &id in &ids {
        *sequence += 1;
        events.push(Reverse(Timed(at + launch_s, *sequence, Event::Ready(id))));
    }
    ids.len() as u64
}

/// Carries out the autoscaler's decisions; returns the instances launched.
fn execute(
    cluster: &mut Cluster,
    world: &World,
    decisions: Vec<Decision>,
    at: f64,
    launch_s: f64,
    events: &mut BinaryHeap<Reverse<Timed>>,
    sequence: &mut usize,
) -> u64 {
    let mut launched = 0;
    for decision in decisions {
        let Some(pool) = world.models.iter().position(|m| *m == decision.pool) else {
            continue;
        };
        match decision.action {
            Action::Launch {
                instance_type,
                count,
                spot,
                ..
            } => {
                launched += launch(
                    cluster,
                    (pool, &instance_type, spot, count),
                    at,
                    launch_s,
                    events,
                    sequence,
                );
            }
            Action::Terminate { id } => {
                if let Ok(id) = id.parse::<usize>() {
                    cluster.end(id, at);
                }
            }
            Action::Resume { .. } | Action::Stop { .. } => {}
        }
    }
    launched
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        World::load(&zoo, "fashion").unwrap()
    }

    fn config(scheme: Scheme, seconds: usize, rate: f64) -> SimConfig {
        SimConfig::new(scheme, Mix::Strict, vec![rate; seconds], 3)
    }

    #[test]
    fn schemes_use_the_models_they_promise_and_runs_replay_for_a_seed() {
        let world = world();
        let infaas = run(&world, &config(Scheme::Infaas, 300, 20.0), None);
        let clipper = run(&world, &config(Scheme::Clipper, 300, 20.0), None);
        let cocktail = run(&world, &config(Scheme::Cocktail, 300, 20.0), None);
        assert!(infaas.requests > 5_000, "{}", infaas.requests);
        assert_eq!(infaas.models_per_request, 1.0);
        assert!(clipper.models_per_request > cocktail.models_per_request);
        // InFaaS answers with the constraint's own model: its accuracy is the recorded one.
        for t in &infaas.types {
            let model = world.types.iter().find(|w| w.name == t.name).unwrap().model;
            assert!((t.accuracy - world.accuracy[model]).abs() < 0.03, "{t:?}");
        }
        // Spot instances cost less than on-demand for the same kind of pools.
        assert!(cocktail.cost > 0.0 && cocktail.cost < clipper.cost);
        let again = run(&world, &config(Scheme::Cocktail, 300, 20.0), None);
        assert_eq!(
            (
                again.requests,
                again.accuracy,
                again.cost,
                again.models_per_request
            ),
            (
                cocktail.requests,
                cocktail.accuracy,
                cocktail.cost,
                cocktail.models_per_request
            )
        );
        assert_eq!(cocktail.series.len(), 5, "one bucket a minute");
    }

    #[test]
    fn failures_are_replaced_and_load_is_followed() {
        let world = world().with_latency_scale(100.0);
        let mut rates = vec![200.0; 600];
        rates.extend(vec![2000.0; 900]);
        let mut c = SimConfig::new(Scheme::Cocktail, Mix::Strict, rates, 5);
        c.failure = Some(Failure {
            at_s: 1200.0,
            fraction: 0.5,
        });
        let r = run(&world, &c, None);
        let vms = |minute: usize| {
            r.series
                .get(minute)
                .map_or(0, |b| b.vms.iter().sum::<usize>())
        };
        assert!(
            vms(20) > vms(5),
            "scaled out for the step: {} -> {}",
            vms(5),
            vms(20)
        );
        assert!(r.launches as usize > vms(5));
        assert!(r.accuracy > 0.8, "{}", r.accuracy);
        // No weights: every pool sized for all requests, so more instances.
        let mut unweighted = SimConfig::new(Scheme::Cocktail, Mix::Strict, vec![2000.0; 900], 5);
        unweighted.importance_weights = false;
        let weighted = SimConfig {
            importance_weights: true,
            ..unweighted.clone()
        };
        assert!(run(&world, &unweighted, None).vms_mean > run(&world, &weighted, None).vms_mean);
    }
}
