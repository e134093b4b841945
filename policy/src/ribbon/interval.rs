//! Ribbon driven by a live pool, one measurement window per control interval: which
//! configuration to deploy next, given what the pool runs now and how the last window
//! went. The live controller calls [`IntervalSearch::step`] once per interval and
//! reconciles the pool to the answer.
//!
//! A window measures a configuration only when the configuration served all of it: the
//! window after the one it was deployed in, and only if nothing of the pool was booting
//! when the window began (a window with instances still starting measures the
//! transition). After a load change of over [`LOAD_CHANGE`], the old optimum is deployed
//! again and measured under the new load, and that measurement warm-starts the new
//! search (Ribbon §4), rather than whatever configuration happened to be running.

use serde::Serialize;

use super::{Ribbon, Settings};
use crate::mix::{Config, Space};

/// Relative change of a pool's demand that starts a new search (warm-started).
pub const LOAD_CHANGE: f64 = 0.2;

/// One pool's search across intervals.
#[derive(Debug, Clone)]
pub struct IntervalSearch {
    ribbon: Ribbon,
    /// The configuration deployed for measurement.
    measuring: Option<Config>,
    /// `measuring` was in place, with nothing booting, when the current window began:
    /// this window measures it.
    settled: bool,
    /// `measuring` is the old optimum, deployed again after the load changed: its
    /// measurement warm-starts the new search.
    remeasuring: bool,
    /// The demand the search is for (0: not known yet).
    load: f64,
}

/// What a step saw and decided, for the decision's evidence.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    /// A configuration was measured by the window that just ended, with this rate.
    pub measured: Option<(Config, f64)>,
    pub settled: bool,
    pub remeasuring: bool,
}

impl IntervalSearch {
    pub fn new(space: Space, settings: Settings) -> Self {
        Self {
            ribbon: Ribbon::new(space, settings),
            measuring: None,
            settled: false,
            remeasuring: false,
            load: 0.0,
        }
    }

    pub fn ribbon(&self) -> &Ribbon {
        &self.ribbon
    }

    /// One interval: `deployed` is the pool's configuration now (`None` while some of it
    /// boots), `demand` the load it must serve, `satisfaction` the share of the last
    /// window's requests that met their deadline. Returns the configuration to deploy
    /// (`None`: nothing to suggest yet) and what the step saw.
    pub fn step(
        &mut self,
        deployed: Option<&Config>,
        demand: f64,
        satisfaction: Option<f64>,
    ) -> (Option<Config>, StepReport) {
        if self.load <= 0.0 {
            self.load = demand;
        }
        let in_place = self.measuring.is_some() && self.measuring.as_ref() == deployed;
        let measured = match (&self.measuring, satisfaction) {
            (Some(config), Some(s)) if in_place && self.settled => Some((config.clone(), s)),
            _ => None,
        };
        // A configuration already in place when this window begins is measured by it.
        self.settled = in_place && measured.is_none();
        if let Some((config, s)) = &measured {
            if self.remeasuring {
                self.remeasuring = false;
                self.ribbon = self.ribbon.warm_start(*s).unwrap_or_else(|| self.fresh());
            } else {
                self.ribbon.observe(config, *s);
            }
        }
        let next = if self.settled {
            self.measuring.clone()
        } else if self.load > 0.0 && (demand / self.load - 1.0).abs() > LOAD_CHANGE {
            self.load = demand;
            match self.ribbon.best() {
                Some(best) => {
                    self.remeasuring = true;
                    Some(best.config.clone())
                }
                None => {
                    self.ribbon = self.fresh();
                    self.ribbon.suggest()
                }
            }
        } else if self.remeasuring {
            self.measuring.clone()
        } else {
            self.ribbon
                .suggest()
                .or_else(|| self.ribbon.best().map(|b| b.config.clone()))
        };
        if self.measuring != next {
            self.settled = false;
        }
        self.measuring = next.clone();
        let report = StepReport {
            measured,
            settled: self.settled,
            remeasuring: self.remeasuring,
        };
        (next, report)
    }

    fn fresh(&self) -> Ribbon {
        Ribbon::new(self.ribbon.space().clone(), *self.ribbon.settings())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Space {
        Space {
            types: vec!["a".into(), "b".into()],
            prices: vec![1.0, 0.3],
            max: vec![2, 2],
        }
    }

    #[test]
    fn a_configuration_is_measured_only_by_a_window_it_served_entirely() {
        let mut search = IntervalSearch::new(space(), Settings::default());
        let (first, report) = search.step(None, 10.0, None);
        let first = first.expect("a first configuration");
        assert!(report.measured.is_none());
        // Still booting at the next interval: that window is not a measurement.
        let (again, report) = search.step(None, 10.0, Some(0.5));
        assert_eq!(again.as_ref(), Some(&first));
        assert!(report.measured.is_none() && !report.settled);
        // In place: the window that begins now measures it ...
        let (again, report) = search.step(Some(&first), 10.0, Some(0.6));
        assert_eq!(again.as_ref(), Some(&first));
        assert!(report.measured.is_none() && report.settled);
        // ... and at its end it is observed with that window's rate.
        let (_, report) = search.step(Some(&first), 10.0, Some(1.0));
        assert_eq!(report.measured, Some((first.clone(), 1.0)));
        assert_eq!(search.ribbon().record().len(), 1);
    }

    #[test]
    fn a_load_change_measures_the_old_optimum_again_before_warm_starting() {
        let mut search = IntervalSearch::new(space(), Settings::default());
        let mut deployed = None;
        // Measure until an optimum that meets the target is known.
        for _ in 0..40 {
            let (next, _) = search.step(deployed.as_ref(), 10.0, Some(1.0));
            deployed = next;
            if search.ribbon().best().is_some() {
                break;
            }
        }
        let best = search.ribbon().best().expect("an optimum").config.clone();
        // Twice the load (while the next suggestion boots): the old optimum is deployed
        // again ...
        let (next, report) = search.step(None, 20.0, Some(1.0));
        assert_eq!(next.as_ref(), Some(&best));
        assert!(report.remeasuring);
        // ... settles, is measured under the new load, and the new search starts from it.
        let (_, report) = search.step(Some(&best), 20.0, Some(0.9));
        assert!(report.settled);
        let (_, report) = search.step(Some(&best), 20.0, Some(0.9));
        assert_eq!(report.measured, Some((best.clone(), 0.9)));
        assert!(!report.remeasuring);
        let record = search.ribbon().record();
        assert_eq!(record[0].config, best);
        assert!((record[0].satisfaction - 0.9).abs() < 1e-12);
    }
}
