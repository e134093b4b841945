//! How often serving that knows each phase could meet the target at a given inference per
//! request: an upper reference for issue 34's goals, beside the oracle (which serves the
//! cheapest choice meeting the target on a phase, not the one meeting it most often).
//!
//! The serving it bounds picks, for each run of a phase (each round's apart), one of the
//! static choices of [`super::drift::static_choices`] or the oracle's, or shares the run's requests
//! between two of them; it is scored as the replay scores every scheme (the share of
//! requests whose last 200 answers met the target). Each choice is replayed throughout, so
//! a window that spans a phase change holds the same choice's answers on both sides; a
//! scheme that changes its choice there holds another's. Within that, the bound is exact:
//! the best such serving is the linear relaxation of a multiple-choice knapsack, which the
//! greedy walk below solves (the steepest gain per microsecond first, along each run's
//! upper hull). No learning scheme knows the phases, so none should be expected to reach
//! it; a goal above it asks for more than this zoo's answers hold. Read the other way
//! ([`Frontier::budget_for`]), it gives the least inference at which such a serving meets
//! the target as often as a run of Cocktail's, or more often than every static choice.

use cocktail_policy::estimate::Rule;

use super::drift::{StaticChoice, best_static_met, serve_throughout};
use super::drift_world::DriftWorld;

/// Per run of a phase: its requests, and each static choice's (inference µs per request,
/// requests whose window met the target) there.
#[derive(Debug, Clone)]
pub struct Frontier {
    runs: Vec<(u64, Vec<(f64, u64)>)>,
}

impl Frontier {
    /// The frontier of `statics` (from [`super::drift::static_choices`] for `seed`) and
    /// of the oracle's choices, which may lie outside them (a vote of a model not among
    /// the nine most accurate), on `dw`'s schedule.
    pub fn new(dw: &DriftWorld<'_>, statics: &[StaticChoice], seed: u64) -> Self {
        let (items, _) = dw.requests(seed, 0.0);
        let oracle: Vec<StaticChoice> = dw
            .oracle()
            .iter()
            .filter(|m| !statics.iter().any(|c| !c.soft && c.members == **m))
            .map(|m| serve_throughout(dw, &items, m, Rule::Majority))
            .collect();
        let per_run = dw.drift.schedule.phase_requests.max(1);
        let runs = (0..items.len().div_ceil(per_run))
            .map(|r| {
                let requests = (items.len() - r * per_run).min(per_run) as u64;
                let options = statics
                    .iter()
                    .chain(&oracle)
                    .map(|c| (c.inference_us, c.met_per_run.get(r).copied().unwrap_or(0)))
                    .collect();
                (requests, options)
            })
            .collect();
        Self { runs }
    }

    /// The largest share of requests meeting the target at no more than `budget_us` of
    /// inference per request; `None` when even the cheapest choice of every run costs more.
    pub fn accuracy_met_at(&self, budget_us: f64) -> Option<f64> {
        let total: u64 = self.runs.iter().map(|(n, _)| n).sum();
        let mut spend = budget_us * total as f64;
        let mut met = 0.0;
        // Each run starts on its cheapest hull point; its further hull segments are the
        // steps (µs, met) the walk may take, steepest first.
        let mut steps: Vec<(f64, f64)> = Vec::new();
        for (requests, options) in &self.runs {
            let n = *requests as f64;
            let hull = upper_hull(options);
            let (first_cost, first_met) = *hull.first()?;
            spend -= first_cost * n;
            met += first_met as f64;
            steps.extend(
                hull.windows(2)
                    .map(|w| ((w[1].0 - w[0].0) * n, (w[1].1 - w[0].1) as f64)),
            );
        }
        if spend < 0.0 {
            return None;
        }
        steps.sort_by(|a, b| (b.1 / b.0).total_cmp(&(a.1 / a.0)));
        for (cost, gain) in steps {
            if spend <= 0.0 {
                break;
            }
            let share = (spend / cost).min(1.0);
            met += gain * share;
            spend -= cost * share;
        }
        Some(met / total.max(1) as f64)
    }

    /// The requests of every run.
    fn requests(&self) -> u64 {
        self.runs.iter().map(|(n, _)| n).sum()
    }

    /// The least inference per request at which the share of requests meeting the target
    /// reaches `level`; `None` when no budget does. By bisection: the share grows with
    /// the budget, piecewise linearly, and a microsecond's hundredth is precision enough.
    pub fn budget_for(&self, level: f64) -> Option<f64> {
        let dearest = self
            .runs
            .iter()
            .flat_map(|(_, options)| options.iter().map(|o| o.0))
            .fold(0.0, f64::max);
        let reaches = |budget: f64| self.accuracy_met_at(budget).is_some_and(|m| m >= level);
        if !reaches(dearest) {
            return None;
        }
        let (mut low, mut high) = (0.0, dearest);
        while high - low > 0.01 {
            let mid = (low + high) / 2.0;
            if reaches(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Some(high)
    }

    /// The least inference per request at which the share of requests meeting the
    /// target is above every one of `statics`' (by one request): from there issue 34's
    /// cost goal has no static choice to beat. `None` when no budget gets there.
    pub fn budget_beyond(&self, statics: &[StaticChoice]) -> Option<f64> {
        self.budget_for(best_static_met(statics) + 1.0 / self.requests().max(1) as f64)
    }
}

/// The points of `options` (cost, met) on the upper concave hull from the cheapest up to
/// the one meeting the target most often, cheapest first: the choices (and shares of two
/// neighbours) that no mix of others beats at their cost. Hand-written: a dozen lines of
/// the monotone chain, not worth a geometry crate.
fn upper_hull(options: &[(f64, u64)]) -> Vec<(f64, u64)> {
    let mut points = options.to_vec();
    // By cost, and of equal cost the most met first, which alone is kept.
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    points.dedup_by(|later, kept| later.0 == kept.0);
    let mut hull: Vec<(f64, u64)> = Vec::new();
    for p in points {
        // Dearer and no better than the hull's best so far: never worth its cost.
        if hull.last().is_some_and(|last| p.1 <= last.1) {
            continue;
        }
        while hull.len() >= 2 {
            let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
            // b lies on or below the line from a to p: drop it.
            let cross =
                (b.0 - a.0) * (p.1 as f64 - a.1 as f64) - (b.1 as f64 - a.1 as f64) * (p.0 - a.0);
            if cross >= 0.0 {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(p);
    }
    hull
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hull_keeps_the_choices_no_mix_beats() {
        // (1, 10) lies below the line from (0, 0) to (2, 40); (3, 40) costs more for
        // the same; (4, 50) is on the hull's end.
        let hull = upper_hull(&[
            (2.0, 40),
            (0.0, 0),
            (1.0, 10),
            (3.0, 40),
            (4.0, 50),
            (0.0, 5),
        ]);
        assert_eq!(hull, vec![(0.0, 5), (2.0, 40), (4.0, 50)]);
    }

    /// Two runs of 10 requests. Run A: 2 met for free, 10 at 1 µs. Run B: 0 met for
    /// free, 10 at 4 µs.
    fn two_runs() -> Frontier {
        Frontier {
            runs: vec![
                (10, vec![(0.0, 2), (1.0, 10)]),
                (10, vec![(0.0, 0), (4.0, 10)]),
            ],
        }
    }

    #[test]
    fn the_budget_goes_to_the_steepest_gains_first() {
        // [`two_runs`]. At 0.5 µs per request (10 µs in all) A's step (8 met for 10 µs)
        // goes first and takes it all.
        let frontier = two_runs();
        let at = |budget| frontier.accuracy_met_at(budget).unwrap();
        assert!((at(0.0) - 2.0 / 20.0).abs() < 1e-12);
        assert!((at(0.5) - 10.0 / 20.0).abs() < 1e-12);
        // Another 20 µs (1.5 per request) buys half of B's step: 5 more.
        assert!((at(1.5) - 15.0 / 20.0).abs() < 1e-12);
        assert!((at(100.0) - 1.0).abs() < 1e-12);
        // The least budget for 15 of 20: 1.5 µs.
        assert!((frontier.budget_for(0.75).unwrap() - 1.5).abs() < 0.02);
        assert_eq!(frontier.budget_for(1.01), None);
        let dear = Frontier {
            runs: vec![(10, vec![(3.0, 10)])],
        };
        assert_eq!(dear.accuracy_met_at(1.0), None);
    }

    fn static_choice(accuracy_met: f64) -> StaticChoice {
        StaticChoice {
            members: Vec::new(),
            soft: false,
            accuracy_met,
            inference_us: 1.0,
            met_per_run: Vec::new(),
        }
    }

    #[test]
    fn beyond_every_static_choice_is_one_request_more_than_the_best() {
        // [`two_runs`]. The best static choice meets the target for 18 of 20; 19 take
        // A's whole step (10 µs) and nine tenths of B's (36 µs): 2.3 µs per request.
        let frontier = two_runs();
        let beyond = frontier.budget_beyond(&[static_choice(0.5), static_choice(0.9)]);
        assert!((beyond.unwrap() - 2.3).abs() < 0.02, "{beyond:?}");
        assert_eq!(frontier.budget_beyond(&[static_choice(1.0)]), None);
    }
}
