//! Model selection (Cocktail §4.1, Algorithm 1).
//!
//! - O1 ([`initial`]): the candidates are the models whose predicted response time is
//!   within the latency target ([`crate::response`]: inference on the instance type the
//!   model runs on plus the overhead measured on its pool; no fixed margin). If one
//!   candidate alone meets the accuracy target it is served
//!   alone. Otherwise candidates join most-accurate-first until the estimated majority
//!   accuracy ([`estimate`]) reaches the target. If none does, the prefix with the best
//!   estimate is used.
//! - O2 ([`adjust`]): every interval, with the window's labelled outcomes: when window
//!   accuracy is at least the target plus a margin and the mode of the winning vote count
//!   exceeds ⌊N/2⌋+1, prune to ⌊N/2⌋+1 members, dropping those least accurate in the window
//!   (tie: lowest packing factor). When window accuracy is below the target, add the one
//!   or two unused candidates, among the six most accurate, that raise the estimated
//!   majority accuracy most (`addition`; the paper adds the most accurate one whether or
//!   not it can help, so an ensemble grows towards every candidate and ends below its
//!   best member). [`crate::ensemble`] reverts an addition the next window does not
//!   confirm.
//! - Failover ([`substitutes`]): the candidates that stand in, best first, for members
//!   that cannot answer a request in time.

use crate::estimate::{Recorded, majority_accuracy};

/// What selection knows about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub latency_ms: f64,
    pub accuracy: f64,
    pub packing_factor: u32,
}

/// A model without a profile is assumed to take this long, so it is only chosen for lax
/// latency targets until `cocktail profile` measures it.
pub const UNPROFILED_LATENCY_MS: f64 = 1000.0;

impl Candidate {
    /// The zoo-to-candidates step: a model's single-request latency and packing factor
    /// from its profile (one thread), its accuracy from the manifest.
    pub fn of(model: &cocktail_common::ModelEntry) -> Self {
        let profile = model.profile.as_ref();
        Self {
            latency_ms: profile
                .and_then(|p| p.latency_us(1, 1))
                .map_or(UNPROFILED_LATENCY_MS, |us| us / 1000.0),
            accuracy: model.accuracy,
            packing_factor: profile.and_then(|p| p.packing_factor(1)).unwrap_or(1),
        }
    }

    /// The same model `factor` times slower: workers emulating their instance types
    /// `--emulate-scale` times slower, and the simulator's paper-sized latencies.
    pub fn scaled(&self, factor: f64) -> Self {
        Self {
            latency_ms: self.latency_ms * factor,
            ..self.clone()
        }
    }
}

/// The user's primary objective (Cocktail §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Objective {
    /// Prefer more accurate models.
    #[default]
    Accuracy,
    /// Prefer fewer and faster models.
    Latency,
}

/// A request's constraints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Constraint {
    pub latency_ms: f64,
    pub accuracy: f64,
    pub objective: Objective,
}

/// How ensembles are chosen and adjusted (`--selection`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// The paper's O1 and O2 (Cocktail §4.1), estimating on the recorded answers.
    #[default]
    Cocktail,
    /// Greedy forward selection on each constraint's buffer of labelled answers
    /// ([`crate::measured`]), O1 until the buffer is big enough.
    Measured,
    /// Selection that follows the traffic ([`crate::tracking`]): re-selects on the
    /// recent labelled answers of every candidate at every interval, and at once when the
    /// served ensemble falls short on the latest labels.
    Tracking,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cocktail => "cocktail",
            Self::Measured => "measured",
            Self::Tracking => "tracking",
        }
    }
}

/// Tunables of the policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectionConfig {
    /// Window accuracy must beat the target by this much before pruning (0.2 %).
    pub accuracy_margin: f64,
    pub rule: Rule,
}

impl Default for SelectionConfig {
    fn default() -> Self {
        Self {
            accuracy_margin: 0.002,
            rule: Rule::Cocktail,
        }
    }
}

/// The most accurate model of `pool` by profile (of equals, the last): what measured
/// selection and tracking serve where their labelled items cannot tell a choice from it.
pub fn most_accurate(models: &[Candidate], pool: &[usize]) -> Option<usize> {
    pool.iter()
        .copied()
        .max_by(|&a, &b| models[a].accuracy.total_cmp(&models[b].accuracy))
}

/// Indices of the models that may serve the constraint: those whose `latency_ms` (the
/// predicted response time, [`crate::response::predicted`]) is within the target.
pub fn candidates(models: &[Candidate], constraint: &Constraint) -> Vec<usize> {
    (0..models.len())
        .filter(|&i| models[i].latency_ms <= constraint.latency_ms)
        .collect()
}

/// O1: the initial ensemble (indices into `models`), empty when no model is fast enough.
pub fn initial(
    models: &[Candidate],
    constraint: &Constraint,
    recorded: Option<&Recorded>,
) -> Vec<usize> {
    let mut pool = candidates(models, constraint);
    let meets = |i: &usize| models[*i].accuracy >= constraint.accuracy;
    let single = match constraint.objective {
        Objective::Latency => pool
            .iter()
            .filter(|i| meets(i))
            .min_by(|a, b| by_latency(models, **a, **b)),
        Objective::Accuracy => pool
            .iter()
            .filter(|i| meets(i))
            .min_by(|a, b| by_accuracy(models, **a, **b)),
    };
    if let Some(&one) = single {
        return vec![one];
    }
    pool.sort_by(|a, b| by_accuracy(models, *a, *b));
    let mut best: (f64, usize) = (f64::NEG_INFINITY, 0);
    for k in 0..pool.len() {
        let estimate = estimate(models, &pool[..=k], recorded);
        if estimate >= constraint.accuracy {
            return pool[..=k].to_vec();
        }
        if estimate > best.0 {
            best = (estimate, k + 1);
        }
    }
    pool.truncate(best.1);
    pool
}

/// O1 as the master runs it on a new constraint: on the predicted response times
/// (`predicted`); when nothing is predicted to answer in time under the load of the
/// moment but the inference times alone (`inference`) say the target is feasible, on
/// those (the late answers count as SLO violations, and O2 chooses again once something
/// fits). Empty only when no model's inference alone fits.
pub fn initial_or_feasible(
    predicted: &[Candidate],
    inference: &[Candidate],
    constraint: &Constraint,
    recorded: Option<&Recorded>,
) -> Vec<usize> {
    let members = initial(predicted, constraint, recorded);
    if members.is_empty() {
        initial(inference, constraint, recorded)
    } else {
        members
    }
}

/// The candidates that may stand in for members that cannot answer (no live instance,
/// refused, failed, too slow): first the pool's models outside the ensemble (each is
/// predicted to fit the constraint's latency, as the members are), then the other models
/// whose inference alone fits it (`models` carry the inference times): when the pool is
/// empty or spent because the load of the moment makes everything late, a late answer
/// beats none. Most accurate first within each (faster on ties). A substitute keeps the
/// vote's size at the price of some accuracy.
pub fn substitutes(
    models: &[Candidate],
    pool: &[usize],
    members: &[usize],
    constraint: &Constraint,
) -> Vec<usize> {
    let spare = |m: &usize| !members.contains(m) && *m < models.len();
    let mut fitting: Vec<usize> = pool.iter().copied().filter(spare).collect();
    fitting.sort_by(|a, b| by_accuracy(models, *a, *b));
    let mut late: Vec<usize> = candidates(models, constraint)
        .into_iter()
        .filter(|m| spare(m) && !pool.contains(m))
        .collect();
    late.sort_by(|a, b| by_accuracy(models, *a, *b));
    fitting.extend(late);
    fitting
}

/// Most accurate first; ties by lower latency, then index.
fn by_accuracy(models: &[Candidate], a: usize, b: usize) -> std::cmp::Ordering {
    models[b]
        .accuracy
        .total_cmp(&models[a].accuracy)
        .then(models[a].latency_ms.total_cmp(&models[b].latency_ms))
        .then(a.cmp(&b))
}

/// Fastest first; ties by higher accuracy, then index.
fn by_latency(models: &[Candidate], a: usize, b: usize) -> std::cmp::Ordering {
    models[a]
        .latency_ms
        .total_cmp(&models[b].latency_ms)
        .then(models[b].accuracy.total_cmp(&models[a].accuracy))
        .then(a.cmp(&b))
}

/// The estimated accuracy of the vote of `members`: counted on the recorded test-set
/// answers when every member has them (correlated errors count), with the rule the
/// recorded answers are set to ([`Recorded::vote`]: a plain majority, or soft), else the
/// Poisson-binomial estimate of a majority from the members' accuracies (independent
/// errors).
pub fn estimate(models: &[Candidate], members: &[usize], recorded: Option<&Recorded>) -> f64 {
    let accuracy: Vec<f64> = models.iter().map(|m| m.accuracy).collect();
    recorded
        .and_then(|r| r.vote(members, &accuracy))
        .unwrap_or_else(|| {
            let of_members: Vec<f64> = members
                .iter()
                .filter_map(|&m| accuracy.get(m).copied())
                .collect();
            majority_accuracy(&of_members)
        })
}

/// How many of the most accurate unused candidates O2 tries in pairs.
const SHORTLIST: usize = 6;

/// What O2 adds to `members` when the window falls short. Without recorded answers, the
/// paper's rule: the most accurate unused candidate. With them, among the [`SHORTLIST`]
/// most accurate unused candidates, the one or two whose addition raises the estimate
/// most (two, because one alone may make an even vote whose ties go to one member, which
/// cannot beat it), and nothing when no addition raises it.
fn addition(
    models: &[Candidate],
    members: &[usize],
    pool: &[usize],
    recorded: Option<&Recorded>,
) -> Option<Vec<usize>> {
    let mut unused: Vec<usize> = pool
        .iter()
        .copied()
        .filter(|i| !members.contains(i) && *i < models.len())
        .collect();
    unused.sort_by(|a, b| by_accuracy(models, *a, *b));
    let Some(recorded) = recorded else {
        return unused.first().map(|&c| vec![c]);
    };
    let now = estimate(models, members, Some(recorded));
    let with = |add: &[usize]| {
        let grown: Vec<usize> = members.iter().chain(add).copied().collect();
        estimate(models, &grown, Some(recorded))
    };
    let shortlist = &unused[..unused.len().min(SHORTLIST)];
    let singles = shortlist.iter().map(|&a| vec![a]);
    let pairs = shortlist
        .iter()
        .enumerate()
        .flat_map(|(k, &a)| shortlist[k + 1..].iter().map(move |&b| vec![a, b]));
    // Singles first: a pair must do strictly better than every single to be chosen.
    let mut best: Option<(f64, Vec<usize>)> = None;
    for add in singles.chain(pairs) {
        let e = with(&add);
        if e > best.as_ref().map_or(now, |b| b.0) {
            best = Some((e, add));
        }
    }
    best.map(|(_, add)| add)
}

/// What one constraint's ensemble did during an interval, from labelled requests.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Window {
    /// Labelled requests and how many the ensemble got right.
    pub labelled: usize,
    pub correct: usize,
    /// Per member (same order as the members), how many labelled requests it got right.
    pub member_correct: Vec<usize>,
    /// How often each winning vote count occurred (index = votes for the winner).
    pub winning_votes: Vec<usize>,
}

impl Window {
    pub fn accuracy(&self) -> Option<f64> {
        (self.labelled > 0).then(|| self.correct as f64 / self.labelled as f64)
    }

    /// The most frequent winning vote count (largest on ties).
    pub fn winning_votes_mode(&self) -> Option<usize> {
        let (votes, count) = self
            .winning_votes
            .iter()
            .enumerate()
            .max_by_key(|&(v, c)| (*c, v))?;
        (*count > 0).then_some(votes)
    }
}

/// O2's decision for one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adjustment {
    Keep,
    /// The new member list after dropping the least accurate.
    Prune(Vec<usize>),
    /// Add these candidates (one, or two when one alone would make an even vote).
    Add(Vec<usize>),
    /// Take back these, the last addition, which the window after it did not confirm
    /// ([`crate::ensemble::Ensemble::revisit`]).
    Revert(Vec<usize>),
    /// O1's new choice: a member's predicted response time no longer fits the latency
    /// target ([`crate::ensemble::Ensemble::revisit`]).
    Refit(Vec<usize>),
    /// Measured selection's new choice ([`crate::measured::select`]).
    Measured(Vec<usize>),
    /// Tracking's new choice ([`crate::tracking::Tracker`]) and why it chose again.
    Tracked(Vec<usize>, crate::tracking::Reselect),
}

/// O2: adjusts `members` (indices into `models`) from the window. `pool` holds the
/// candidates that may join.
pub fn adjust(
    models: &[Candidate],
    members: &[usize],
    pool: &[usize],
    window: &Window,
    target: f64,
    config: &SelectionConfig,
    recorded: Option<&Recorded>,
) -> Adjustment {
    let Some(accuracy) = window.accuracy() else {
        return Adjustment::Keep;
    };
    let needed = members.len() / 2 + 1;
    if accuracy >= target + config.accuracy_margin {
        let mode = window.winning_votes_mode().unwrap_or(0);
        if members.len() > 1 && mode > needed {
            let mut ranked: Vec<(usize, usize)> = members
                .iter()
                .enumerate()
                .map(|(slot, &m)| (m, window.member_correct.get(slot).copied().unwrap_or(0)))
                .collect();
            // Keep the most accurate in the window; among equals keep the higher Pf, then
            // the more accurate by profile (deterministic to the last: then the index).
            ranked.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then(models[b.0].packing_factor.cmp(&models[a.0].packing_factor))
                    .then(models[b.0].accuracy.total_cmp(&models[a.0].accuracy))
                    .then(a.0.cmp(&b.0))
            });
            return Adjustment::Prune(ranked.into_iter().take(needed).map(|(m, _)| m).collect());
        }
        return Adjustment::Keep;
    }
    if accuracy < target
        && let Some(add) = addition(models, members, pool, recorded)
    {
        return Adjustment::Add(add);
    }
    Adjustment::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(latency_ms: f64, accuracy: f64, packing_factor: u32) -> Candidate {
        Candidate {
            latency_ms,
            accuracy,
            packing_factor,
        }
    }

    fn zoo() -> Vec<Candidate> {
        vec![
            model(1.0, 0.80, 8),  // 0
            model(2.0, 0.85, 6),  // 1
            model(3.0, 0.86, 4),  // 2
            model(4.0, 0.87, 2),  // 3
            model(50.0, 0.95, 1), // 4: too slow for tight targets
        ]
    }

    fn constraint(latency_ms: f64, accuracy: f64, objective: Objective) -> Constraint {
        Constraint {
            latency_ms,
            accuracy,
            objective,
        }
    }

    #[test]
    fn substitutes_are_the_unused_candidates_most_accurate_first() {
        let models = zoo();
        let c = constraint(4.0, 0.9, Objective::Accuracy);
        let pool = candidates(&models, &c);
        assert_eq!(pool, vec![0, 1, 2, 3], "the 50 ms model does not fit 4 ms");
        assert_eq!(substitutes(&models, &pool, &[3, 1], &c), vec![2, 0]);
        assert_eq!(
            substitutes(&models, &pool, &[0, 1, 2, 3], &c),
            Vec::<usize>::new()
        );
        // Ties in accuracy go to the faster model.
        let tied = vec![model(3.0, 0.9, 1), model(1.0, 0.9, 1), model(2.0, 0.95, 1)];
        let loose = constraint(10.0, 0.9, Objective::Accuracy);
        assert_eq!(substitutes(&tied, &[0, 1, 2], &[], &loose), vec![2, 1, 0]);
    }

    #[test]
    fn past_the_pool_the_models_whose_inference_fits_stand_in() {
        let models = zoo();
        let c = constraint(4.0, 0.9, Objective::Accuracy);
        // Under load nothing is predicted to fit, so the pool is empty; the models whose
        // inference alone fits 4 ms stand in, most accurate first, and the 50 ms one never.
        assert_eq!(substitutes(&models, &[], &[3], &c), vec![2, 1, 0]);
        // The pool's spares come first even when a late one is more accurate.
        assert_eq!(substitutes(&models, &[0], &[3], &c), vec![0, 2, 1]);
    }

    const CONFIG: SelectionConfig = SelectionConfig {
        accuracy_margin: 0.002,
        rule: Rule::Cocktail,
    };

    #[test]
    fn single_model_when_one_suffices() {
        let models = zoo();
        // Latency objective: the fastest model that meets the accuracy.
        assert_eq!(
            initial(&models, &constraint(10.0, 0.84, Objective::Latency), None),
            [1]
        );
        // Accuracy objective: the most accurate one within the latency.
        assert_eq!(
            initial(&models, &constraint(10.0, 0.84, Objective::Accuracy), None),
            [3]
        );
        assert_eq!(
            initial(&models, &constraint(60.0, 0.9, Objective::Accuracy), None),
            [4]
        );
    }

    #[test]
    fn ensemble_grows_until_the_estimate_meets_the_target() {
        let models = zoo();
        let picked = initial(&models, &constraint(10.0, 0.9, Objective::Accuracy), None);
        let estimate = majority_accuracy(&[0.87, 0.86, 0.85]);
        assert!(estimate >= 0.9, "{estimate}");
        assert_eq!(picked, [3, 2, 1]);
        // Unreachable: the prefix with the best estimate.
        let best = initial(&models, &constraint(10.0, 0.99, Objective::Accuracy), None);
        assert_eq!(best, [3, 2, 1]);
        assert!(initial(&models, &constraint(0.5, 0.8, Objective::Accuracy), None).is_empty());
        // No margin: a model predicted to take 1 ms does not fit 0.99 ms.
        assert_eq!(
            candidates(&models, &constraint(0.99, 0.8, Objective::Accuracy)),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn o2_prunes_to_a_bare_majority_dropping_the_least_accurate() {
        let models = zoo();
        let members = [3, 2, 1, 0, 4];
        let window = Window {
            labelled: 100,
            correct: 95,
            member_correct: vec![90, 88, 85, 85, 93],
            winning_votes: vec![0, 0, 0, 5, 10, 85],
        };
        // Model 1 and 0 tie at 85; model 1 has the lower Pf (6 < 8), so it goes.
        let adjusted = adjust(
            &models,
            &members,
            &[0, 1, 2, 3, 4],
            &window,
            0.9,
            &CONFIG,
            None,
        );
        assert_eq!(adjusted, Adjustment::Prune(vec![4, 3, 2]));
        // Accuracy without the margin's headroom: keep.
        let tight = Window {
            correct: 90,
            ..window.clone()
        };
        assert_eq!(
            adjust(
                &models,
                &members,
                &[0, 1, 2, 3, 4],
                &tight,
                0.9,
                &CONFIG,
                None
            ),
            Adjustment::Keep
        );
        // Votes are not lopsided enough: keep.
        let close = Window {
            winning_votes: vec![0, 0, 0, 90, 10],
            ..window
        };
        assert_eq!(
            adjust(
                &models,
                &members,
                &[0, 1, 2, 3, 4],
                &close,
                0.9,
                &CONFIG,
                None
            ),
            Adjustment::Keep
        );
    }

    /// A one-member window of 50 labelled items, 40 right: short of a 0.9 target.
    fn short_window() -> Window {
        Window {
            labelled: 50,
            correct: 40,
            member_correct: vec![40],
            winning_votes: vec![0, 50],
        }
    }

    #[test]
    fn o2_adds_the_best_unused_candidate_when_accuracy_drops() {
        let models = zoo();
        let window = short_window();
        assert_eq!(
            adjust(&models, &[1], &[0, 1, 2, 3], &window, 0.9, &CONFIG, None),
            Adjustment::Add(vec![3])
        );
        assert_eq!(
            adjust(
                &models,
                &[0, 1, 2, 3],
                &[0, 1, 2, 3],
                &window,
                0.9,
                &CONFIG,
                None
            ),
            Adjustment::Keep
        );
        assert_eq!(
            adjust(
                &models,
                &[1],
                &[0, 1],
                &Window::default(),
                0.9,
                &CONFIG,
                None
            ),
            Adjustment::Keep
        );
    }

    /// 100 items of class 0; model `m` answers class 1 on `wrong[m]` (so wrong models
    /// agree with each other), class 0 elsewhere.
    fn recorded(wrong: &[std::ops::Range<usize>]) -> Recorded {
        let answers = wrong
            .iter()
            .map(|w| Some((0..100).map(|i| u16::from(w.contains(&i))).collect()))
            .collect();
        Recorded::new(answers, vec![0; 100])
    }

    #[test]
    fn o2_adds_what_the_recorded_answers_say_helps_and_nothing_else() {
        let models = zoo();
        let window = short_window();
        // Model 3, the most accurate candidate, errs where member 1 does; 2 and 0 err
        // elsewhere, so together they outvote every error of the three others.
        let answers = recorded(&[70..90, 0..15, 50..64, 0..13, 0..5]);
        assert!((estimate(&models, &[1], Some(&answers)) - 0.85).abs() < 1e-12);
        assert_eq!(
            adjust(
                &models,
                &[1],
                &[0, 1, 2, 3],
                &window,
                0.9,
                &CONFIG,
                Some(&answers)
            ),
            Adjustment::Add(vec![2, 0])
        );
        // Every candidate errs where the member does: no addition can help, so none is
        // made (the paper's rule would add model 3).
        let same = recorded(&[0..20, 0..15, 0..15, 0..15, 0..5]);
        assert_eq!(
            adjust(
                &models,
                &[1],
                &[0, 1, 2, 3],
                &window,
                0.9,
                &CONFIG,
                Some(&same)
            ),
            Adjustment::Keep
        );
        assert_eq!(
            adjust(&models, &[1], &[0, 1, 2, 3], &window, 0.9, &CONFIG, None),
            Adjustment::Add(vec![3])
        );
    }

    #[test]
    fn o1_counts_correlated_errors_on_the_recorded_answers() {
        let models = zoo();
        let target = constraint(10.0, 0.9, Objective::Accuracy);
        // Independent errors: the three most accurate reach 0.9 by the estimate.
        assert_eq!(initial(&models, &target, None), [3, 2, 1]);
        // Recorded: 3, 2 and 1 err together, so their vote is 0.86; adding 0, which errs
        // elsewhere, does not fix it either, so the best prefix is kept.
        let together = recorded(&[86..100, 0..15, 0..14, 0..13, 0..5]);
        assert!((estimate(&models, &[3, 2, 1], Some(&together)) - 0.86).abs() < 1e-12);
        assert_eq!(initial(&models, &target, Some(&together)), [3]);
        // Errors apart: three members outvote each one's errors.
        let apart = recorded(&[0..20, 20..35, 40..54, 60..73, 0..5]);
        assert_eq!(estimate(&models, &[3, 2, 1], Some(&apart)), 1.0);
        assert_eq!(initial(&models, &target, Some(&apart)), [3, 2, 1]);
    }
}
