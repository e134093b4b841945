//! What a simulated run compares and how it is set up.

use cocktail_policy::autoscale::AutoscaleConfig;
use cocktail_policy::control::ControlConfig;
use cocktail_policy::predict::Statistical;
use cocktail_policy::selection::{Rule, SelectionConfig};
use cocktail_policy::tracking::Knobs;
use serde::Serialize;

use crate::loadgen::AnswerTimes;
use crate::workload::{self, Mix};

/// The serving schemes compared (Cocktail §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheme {
    /// The single model that meets the constraint, on-demand, reactive scaling.
    #[value(name = "InFaaS")]
    Infaas,
    /// Every candidate model, static, on spot (as Cocktail §5.2 compares it).
    #[value(name = "Clipper")]
    Clipper,
    /// Every candidate, then drops one model at a time while accuracy holds; on spot.
    #[value(name = "Clipper-X")]
    ClipperX,
    /// The full design: O1/O2, spot, predictive weighted autoscaling.
    #[value(name = "Cocktail")]
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

    /// Whether the scheme buys spot: all but InFaaS, which Cocktail §5.2 runs on
    /// on-demand instances only, so that Cocktail's advantage over Clipper is not the spot
    /// discount.
    pub fn spot(self) -> bool {
        self != Self::Infaas
    }

    pub fn autoscaler(self) -> Autoscaler {
        match self {
            Self::Cocktail => Autoscaler::Cocktail,
            _ => Autoscaler::Reactive,
        }
    }
}

/// How pools are sized: the control loop's policy, shared with the live controller.
pub use cocktail_policy::control::Policy as Autoscaler;

/// How many live answers around a simulated request's arrival its hop is drawn from
/// ([`SimConfig::live_answers`]): about four seconds at 16 req/s.
pub const NEARBY_ANSWERS: usize = 64;

/// Where one live answer's time went, besides inference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LiveAnswer {
    /// When its request arrived, in seconds since the run began.
    pub at_s: f64,
    /// The hop master ↔ worker of each member call.
    pub hop_ms: f64,
    /// The time outside the member calls: the client's hop to the master and back, the
    /// master's own work.
    pub outside_ms: f64,
}

impl LiveAnswer {
    /// What `times` took besides inference: its wait for members less the inference of
    /// the slowest model that answered it (`inference_ms`, by name), and the rest of its
    /// latency. `None` when a model has no inference time.
    pub fn from_times(
        times: &AnswerTimes,
        inference_ms: impl Fn(&str) -> Option<f64>,
    ) -> Option<Self> {
        let mut slowest = 0.0_f64;
        for model in &times.models {
            slowest = slowest.max(inference_ms(model)?);
        }
        Some(Self {
            at_s: times.sent_s,
            hop_ms: (times.wait_ms - slowest).max(0.0),
            outside_ms: times.outside_ms,
        })
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
    pub predictor: Statistical,
    /// Rates of the intervals before the start, oldest first, that the control loop's
    /// predictor has already seen (a controller that has been running).
    pub history: Vec<f64>,
    /// The quantile of the forecast load the predictive policies plan for.
    pub forecast_quantile: f64,
    /// Target tracking's utilisation instead of its policy's.
    pub tracking_utilisation: Option<f64>,
    /// One network hop master ↔ worker, added to every answer, and nothing outside the
    /// member calls (the simulator's requests start at the master)...
    pub hop_ms: f64,
    /// ... or, when there are any, one of these answers measured live, drawn at random
    /// for each request: its hop for each of the request's calls, and its time outside
    /// them added to the request's latency. Drawn together because they are not
    /// independent: both grow when the host is busy, and drawing them apart narrows the
    /// spread of latencies and moves their median (a live run at 30 req/s: p50 3.99 ms
    /// live, 4.20 simulated with independent draws). Drawn among the
    /// [`NEARBY_ANSWERS`] whose requests arrived nearest the simulated one, for the same
    /// reason in time: a busy minute live is a busy minute simulated (drawn from the
    /// whole run, the live cold start's slow hops fell all through the simulated day,
    /// and the autoscaling check's simulated SLO violations were 13.2 % against 10.7 %).
    pub live_answers: Vec<LiveAnswer>,
    /// Serve each call at the model's latency on the instance's catalog type, as workers
    /// emulating their types do (`--emulate-types`); off, at the profiled latency on
    /// the profiling host whatever the type, as unemulated local workers do.
    pub per_type_latency: bool,
    /// Members may answer this long after the latency target, as the master's
    /// `--deadline-grace-ms` (default 0); a later answer is an SLO violation either way.
    pub grace_ms: f64,
    /// Under measured selection or tracking, every n-th request's item joins its
    /// constraint's buffer (its tracker's window) with every candidate's recorded answer,
    /// as the master's `--shadow-every` (the shadow calls' load on the pools is not
    /// modelled).
    pub shadow_every: u64,
    pub selection: SelectionConfig,
    /// Under tracking, the margin, shift check and pacing, as the master's
    /// `--tracking-margin`, `--no-shift-check` and `--pace`.
    pub knobs: Knobs,
    pub autoscale: AutoscaleConfig,
    /// Time-series resolution (seconds).
    pub bucket_s: f64,
    /// Catalog types that may be bought (empty: all).
    pub instance_types: Vec<String>,
}

impl SimConfig {
    /// The scheme's name, with measured selection and tracking as schemes of their own
    /// (`Cocktail-M`, `Cocktail-T`).
    pub fn label(&self) -> String {
        match (self.scheme, self.selection.rule) {
            (Scheme::Cocktail, Rule::Measured) => "Cocktail-M".to_owned(),
            (Scheme::Cocktail, Rule::Tracking) => "Cocktail-T".to_owned(),
            (scheme, _) => scheme.name().to_owned(),
        }
    }

    /// The control loop's configuration for this run.
    pub fn control(&self) -> ControlConfig {
        ControlConfig {
            interval_s: self.interval_s,
            reactive_interval_s: self.reactive_interval_s,
            horizon_s: self.horizon_s,
            importance_window_s: self.importance_window_s,
            launch_s: self.launch_s,
            forecast_quantile: self.forecast_quantile,
            tracking_utilisation: self.tracking_utilisation,
            policy: self.autoscaler,
            sizes_pools: true,
            importance_weights: self.importance_weights,
            autoscale: self.autoscale,
        }
    }

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
            forecast_quantile: ControlConfig::default().forecast_quantile,
            tracking_utilisation: None,
            predictor: Statistical::Auto,
            history: Vec::new(),
            hop_ms: workload::HOP_MS,
            live_answers: Vec::new(),
            grace_ms: 0.0,
            per_type_latency: false,
            shadow_every: 20,
            selection: SelectionConfig::default(),
            knobs: Knobs::default(),
            autoscale: AutoscaleConfig::default(),
            bucket_s: 60.0,
            instance_types: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(models: &[&str]) -> AnswerTimes {
        AnswerTimes {
            sent_s: 1.5,
            wait_ms: 3.0,
            outside_ms: 0.4,
            models: models.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    #[test]
    fn a_live_answers_hop_is_its_wait_less_its_slowest_members_inference() {
        let inference = |model: &str| match model {
            "fast" => Some(0.5),
            "slow" => Some(1.25),
            _ => None,
        };
        let answer = LiveAnswer::from_times(&times(&["fast", "slow"]), inference);
        assert_eq!(
            answer,
            Some(LiveAnswer {
                at_s: 1.5,
                hop_ms: 1.75,
                outside_ms: 0.4
            })
        );
        // No model named: the whole wait is hop.
        let none = LiveAnswer::from_times(&times(&[]), inference);
        assert_eq!(none.map(|a| a.hop_ms), Some(3.0));
        assert_eq!(
            LiveAnswer::from_times(&times(&["fast", "unknown"]), inference),
            None
        );
    }
}
