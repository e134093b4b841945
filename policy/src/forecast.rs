//! How wrong the load forecasts have been, so the autoscaler can plan for a quantile of
//! the load rather than its forecast mean (issue 20): a burst that a mean forecast
//! chases is bought ahead when the plan covers, say, the 90th percentile of what the
//! forecast has missed by at that lead.
//!
//! The errors are the predictor's own, measured on the trace as it arrives: every
//! interval the loop records its forecast for each lead `k = 1..=H`; when the interval `k`
//! steps later closes, the rate it measured scores that forecast. Any predictor works.
//!
//! Errors are relative to the forecast (a load's noise and bursts grow with it), so the
//! planned quantile falls with the forecast when the load goes away instead of holding
//! capacity for a burst long past; and the margin is at most the forecast again (a step
//! from nothing would otherwise be an unbounded relative error).

use std::collections::VecDeque;

/// Errors needed at a lead before its quantile is trusted; fewer: the plain forecast.
pub const MIN_ERRORS: usize = 10;

#[derive(Debug, Clone)]
pub struct ForecastErrors {
    horizon: usize,
    window: usize,
    /// The forecasts of the last `horizon` intervals, newest last: `made[i][k - 1]` is
    /// the rate forecast `k` steps after interval `i`.
    made: VecDeque<Vec<f64>>,
    /// Per lead `k` (index `k - 1`): (measured − forecast) / forecast, the last `window`.
    errors: Vec<VecDeque<f64>>,
}

impl ForecastErrors {
    /// Tracks leads `1..=horizon`, each over its last `window` errors.
    pub fn new(horizon: usize, window: usize) -> Self {
        let horizon = horizon.max(1);
        Self {
            horizon,
            window: window.max(1),
            made: VecDeque::new(),
            errors: vec![VecDeque::new(); horizon],
        }
    }

    pub fn horizon(&self) -> usize {
        self.horizon
    }

    /// The rate the interval that just closed measured: scores the forecasts made for it.
    /// Call before [`ForecastErrors::record`] of this interval's forecast.
    pub fn observe(&mut self, measured: f64) {
        for (k, made) in self.made.iter().rev().enumerate() {
            // `made` newest last: the newest was made 1 step ago, for lead 1.
            let (Some(forecast), Some(errors)) = (made.get(k), self.errors.get_mut(k)) else {
                continue;
            };
            errors.push_back((measured - forecast) / forecast.max(f64::MIN_POSITIVE));
            if errors.len() > self.window {
                errors.pop_front();
            }
        }
    }

    /// This interval's forecast for leads `1..=horizon` (shorter is padded with its last).
    pub fn record(&mut self, mut forecast: Vec<f64>) {
        let last = forecast.last().copied().unwrap_or(0.0);
        forecast.resize(self.horizon, last);
        self.made.push_back(forecast);
        while self.made.len() > self.horizon {
            self.made.pop_front();
        }
    }

    /// The `q` quantile of the load `k` steps ahead given its `forecast`: the forecast
    /// times one plus the `q` quantile (nearest rank) of the relative errors at that lead,
    /// that margin clamped to [0, 1] (never below the forecast, at most twice it). With
    /// fewer than [`MIN_ERRORS`] errors at the lead, the forecast.
    pub fn upper(&self, k: usize, forecast: f64, q: f64) -> f64 {
        let Some(errors) = self.errors.get(k.clamp(1, self.horizon) - 1) else {
            return forecast;
        };
        if errors.len() < MIN_ERRORS {
            return forecast;
        }
        let mut sorted: Vec<f64> = errors.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let rank = ((sorted.len() as f64 * q.clamp(0.0, 1.0)).ceil() as usize).max(1);
        let error = sorted.get(rank - 1).copied().unwrap_or(0.0);
        forecast * (1.0 + error.clamp(0.0, 1.0))
    }

    /// Root mean square relative error at lead `k`, once errors were seen there.
    pub fn rmse(&self, k: usize) -> Option<f64> {
        let errors = self.errors.get(k.clamp(1, self.horizon) - 1)?;
        if errors.is_empty() {
            return None;
        }
        Some((errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forecasts_are_scored_at_the_lead_they_were_made_for() {
        let mut errors = ForecastErrors::new(2, 100);
        // Interval 0 forecasts 10 (lead 1) and 20 (lead 2).
        errors.observe(5.0);
        errors.record(vec![10.0, 20.0]);
        // Interval 1 measures 12: lead 1 missed by +2.
        errors.observe(12.0);
        errors.record(vec![30.0, 40.0]);
        // Interval 2 measures 25: interval 0's lead 2 missed by +5 of 20, interval 1's
        // lead 1 by −5 of 30.
        errors.observe(25.0);
        assert_eq!(errors.errors[0], [0.2, -5.0 / 30.0]);
        assert_eq!(errors.errors[1], [0.25]);
        assert_eq!(errors.rmse(2), Some(0.25));
    }

    #[test]
    fn the_quantile_adds_what_the_forecast_has_missed_by() {
        let mut errors = ForecastErrors::new(1, 100);
        // A flat forecast of 100 under a load that is 100 plus 0..=19.
        for t in 0..40 {
            errors.observe(100.0 + f64::from(t % 20));
            errors.record(vec![100.0]);
        }
        // 39 errors, 0..=19 each about twice: the 90th percentile is 17 or 18.
        let upper = errors.upper(1, 100.0, 0.9);
        assert!((117.0..=118.01).contains(&upper), "{upper}");
        // The median error is about 9; never below the forecast.
        assert!((108.0..=110.01).contains(&errors.upper(1, 100.0, 0.5)));
        assert_eq!(errors.upper(1, 100.0, 0.0), 100.0);
        // The margin scales with the forecast, so it goes when the load does.
        assert!((errors.upper(1, 10.0, 0.9) - 11.75).abs() < 0.1);
        assert_eq!(errors.upper(1, 0.0, 0.9), 0.0);
    }

    #[test]
    fn a_step_from_nothing_at_most_doubles_the_plan() {
        let mut errors = ForecastErrors::new(1, 100);
        for t in 0..20 {
            errors.observe(if t < 10 { 0.0 } else { 50.0 });
            errors.record(vec![if t < 11 { 0.0 } else { 50.0 }]);
        }
        assert_eq!(errors.upper(1, 50.0, 0.99), 100.0);
    }

    #[test]
    fn too_few_errors_leave_the_forecast_alone() {
        let mut errors = ForecastErrors::new(3, 100);
        for _ in 0..5 {
            errors.observe(200.0);
            errors.record(vec![100.0; 3]);
        }
        assert_eq!(errors.upper(1, 100.0, 0.9), 100.0);
        assert_eq!(
            errors.upper(7, 100.0, 0.9),
            100.0,
            "leads beyond the horizon clamp"
        );
    }
}
