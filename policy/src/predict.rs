//! Load predictors for the autoscaler (Cocktail §4.2.2; its Table 4 compares them by
//! RMSE). Each one sees the request rate once per interval and forecasts the rate a
//! number of intervals ahead. Pure code: the live controller and the simulator feed them
//! the same series.

use std::collections::VecDeque;

pub trait Predictor: Send + std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// The rate measured over the interval that just ended.
    fn observe(&mut self, rate: f64);
    /// The rate expected `steps` intervals after the last observation (1: the next).
    /// Never negative; 0 before any observation.
    fn forecast(&self, steps: usize) -> f64;
}

/// The mean of the last `window` rates (Table 4's MWA).
#[derive(Debug, Clone)]
pub struct MovingAverage {
    window: usize,
    recent: VecDeque<f64>,
}

impl MovingAverage {
    pub fn new(window: usize) -> Self {
        Self {
            window: window.max(1),
            recent: VecDeque::new(),
        }
    }
}

impl Predictor for MovingAverage {
    fn name(&self) -> &'static str {
        "moving average"
    }

    fn observe(&mut self, rate: f64) {
        self.recent.push_back(rate);
        if self.recent.len() > self.window {
            self.recent.pop_front();
        }
    }

    fn forecast(&self, _steps: usize) -> f64 {
        if self.recent.is_empty() {
            return 0.0;
        }
        (self.recent.iter().sum::<f64>() / self.recent.len() as f64).max(0.0)
    }
}

/// Exponentially weighted moving average.
#[derive(Debug, Clone)]
pub struct Ewma {
    alpha: f64,
    level: Option<f64>,
}

impl Ewma {
    pub fn new(alpha: f64) -> Self {
        Self {
            alpha: alpha.clamp(0.0, 1.0),
            level: None,
        }
    }
}

impl Predictor for Ewma {
    fn name(&self) -> &'static str {
        "EWMA"
    }

    fn observe(&mut self, rate: f64) {
        self.level = Some(match self.level {
            None => rate,
            Some(level) => self.alpha * rate + (1.0 - self.alpha) * level,
        });
    }

    fn forecast(&self, _steps: usize) -> f64 {
        self.level.unwrap_or(0.0).max(0.0)
    }
}

/// Least-squares line through the last `window` rates, extrapolated.
#[derive(Debug, Clone)]
pub struct LinearRegression {
    window: usize,
    recent: VecDeque<f64>,
}

impl LinearRegression {
    pub fn new(window: usize) -> Self {
        Self {
            window: window.max(2),
            recent: VecDeque::new(),
        }
    }
}

impl Predictor for LinearRegression {
    fn name(&self) -> &'static str {
        "linear regression"
    }

    fn observe(&mut self, rate: f64) {
        self.recent.push_back(rate);
        if self.recent.len() > self.window {
            self.recent.pop_front();
        }
    }

    fn forecast(&self, steps: usize) -> f64 {
        let n = self.recent.len();
        if n == 0 {
            return 0.0;
        }
        let nf = n as f64;
        let mean_x = (nf - 1.0) / 2.0;
        let mean_y = self.recent.iter().sum::<f64>() / nf;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (x, y) in self.recent.iter().enumerate() {
            let dx = x as f64 - mean_x;
            sxy += dx * (y - mean_y);
            sxx += dx * dx;
        }
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let x = nf - 1.0 + steps as f64;
        (mean_y + slope * (x - mean_x)).max(0.0)
    }
}

/// Additive Holt-Winters: level, trend and a season of `period` intervals. Until a full
/// season is seen it forecasts like Holt's linear method.
#[derive(Debug, Clone)]
pub struct HoltWinters {
    alpha: f64,
    beta: f64,
    gamma: f64,
    period: usize,
    level: f64,
    trend: f64,
    season: Vec<f64>,
    first_season: Vec<f64>,
    seen: usize,
}

impl HoltWinters {
    pub fn new(alpha: f64, beta: f64, gamma: f64, period: usize) -> Self {
        Self {
            alpha: alpha.clamp(0.0, 1.0),
            beta: beta.clamp(0.0, 1.0),
            gamma: gamma.clamp(0.0, 1.0),
            period: period.max(1),
            level: 0.0,
            trend: 0.0,
            season: Vec::new(),
            first_season: Vec::new(),
            seen: 0,
        }
    }

    fn seasonal(&self, index: usize) -> f64 {
        self.season.get(index % self.period).copied().unwrap_or(0.0)
    }
}

impl Predictor for HoltWinters {
    fn name(&self) -> &'static str {
        "Holt-Winters"
    }

    fn observe(&mut self, rate: f64) {
        let t = self.seen;
        self.seen += 1;
        if self.season.is_empty() {
            // Collect the first season, then start from its mean and its shape.
            self.first_season.push(rate);
            if self.first_season.len() == self.period {
                let mean = self.first_season.iter().sum::<f64>() / self.period as f64;
                self.season = self.first_season.iter().map(|r| r - mean).collect();
                self.level = mean;
                self.trend = 0.0;
            } else {
                let n = self.first_season.len() as f64;
                let previous = self.level;
                self.level = self.first_season.iter().sum::<f64>() / n;
                if n > 1.0 {
                    self.trend = self.level - previous;
                }
            }
            return;
        }
        let s = self.seasonal(t);
        let previous = self.level;
        self.level = self.alpha * (rate - s) + (1.0 - self.alpha) * (self.level + self.trend);
        self.trend = self.beta * (self.level - previous) + (1.0 - self.beta) * self.trend;
        self.season[t % self.period] = self.gamma * (rate - self.level) + (1.0 - self.gamma) * s;
    }

    fn forecast(&self, steps: usize) -> f64 {
        if self.seen == 0 {
            return 0.0;
        }
        let seasonal = if self.season.is_empty() {
            0.0
        } else {
            self.seasonal(self.seen - 1 + steps)
        };
        (self.level + steps as f64 * self.trend + seasonal).max(0.0)
    }
}

/// Picks, every interval, the predictor whose forecasts `lead` steps ahead were closest to
/// the load over the last `window` intervals (issue 20: no single predictor wins on every
/// trace; Table 4 of the paper ranks them differently per trace). Every candidate sees
/// every rate; before any is scored, the first one (EWMA) forecasts.
#[derive(Debug)]
pub struct Adaptive {
    candidates: Vec<(Box<dyn Predictor>, crate::forecast::ForecastErrors)>,
    lead: usize,
    best: usize,
}

impl Adaptive {
    /// The statistical predictors (Holt-Winters with a season of `period` intervals),
    /// scored at `lead` steps over their last `window` errors.
    pub fn new(period: usize, lead: usize, window: usize) -> Self {
        let lead = lead.max(1);
        let order = [
            Statistical::Ewma,
            Statistical::Mwa,
            Statistical::Linear,
            Statistical::HoltWinters,
        ];
        Self {
            candidates: order
                .iter()
                .map(|s| {
                    (
                        s.build(period, lead),
                        crate::forecast::ForecastErrors::new(lead, window),
                    )
                })
                .collect(),
            lead,
            best: 0,
        }
    }

    /// The name of the predictor that forecasts now.
    pub fn chosen(&self) -> &'static str {
        self.candidates
            .get(self.best)
            .map_or("none", |(p, _)| p.name())
    }
}

impl Predictor for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn observe(&mut self, rate: f64) {
        for (predictor, errors) in &mut self.candidates {
            errors.observe(rate);
            predictor.observe(rate);
            errors.record((1..=self.lead).map(|k| predictor.forecast(k)).collect());
        }
        let lead = self.lead;
        self.best = self
            .candidates
            .iter()
            .enumerate()
            .filter_map(|(i, (_, errors))| Some((i, errors.rmse(lead)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(0, |(i, _)| i);
    }

    fn forecast(&self, steps: usize) -> f64 {
        self.candidates
            .get(self.best)
            .map_or(0.0, |(p, _)| p.forecast(steps))
    }
}

/// Root mean square error of forecasts made `horizon` intervals ahead along `trace`.
pub fn rmse(predictor: &mut dyn Predictor, trace: &[f64], horizon: usize) -> f64 {
    let horizon = horizon.max(1);
    let mut squared = 0.0;
    let mut count = 0_usize;
    for (t, &rate) in trace.iter().enumerate() {
        predictor.observe(rate);
        if let Some(&actual) = trace.get(t + horizon) {
            let error = predictor.forecast(horizon) - actual;
            squared += error * error;
            count += 1;
        }
    }
    if count == 0 {
        0.0
    } else {
        (squared / count as f64).sqrt()
    }
}

/// The load predictors the controller can run (`--predictor`); the wire names are
/// `mwa`, `ewma`, `linear`, `holt-winters` and `learned`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum PredictorKind {
    /// The mean of the last 10 intervals.
    Mwa,
    /// Exponentially weighted moving average (α = 0.5).
    #[default]
    Ewma,
    /// Linear regression over the last 10 intervals.
    Linear,
    /// Level, trend and a daily season.
    HoltWinters,
    /// Whichever of the four above has the least recent error (`Adaptive`).
    Auto,
    /// An MLP run by ONNX Runtime (models/predictors/).
    // The master builds it; this crate does not depend on ONNX Runtime.
    Learned,
}

impl PredictorKind {
    /// The kind as a predictor this crate builds; `None` for [`PredictorKind::Learned`].
    pub fn statistical(self) -> Option<Statistical> {
        match self {
            Self::Mwa => Some(Statistical::Mwa),
            Self::Ewma => Some(Statistical::Ewma),
            Self::Linear => Some(Statistical::Linear),
            Self::HoltWinters => Some(Statistical::HoltWinters),
            Self::Auto => Some(Statistical::Auto),
            Self::Learned => None,
        }
    }
}

/// The predictors this crate builds: every [`PredictorKind`] but the learned one. The
/// simulator takes these (it has no ONNX Runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Statistical {
    /// The mean of the last 10 intervals.
    Mwa,
    /// Exponentially weighted moving average (α = 0.5).
    #[default]
    Ewma,
    /// Linear regression over the last 10 intervals.
    Linear,
    /// Level, trend and a daily season.
    HoltWinters,
    /// Whichever of the others has the least recent error at the lead the autoscaler
    /// buys for ([`Adaptive`]).
    Auto,
}

/// Intervals of errors the adaptive predictor compares its candidates over (an hour of
/// one-minute intervals).
pub const ADAPTIVE_WINDOW: usize = 60;

impl Statistical {
    pub const ALL: [Self; 5] = [
        Self::Mwa,
        Self::Ewma,
        Self::Linear,
        Self::HoltWinters,
        Self::Auto,
    ];

    /// The predictor with the defaults the controller uses; Holt-Winters' season is
    /// `period` intervals, and the adaptive one scores its candidates `lead` steps ahead.
    pub fn build(self, period: usize, lead: usize) -> Box<dyn Predictor> {
        match self {
            Self::Mwa => Box::new(MovingAverage::new(10)),
            Self::Ewma => Box::new(Ewma::new(0.5)),
            Self::Linear => Box::new(LinearRegression::new(10)),
            Self::HoltWinters => Box::new(HoltWinters::new(0.3, 0.01, 0.1, period)),
            Self::Auto => Box::new(Adaptive::new(period, lead, ADAPTIVE_WINDOW)),
        }
    }
}

// clap's wire names, so that logs and tables say what the flags take.
impl std::fmt::Display for PredictorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        wire_name(self, f)
    }
}

impl std::fmt::Display for Statistical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        wire_name(self, f)
    }
}

fn wire_name(value: &impl clap::ValueEnum, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match value.to_possible_value() {
        Some(v) => f.write_str(v.get_name()),
        None => Ok(()),
    }
}

/// The predictor of `kind` (see [`Statistical::build`]); `None` for
/// [`PredictorKind::Learned`], which the master loads.
pub fn build(kind: PredictorKind, period: usize, lead: usize) -> Option<Box<dyn Predictor>> {
    kind.statistical().map(|s| s.build(period, lead))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(period: usize) -> Vec<Box<dyn Predictor>> {
        Statistical::ALL.map(|s| s.build(period, 3)).into()
    }

    #[test]
    fn a_constant_load_is_predicted_exactly_by_every_predictor() {
        for mut p in all(4) {
            assert_eq!(p.forecast(1), 0.0, "{}: nothing seen", p.name());
            for _ in 0..20 {
                p.observe(50.0);
            }
            assert!(
                (p.forecast(3) - 50.0).abs() < 1e-9,
                "{}: {}",
                p.name(),
                p.forecast(3)
            );
        }
    }

    #[test]
    fn every_kind_but_the_learned_one_is_built_here_under_its_wire_name() {
        use clap::ValueEnum as _;
        for kind in PredictorKind::value_variants() {
            let built = build(*kind, 4, 2);
            assert_eq!(built.is_none(), *kind == PredictorKind::Learned, "{kind:?}");
        }
        let names: Vec<String> = PredictorKind::value_variants()
            .iter()
            .filter_map(|k| k.to_possible_value())
            .map(|v| v.get_name().to_owned())
            .collect();
        assert_eq!(
            names,
            ["mwa", "ewma", "linear", "holt-winters", "auto", "learned"]
        );
        assert_eq!(PredictorKind::HoltWinters.to_string(), "holt-winters");
        assert_eq!(Statistical::HoltWinters.to_string(), "holt-winters");
        assert_eq!(
            PredictorKind::from_str("holt-winters", false),
            Ok(PredictorKind::HoltWinters)
        );
        assert!(PredictorKind::from_str("nope", false).is_err());
    }

    #[test]
    fn linear_regression_follows_a_ramp_and_never_goes_negative() {
        let mut p = LinearRegression::new(5);
        for t in 0..10 {
            p.observe(10.0 + 2.0 * f64::from(t));
        }
        assert!((p.forecast(1) - 30.0).abs() < 1e-9);
        assert!((p.forecast(5) - 38.0).abs() < 1e-9);
        let mut falling = LinearRegression::new(3);
        for r in [30.0, 20.0, 10.0] {
            falling.observe(r);
        }
        assert_eq!(falling.forecast(5), 0.0);
    }

    #[test]
    fn holt_winters_learns_a_season_the_others_cannot() {
        let period = 12;
        let trace: Vec<f64> = (0..period * 20)
            .map(|t| 100.0 + 50.0 * (std::f64::consts::TAU * t as f64 / period as f64).sin())
            .collect();
        let errors: Vec<(&str, f64)> = all(period)
            .into_iter()
            .map(|mut p| (p.name(), rmse(p.as_mut(), &trace, 3)))
            .collect();
        let hw = errors.iter().find(|e| e.0 == "Holt-Winters").unwrap().1;
        for (name, error) in &errors {
            if *name != "Holt-Winters" && *name != "adaptive" {
                assert!(hw * 3.0 < *error, "Holt-Winters {hw} vs {name} {error}");
            }
        }
    }

    #[test]
    fn the_adaptive_predictor_follows_whichever_predictor_is_right_on_the_trace() {
        // A season: Holt-Winters wins, and the adaptive predictor comes close to it.
        let period = 12;
        let seasonal: Vec<f64> = (0..period * 20)
            .map(|t| 100.0 + 50.0 * (std::f64::consts::TAU * t as f64 / period as f64).sin())
            .collect();
        let hw = rmse(
            Statistical::HoltWinters.build(period, 3).as_mut(),
            &seasonal,
            3,
        );
        let mut adaptive = Adaptive::new(period, 3, ADAPTIVE_WINDOW);
        let auto = rmse(&mut adaptive, &seasonal, 3);
        let ewma = rmse(Statistical::Ewma.build(period, 3).as_mut(), &seasonal, 3);
        assert_eq!(adaptive.chosen(), "Holt-Winters");
        assert!(auto < ewma / 2.0, "adaptive {auto} vs EWMA {ewma}");
        assert!(auto < hw * 1.5, "adaptive {auto} vs Holt-Winters {hw}");
        // A ramp: linear regression wins.
        let ramp: Vec<f64> = (0..200).map(|t| 10.0 + 2.0 * f64::from(t)).collect();
        let mut adaptive = Adaptive::new(period, 3, ADAPTIVE_WINDOW);
        rmse(&mut adaptive, &ramp, 3);
        assert_eq!(adaptive.chosen(), "linear regression");
    }
}
