//! The resource controller's control loop as a pure state machine: the live controller
//! (an actor task in the master) and the simulator both call [`Control::step`] with what
//! they measured and carry out the decisions it returns, so a live and a simulated run
//! make the same decisions from the same measurements by construction.
//!
//! One step handles the spot interruptions reported since the last one, then the periodic
//! task that is due, if any: the reactive SLO check (every `reactive_interval_s`) before
//! the predictive interval (every `interval_s`) when both fall due together. The caller
//! measures again and calls `step` again while [`Control::due`] says more is due, so the
//! second task sees what the first launched.
//!
//! Counters in the measurements are cumulative (requests received, member calls and
//! deadline misses per pool); the loop keeps its own baselines and windows.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::autoscale::{
    self, Action, AutoscaleConfig, Decision, InstanceState, Offer, PoolState, Target,
};
use crate::forecast::ForecastErrors;
use crate::predict::Predictor;

/// How far back target tracking looks before it scales in: CloudWatch's scale-in alarm
/// of SageMaker's target tracking wants 15 one-minute datapoints below the target.
pub const SCALE_IN_S: f64 = 900.0;

/// Intervals of forecast errors the quantile is taken over (a day of one-minute
/// intervals at most; fewer early on).
const ERROR_WINDOW: usize = 1440;

/// How pools are sized every interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Cocktail's Algorithm 2: each pool's share of the load (its importance weight),
    /// covered at the least cost. The load is a quantile of the forecast over the time
    /// new instances take to serve, and capacity goes when the forecast over the
    /// recycling timeout does not need it; plus the reactive SLO check.
    #[default]
    Cocktail,
    /// MArk's Algorithm 1: greedy least cost per request over the forecast (the same
    /// quantile); plus the SLO check.
    Mark,
    /// The load of the interval that just ended, covered at the least cost; instances go
    /// after the recycling timeout; plus the SLO check (no prediction).
    Reactive,
    /// SageMaker's target tracking at its default 70 % utilisation: capacity for the
    /// load just seen over 0.7, scaled in only below the highest load of the last 15
    /// minutes; no SLO check. Out on a single datapoint, which is kinder than
    /// CloudWatch's three.
    #[value(name = "target-70")]
    #[serde(rename = "target-70")]
    TargetTracking70,
    /// Target tracking with capacity for twice the load (MArk §5.1's variant).
    #[value(name = "target-2x")]
    #[serde(rename = "target-2x")]
    TargetTracking,
}

impl Policy {
    pub const ALL: [Self; 5] = [
        Self::Cocktail,
        Self::Mark,
        Self::Reactive,
        Self::TargetTracking70,
        Self::TargetTracking,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Cocktail => "cocktail",
            Self::Mark => "mark",
            Self::Reactive => "reactive",
            Self::TargetTracking70 => "target-70",
            Self::TargetTracking => "target-2x",
        }
    }

    /// The utilisation target tracking keeps; `None` for the other policies.
    pub fn tracked_utilisation(self) -> Option<f64> {
        match self {
            Self::TargetTracking70 => Some(0.7),
            Self::TargetTracking => Some(0.5),
            Self::Cocktail | Self::Mark | Self::Reactive => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlConfig {
    /// Ts: how often the predictive autoscaler runs (Cocktail: 1 minute).
    pub interval_s: f64,
    /// How often SLO violations are checked (Cocktail: 10 s).
    pub reactive_interval_s: f64,
    /// Tp: how far ahead the load is predicted (Cocktail: 10 minutes).
    pub horizon_s: f64,
    /// The importance-sampling window (Cocktail: 5 minutes).
    pub importance_window_s: f64,
    /// How long a launch takes to serve (MArk's launch overhead).
    pub launch_s: f64,
    /// The quantile of the forecast load the predictive policies plan for (0.5: about
    /// the forecast itself).
    pub forecast_quantile: f64,
    /// The utilisation target tracking keeps instead of its policy's (0.7 or 0.5), to
    /// trace its cost against its SLO violations.
    pub tracking_utilisation: Option<f64>,
    pub policy: Policy,
    /// Off: another optimiser (Ribbon, Kairos) sizes the pools; the loop still measures,
    /// forecasts and reports each pool's demand, and replaces interrupted instances.
    pub sizes_pools: bool,
    /// Size pools by their share of requests (Algorithm 2); off: every pool as if it
    /// received every request (Fig. 12a's comparison).
    pub importance_weights: bool,
    pub autoscale: AutoscaleConfig,
}

impl Default for ControlConfig {
    fn default() -> Self {
        Self {
            interval_s: 60.0,
            reactive_interval_s: 10.0,
            horizon_s: 600.0,
            importance_window_s: 300.0,
            launch_s: 60.0,
            forecast_quantile: 0.9,
            tracking_utilisation: None,
            policy: Policy::Cocktail,
            sizes_pools: true,
            importance_weights: true,
            autoscale: AutoscaleConfig::default(),
        }
    }
}

impl ControlConfig {
    /// Intervals the forecast looks ahead (at least one).
    pub fn horizon_steps(&self) -> usize {
        ((self.horizon_s / self.interval_s.max(1e-3)).round() as usize).max(1)
    }

    /// Intervals in the importance window (at least one).
    pub fn window_len(&self) -> usize {
        ((self.importance_window_s / self.interval_s.max(1e-3)).round() as usize).max(1)
    }

    /// Intervals until what an interval launches serves and the next interval can
    /// correct it: the lead the predictive policies buy for.
    pub fn lead_steps(&self) -> usize {
        (((self.launch_s + self.interval_s) / self.interval_s.max(1e-3)).ceil() as usize).max(1)
    }

    /// Intervals in the recycling timeout: how far ahead the forecast must not need an
    /// instance before it goes.
    pub fn release_steps(&self) -> usize {
        ((self.autoscale.idle_timeout_s / self.interval_s.max(1e-3)).ceil() as usize).max(1)
    }

    /// The share of capacity the policy plans to use.
    pub fn utilisation(&self) -> f64 {
        match self.policy.tracked_utilisation() {
            Some(tracked) => self.tracking_utilisation.unwrap_or(tracked),
            None => self.autoscale.target_utilisation,
        }
        .clamp(0.05, 1.0)
    }

    /// Intervals in a day: the season of a seasonal predictor.
    pub fn steps_per_day(&self) -> usize {
        ((86_400.0 / self.interval_s.max(1e-3)).round() as usize).max(1)
    }
}

/// What the controller measured of one model's pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolMeasure {
    pub model: String,
    /// The model's single-request latency (profile).
    pub latency_ms: f64,
    /// Member calls to the pool and those that missed their deadline, since the start.
    pub calls: u64,
    pub misses: u64,
    /// The miss share over the pool's last M calls, when SLOs are tracked per request
    /// (MArk §4.4) rather than per reactive interval.
    pub recent_miss_share: Option<f64>,
    /// Running and provisioning instances (not stopped ones, not standbys).
    pub instances: Vec<InstanceState>,
    /// Some instance is still provisioning: the pool is not asked for more help.
    pub booting: bool,
    /// Some ensemble uses the model (or it is managed regardless). Pools out of use get
    /// no minimum and their idle instances go.
    pub in_use: bool,
    /// The tightest latency target of the ensembles that use the model: types slower
    /// than it are not bought (MArk's filter). `None`: no target known.
    #[serde(default)]
    pub slo_ms: Option<f64>,
    /// What each allowed instance type costs the pool now.
    pub offers: Vec<Offer>,
}

impl PoolMeasure {
    /// Requests per second its instances (provisioning ones included) serve.
    pub fn capacity(&self, config: &AutoscaleConfig) -> f64 {
        self.instances
            .iter()
            .map(|i| autoscale::capacity(i.packing_factor, self.latency_ms, config))
            .sum()
    }
}

/// A spot interruption notice for one instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    pub id: String,
    pub pool: String,
    pub instance_type: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Requests received since the start, answered or not (the load).
    pub requests: u64,
    pub pools: Vec<PoolMeasure>,
    /// Spot interruptions reported since the last step.
    pub interruptions: Vec<Interruption>,
}

/// Which part of the loop made a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Interruption,
    Reactive,
    Predictive,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Self::Interruption => "interruption",
            Self::Reactive => "reactive",
            Self::Predictive => "predictive",
        }
    }
}

/// One pool as the last predictive interval saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolPlan {
    pub model: String,
    pub weight: f64,
    /// Requests per second the pool must serve at T + Tp, and what it serves now.
    pub demand: f64,
    pub capacity: f64,
    pub instances: usize,
    /// Member calls in the importance window.
    pub requests: u64,
}

/// What a predictive interval measured and forecast.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalReport {
    /// Requests per second over the interval that ended; the forecast for the end of the
    /// lead (mean), and the planned quantile of the load over the lead.
    pub rate: f64,
    pub forecast: f64,
    pub predicted: f64,
    /// Requests received in the interval, and in the importance window.
    pub requests: u64,
    pub window_requests: u64,
    pub pools: Vec<PoolPlan>,
}

/// What one step decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    pub decisions: Vec<(Trigger, Decision)>,
    /// Set when the step closed a predictive interval.
    pub interval: Option<IntervalReport>,
}

/// Counters at the start of a window, per pool: (calls, misses).
type Baseline = HashMap<String, (u64, u64)>;

/// The control loop's state: its timers, counter baselines, the importance window and the
/// load predictor.
#[derive(Debug)]
pub struct Control {
    config: ControlConfig,
    predictor: Box<dyn Predictor>,
    next_reactive: f64,
    next_predictive: f64,
    requests_at_interval: u64,
    calls_at_interval: Baseline,
    at_reactive: Baseline,
    /// Per closed interval in the importance window: requests received, calls per pool.
    window: VecDeque<(u64, HashMap<String, u64>)>,
    /// The rates of the last [`SCALE_IN_S`] (target tracking scales in below them).
    recent: VecDeque<f64>,
    errors: ForecastErrors,
    /// Some interval had load: every interval after it is an observation.
    load_seen: bool,
    last: Option<IntervalReport>,
    /// When each pool last had a spot instance interrupted, and the time of the step.
    interrupted_at: HashMap<String, f64>,
    now: f64,
}

impl Control {
    /// A loop started at `now`: the first reactive check and predictive interval come
    /// one period later.
    pub fn new(config: ControlConfig, predictor: Box<dyn Predictor>, now: f64) -> Self {
        Self {
            next_reactive: now + config.reactive_interval_s,
            next_predictive: now + config.interval_s,
            predictor,
            requests_at_interval: 0,
            calls_at_interval: Baseline::new(),
            at_reactive: Baseline::new(),
            window: VecDeque::new(),
            recent: VecDeque::new(),
            errors: ForecastErrors::new(
                config
                    .horizon_steps()
                    .max(config.lead_steps())
                    .max(config.release_steps()),
                ERROR_WINDOW,
            ),
            load_seen: false,
            last: None,
            interrupted_at: HashMap::new(),
            now,
            config,
        }
    }

    pub fn config(&self) -> &ControlConfig {
        &self.config
    }

    /// Feeds the predictor and its error record the rates of intervals before the start
    /// (one per interval, oldest first), as a controller that has been running would have
    /// seen them: a seasonal predictor needs a season of history.
    pub fn prime(&mut self, rates: &[f64]) {
        for &rate in rates {
            self.observe(rate);
        }
        self.load_seen |= !rates.is_empty();
    }

    /// The forecast for leads `1..=H` after an interval of `rate`: the predictor's, once
    /// the loop has seen load flow for a whole interval. Until then `rate` itself, and the
    /// interval is no observation: the intervals before load arrived and the first one
    /// with load, which may have begun seconds before it ended, would enter the error
    /// record as the predictor's misses, 100 % and more, and as the 90th percentile of
    /// the first twenty to thirty errors they planned for up to twice the forecast (1.7
    /// times in the unit test `a_start_before_the_load_is_no_forecast_error`;
    /// `autoscaling_live` cost 1.24-1.26x the simulated, whose load starts with its
    /// loop).
    fn forecast_after(&mut self, rate: f64) -> Vec<f64> {
        let observed = self.load_seen;
        self.load_seen |= rate > 0.0;
        if observed {
            self.observe(rate)
        } else {
            vec![rate; self.errors.horizon()]
        }
    }

    /// One interval's rate into the error record, the predictor and the recent rates;
    /// returns the forecast for leads `1..=H`.
    fn observe(&mut self, rate: f64) -> Vec<f64> {
        self.errors.observe(rate);
        self.predictor.observe(rate);
        self.recent.push_back(rate);
        let interval_s = self.config.interval_s.max(1e-3);
        while self.recent.len() as f64 * interval_s > SCALE_IN_S.max(interval_s) {
            self.recent.pop_front();
        }
        let forecast: Vec<f64> = (1..=self.errors.horizon())
            .map(|k| self.predictor.forecast(k))
            .collect();
        self.errors.record(forecast.clone());
        forecast
    }

    /// When the next periodic task falls due.
    pub fn next_due(&self) -> f64 {
        if self.reactive_enabled() {
            self.next_reactive.min(self.next_predictive)
        } else {
            self.next_predictive
        }
    }

    /// Whether a periodic task is due at `now`.
    pub fn due(&self, now: f64) -> bool {
        self.next_due() <= now
    }

    /// The last predictive interval's report.
    pub fn last_interval(&self) -> Option<&IntervalReport> {
        self.last.as_ref()
    }

    /// Every pool at its minimum before any load is seen (a cold start).
    pub fn warm_start(&self, measurements: &Measurements) -> Vec<Decision> {
        if !self.config.sizes_pools {
            return Vec::new();
        }
        let (states, offers) = self.states(&in_use(measurements), |_| 0, |_| 0.0);
        autoscale::plan(
            &Target::steady(0.0, self.config.autoscale.idle_timeout_s),
            0,
            &states,
            &|p| offers_of(&offers, p),
            &self.config.autoscale,
        )
    }

    /// The decisions for `now`: replacements for the interruptions in `measurements`, then
    /// the periodic task that is due, if any.
    pub fn step(&mut self, measurements: &Measurements, now: f64) -> Step {
        let mut step = Step::default();
        self.now = now;
        for notice in &measurements.interruptions {
            self.interrupted_at.insert(notice.pool.clone(), now);
            if let Some(decision) = replacement(notice, measurements) {
                step.decisions.push((Trigger::Interruption, decision));
            }
        }
        if self.reactive_enabled() && self.next_reactive <= now.min(self.next_predictive) {
            self.next_reactive += self.config.reactive_interval_s;
            let reactive = self.reactive(measurements);
            step.decisions
                .extend(reactive.into_iter().map(|d| (Trigger::Reactive, d)));
        } else if self.next_predictive <= now {
            self.next_predictive += self.config.interval_s;
            let (report, decisions) = self.predictive(measurements);
            step.decisions
                .extend(decisions.into_iter().map(|d| (Trigger::Predictive, d)));
            self.last = Some(report.clone());
            step.interval = Some(report);
        }
        step
    }

    /// Target tracking has no SLO check of its own.
    fn reactive_enabled(&self) -> bool {
        self.config.sizes_pools && self.config.policy.tracked_utilisation().is_none()
    }

    /// One more instance for pools missing deadlines (Cocktail: over the last check;
    /// MArk: over each model's last M calls). A pool still provisioning help is not
    /// asked again.
    fn reactive(&mut self, measurements: &Measurements) -> Vec<Decision> {
        let previous = std::mem::take(&mut self.at_reactive);
        for pool in &measurements.pools {
            self.at_reactive
                .insert(pool.model.clone(), (pool.calls, pool.misses));
        }
        let share = |pool: &PoolMeasure| {
            if pool.booting {
                return 0.0;
            }
            pool.recent_miss_share.unwrap_or_else(|| {
                let (calls, misses) = previous.get(&pool.model).copied().unwrap_or_default();
                let calls = pool.calls.saturating_sub(calls);
                let misses = pool.misses.saturating_sub(misses);
                if calls == 0 {
                    0.0
                } else {
                    misses as f64 / calls as f64
                }
            })
        };
        let (states, offers) = self.states(&in_use(measurements), |_| 0, share);
        autoscale::react(&states, &|p| offers_of(&offers, p), &self.config.autoscale)
    }

    /// One predictive interval: observe the load, forecast it, size the pools in use and
    /// let idle pools out of use go.
    fn predictive(&mut self, measurements: &Measurements) -> (IntervalReport, Vec<Decision>) {
        let interval_s = self.config.interval_s.max(1e-3);
        let received = measurements
            .requests
            .saturating_sub(self.requests_at_interval);
        self.requests_at_interval = measurements.requests;
        let mut calls = HashMap::new();
        for pool in &measurements.pools {
            let before = self
                .calls_at_interval
                .insert(pool.model.clone(), (pool.calls, 0))
                .map_or(0, |(c, _)| c);
            calls.insert(pool.model.clone(), pool.calls.saturating_sub(before));
        }
        self.window.push_back((received, calls));
        while self.window.len() > self.config.window_len() {
            self.window.pop_front();
        }
        let rate = received as f64 / interval_s;
        let forecast = self.forecast_after(rate);
        let total: u64 = self.window.iter().map(|(received, _)| received).sum();
        let window_calls = |model: &str| -> u64 {
            self.window
                .iter()
                .map(|(_, calls)| calls.get(model).copied().unwrap_or(0))
                .sum()
        };
        let q = self.config.forecast_quantile;
        let upper: Vec<f64> = forecast
            .iter()
            .enumerate()
            .map(|(k, f)| self.errors.upper(k + 1, *f, q))
            .collect();
        let peak = |steps: usize| upper.iter().take(steps.max(1)).copied().fold(0.0, f64::max);
        let lead = self.config.lead_steps();
        let predicted = peak(lead);
        let utilisation = self.config.utilisation();
        let target = match self.config.policy {
            Policy::Cocktail | Policy::Mark => Target {
                buy: predicted / utilisation,
                keep: peak(self.config.release_steps()) / utilisation,
                release_idle_s: interval_s,
            },
            Policy::Reactive => {
                Target::steady(rate / utilisation, self.config.autoscale.idle_timeout_s)
            }
            Policy::TargetTracking70 | Policy::TargetTracking => Target {
                buy: rate / utilisation,
                keep: self.recent.iter().copied().fold(0.0, f64::max) / utilisation,
                release_idle_s: interval_s,
            },
        };

        let weighted = self.config.importance_weights;
        let (states, offers) = self.states(
            &in_use(measurements),
            |p| {
                if weighted {
                    window_calls(&p.model)
                } else {
                    total
                }
            },
            |_| 0.0,
        );
        let offers = |p: &PoolState| offers_of(&offers, p);
        let config = &self.config.autoscale;
        let mut decisions = if !self.config.sizes_pools {
            Vec::new()
        } else if self.config.policy == Policy::Mark {
            let planned: Vec<f64> = upper
                .iter()
                .take(self.config.horizon_steps())
                .map(|u| u / utilisation)
                .collect();
            autoscale::mark(
                &planned,
                total,
                &states,
                &offers,
                config,
                interval_s,
                self.config.launch_s,
                target.release_idle_s,
            )
        } else {
            autoscale::plan(&target, total, &states, &offers, config)
        };
        if self.config.sizes_pools {
            decisions.extend(retire_idle(measurements, config));
        }
        let pools = states
            .iter()
            .map(|p| {
                let weight = p.weight(total);
                PoolPlan {
                    model: p.model.clone(),
                    weight,
                    demand: target.buy * weight,
                    capacity: p.capacity(config),
                    instances: p.instances.len(),
                    requests: p.requests,
                }
            })
            .collect();
        let report = IntervalReport {
            rate,
            forecast: forecast.get(lead - 1).copied().unwrap_or(0.0),
            predicted,
            requests: received,
            window_requests: total,
            pools,
        };
        (report, decisions)
    }

    /// The pools as the autoscaler sees them, and each pool's offers.
    fn states(
        &self,
        measurements: &Measurements,
        requests: impl Fn(&PoolMeasure) -> u64,
        slo: impl Fn(&PoolMeasure) -> f64,
    ) -> (Vec<PoolState>, HashMap<String, Vec<Offer>>) {
        let states = measurements
            .pools
            .iter()
            .map(|p| PoolState {
                model: p.model.clone(),
                latency_ms: p.latency_ms,
                requests: requests(p),
                instances: p.instances.clone(),
                slo_violations: slo(p),
                booting: p.booting,
                spot_calm: self
                    .interrupted_at
                    .get(&p.model)
                    .is_none_or(|at| self.now - at >= self.config.autoscale.idle_timeout_s),
            })
            .collect();
        let offers = measurements
            .pools
            .iter()
            .map(|p| (p.model.clone(), autoscale::within_slo(&p.offers, p.slo_ms)))
            .collect();
        (states, offers)
    }
}

/// The pools some ensemble uses.
fn in_use(measurements: &Measurements) -> Measurements {
    Measurements {
        pools: measurements
            .pools
            .iter()
            .filter(|p| p.in_use)
            .cloned()
            .collect(),
        ..Measurements::default()
    }
}

fn offers_of(offers: &HashMap<String, Vec<Offer>>, pool: &PoolState) -> Vec<Offer> {
    offers.get(&pool.model).cloned().unwrap_or_default()
}

/// Pools no ensemble uses any more give up their instances once idle.
fn retire_idle(measurements: &Measurements, config: &AutoscaleConfig) -> Vec<Decision> {
    measurements
        .pools
        .iter()
        .filter(|p| !p.in_use)
        .flat_map(|pool| {
            pool.instances
                .iter()
                .filter(|i| i.idle_s >= config.idle_timeout_s)
                .map(|i| Decision {
                    pool: pool.model.clone(),
                    action: Action::Terminate { id: i.id.clone() },
                    weight: 0.0,
                    demand: 0.0,
                    capacity: 0.0,
                    reason: "no ensemble uses the model".into(),
                })
        })
        .collect()
}

/// An interrupted instance's replacement (MArk §4.5): on-demand, on the cheapest
/// burstable type the pool may use (a transient stand-in until the next interval sizes
/// the pool), else on the interrupted instance's own type, else the cheapest on-demand
/// cover.
fn replacement(notice: &Interruption, measurements: &Measurements) -> Option<Decision> {
    let pool = measurements.pools.iter().find(|p| p.model == notice.pool)?;
    let offers = autoscale::within_slo(&pool.offers, pool.slo_ms);
    let usable = offers.iter().filter(|o| o.packing_factor > 0);
    let offer = usable
        .clone()
        .filter(|o| o.burstable && !o.gpu)
        .min_by(|a, b| a.on_demand_per_hour.total_cmp(&b.on_demand_per_hour))
        .or_else(|| {
            usable
                .clone()
                .find(|o| o.instance_type == notice.instance_type)
        })
        .or_else(|| {
            usable
                .filter(|o| !o.gpu)
                .min_by(|a, b| a.on_demand_per_hour.total_cmp(&b.on_demand_per_hour))
        })?;
    Some(Decision {
        pool: notice.pool.clone(),
        action: Action::Launch {
            instance_type: offer.instance_type.clone(),
            count: 1,
            spot: false,
            price_per_hour: offer.on_demand_per_hour,
        },
        weight: 0.0,
        demand: 0.0,
        capacity: 0.0,
        reason: format!(
            "replaces {} after a spot interruption: {}",
            notice.id, notice.reason
        ),
    })
}

#[cfg(test)]
mod tests;
