//! One constraint key's ensemble as O2 sees it (Cocktail §4.1): the members, the
//! candidate pool, a generation bumped by every change, and the window of labelled
//! outcomes. No clocks: the live master (`cocktail_master::serving::state::KeyState`) and the simulator
//! each decide when an interval is over and then call [`Ensemble::revisit`]. Under
//! tracking ([`Ensemble::track`]) a [`Tracker`] chooses instead, after every request
//! ([`Ensemble::served`]).

use crate::estimate::{Recorded, majority_vote};
use crate::measured::{self, Buffer, Labelled};
use crate::selection::{self, Adjustment, Candidate, Constraint, Rule, SelectionConfig, Window};
use crate::tracking::{Tracker, TrackingConfig};

#[derive(Debug, Clone)]
pub struct Ensemble {
    pub constraint: Constraint,
    /// Model indices into the task's table.
    pub members: Vec<usize>,
    /// The candidates (models fast enough for the latency target).
    pub pool: Vec<usize>,
    /// Bumped by every change of `members`.
    pub generation: u64,
    window: Window,
    /// Every model's profiled accuracy (the tie-break of [`majority_vote`]).
    accuracy: Vec<f64>,
    /// O2's last addition, on trial for one window.
    trial: Option<Trial>,
    /// Additions a window did not confirm: not tried again by this ensemble.
    rejected: Vec<usize>,
    /// Labelled items with every candidate's answer, for measured selection.
    buffer: Buffer,
    /// Under tracking ([`Ensemble::track`]), what chooses the members instead of O2.
    tracker: Option<Box<Tracker>>,
    /// The models O1's first choice (generation 0) could not take because they did not
    /// fit the latency target, waiting to fit. O1 runs on a constraint's first request,
    /// when a pool may have no worker yet (predicted on its profile) or an estimate resting
    /// on a few calls made while the cluster was starting, or none (the fleet's median,
    /// [`crate::response::prior`]). In `autoscaling_live`, `resnet` had no worker at
    /// `const4`'s first request, which started on the less accurate `cnn_k5`, and O2 later
    /// added `resnet` beside it for good; and `const2` started on small models without
    /// `mlp_med`, never called, so never measured faster. At the end of any interval in
    /// which one of them fits, O1 chooses again, once for each, and takes the new choice
    /// when it holds a model that joined. A later choice of O1's ([`Adjustment::Refit`])
    /// waits the same way for the models it could not take: in `autoscaling_live`,
    /// `const2`'s first member did not fit once measured, and O1's second choice, on the
    /// fleet's estimate for a pool never called, ruled `mlp_med` out for good.
    waiting: Vec<usize>,
}

/// Seconds between two checks of a constraint's models that O1 could not take
/// ([`Ensemble::take_waiting`]), live and simulated.
pub const WAITING_CHECK_S: u64 = 1;

/// An addition on trial: on the window's labelled items, how often the members' plain
/// majority was right with it and without it (the same items, the same vote rule).
#[derive(Debug, Clone, Default)]
struct Trial {
    added: Vec<usize>,
    with: usize,
    without: usize,
}

impl Ensemble {
    /// `models` carry their predicted response times ([`crate::response::predicted`]).
    pub fn new(
        models: &[Candidate],
        constraint: Constraint,
        members: Vec<usize>,
        generation: u64,
    ) -> Self {
        let pool = selection::candidates(models, &constraint);
        Self {
            window: Window {
                member_correct: vec![0; members.len()],
                ..Window::default()
            },
            members,
            constraint,
            generation,
            accuracy: models.iter().map(|m| m.accuracy).collect(),
            trial: None,
            rejected: Vec::new(),
            buffer: Buffer::default(),
            tracker: None,
            waiting: if generation == 0 {
                (0..models.len()).filter(|m| !pool.contains(m)).collect()
            } else {
                Vec::new()
            },
            pool,
        }
    }

    /// O1: the initial ensemble for `constraint`.
    pub fn select(
        models: &[Candidate],
        constraint: Constraint,
        recorded: Option<&Recorded>,
    ) -> Self {
        let members = selection::initial(models, &constraint, recorded);
        Self::new(models, constraint, members, 0)
    }

    /// Records one labelled item (real or pseudo) answered by `generation`'s members.
    /// `member_classes[slot]` is that member's class, `None` if it gave no answer.
    pub fn record(
        &mut self,
        generation: u64,
        member_classes: &[Option<usize>],
        ensemble: usize,
        winning_votes: usize,
        label: usize,
    ) {
        if generation != self.generation {
            return; // The ensemble changed since; this outcome says nothing about it.
        }
        let w = &mut self.window;
        w.labelled += 1;
        w.correct += usize::from(ensemble == label);
        w.member_correct.resize(self.members.len(), 0);
        for (slot, class) in member_classes.iter().enumerate() {
            if let (true, Some(c)) = (*class == Some(label), w.member_correct.get_mut(slot)) {
                *c += 1;
            }
        }
        if w.winning_votes.len() <= winning_votes {
            w.winning_votes.resize(winning_votes + 1, 0);
        }
        w.winning_votes[winning_votes] += 1;
        if let Some(trial) = &mut self.trial {
            let mut tally = Vec::new();
            let mut vote = |without: bool| {
                let votes = self
                    .members
                    .iter()
                    .zip(member_classes)
                    .filter_map(|(m, c)| {
                        let counted = !(without && trial.added.contains(m));
                        Some((c.filter(|_| counted)?, self.accuracy.get(*m).copied()?))
                    });
                majority_vote(votes, &mut tally) == Some(label)
            };
            let (with, without) = (vote(false), vote(true));
            trial.with += usize::from(with);
            trial.without += usize::from(without);
        }
    }

    /// O2 at the end of an interval: returns the change made, if any. The candidate pool
    /// is refreshed first from `models`' predicted response times, so models deployed
    /// since can join; when a model O1's first choice could not take fits now and O1
    /// would take it, and whenever a member no longer fits the latency target (its pool
    /// got slower), O1 chooses again from the models that fit ([`Adjustment::Refit`],
    /// when its choice differs; when none fits, the members stay, and their late answers
    /// count as SLO violations). An addition is on trial for one window: when, on that
    /// window's labelled items, the members' majority was right no more often than it
    /// would have been without the addition, the addition is reverted and not tried
    /// again. (Comparing with the window before would confirm almost any addition: that
    /// window was picked for falling short.)
    pub fn revisit(
        &mut self,
        models: &[Candidate],
        config: &SelectionConfig,
        recorded: Option<&Recorded>,
    ) -> Option<Adjustment> {
        self.pool = selection::candidates(models, &self.constraint);
        if self.tracker.is_some() {
            // The tracker re-selects on its own count of requests ([`Ensemble::served`]).
            self.reset_window();
            return None;
        }
        if config.rule == Rule::Measured {
            let chosen = measured::select(models, &self.constraint, &self.buffer, recorded);
            if chosen.is_empty() || same_members(&chosen, &self.members) {
                self.reset_window();
                return None;
            }
            self.replace(chosen.clone(), self.generation + 1);
            return Some(Adjustment::Measured(chosen));
        }
        if let Some(refit) = self.refit(models, recorded, true) {
            return Some(refit);
        }
        if self.window.labelled == 0 {
            return None; // Keep collecting until labels arrive.
        }
        if let Some(trial) = self.trial.take()
            && trial.with <= trial.without
        {
            let members: Vec<usize> = self
                .members
                .iter()
                .copied()
                .filter(|m| !trial.added.contains(m))
                .collect();
            self.rejected.extend(&trial.added);
            self.replace(members, self.generation + 1);
            return Some(Adjustment::Revert(trial.added));
        }
        let pool: Vec<usize> = self
            .pool
            .iter()
            .copied()
            .filter(|m| !self.rejected.contains(m))
            .collect();
        let adjustment = selection::adjust(
            models,
            &self.members,
            &pool,
            &self.window,
            self.constraint.accuracy,
            config,
            recorded,
        );
        match &adjustment {
            Adjustment::Keep
            | Adjustment::Revert(_)
            | Adjustment::Refit(_)
            | Adjustment::Measured(_)
            | Adjustment::Tracked(..) => {
                self.reset_window();
            }
            Adjustment::Prune(members) => self.replace(members.clone(), self.generation + 1),
            Adjustment::Add(added) => {
                let mut members = self.members.clone();
                members.extend(added);
                self.replace(members, self.generation + 1);
                self.trial = Some(Trial {
                    added: added.clone(),
                    ..Trial::default()
                });
            }
        }
        (adjustment != Adjustment::Keep).then_some(adjustment)
    }

    /// Whether a model O1 could not take waits to fit ([`Ensemble::take_waiting`]).
    pub fn waits(&self) -> bool {
        self.tracker.is_none() && !self.waiting.is_empty()
    }

    /// Between O2's intervals: as soon as a model O1 could not take fits (`models` carry
    /// the predicted response times of the moment) and O1 would choose it, O1 chooses
    /// again, as [`Ensemble::revisit`] does at an interval's end; nothing else changes.
    /// A choice made on a cold start's estimates then lasts until the estimates settle,
    /// not until the interval ends: in `autoscaling_live`, whose O2 interval is longer
    /// than the run, `const2`'s first choice in a CI run (four small models, without
    /// `mlp_med`) served the whole run at 1.23x the simulated cost.
    pub fn take_waiting(
        &mut self,
        models: &[Candidate],
        recorded: Option<&Recorded>,
    ) -> Option<Adjustment> {
        if !self.waits() {
            return None;
        }
        let pool = selection::candidates(models, &self.constraint);
        if !self.waiting.iter().any(|m| pool.contains(m)) {
            return None;
        }
        self.pool = pool;
        self.refit(models, recorded, false)
    }

    /// O1's choice is made again when a model it could not choose then fits now (in
    /// `self.pool`) and O1 would choose it, or, with `unfit_too`, when a member no longer
    /// fits; not merely because the models that fit then are ranked otherwise now (by
    /// response times that differ by the hop's noise). The models that joined stop
    /// waiting either way.
    fn refit(
        &mut self,
        models: &[Candidate],
        recorded: Option<&Recorded>,
        unfit_too: bool,
    ) -> Option<Adjustment> {
        let (joined, waiting): (Vec<usize>, Vec<usize>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|m| self.pool.contains(m));
        self.waiting = waiting;
        let unfit = unfit_too && self.members.iter().any(|m| !self.pool.contains(m));
        if !unfit && joined.is_empty() {
            return None;
        }
        let members = selection::initial(models, &self.constraint, recorded);
        let wanted = unfit || members.iter().any(|m| joined.contains(m));
        if !wanted || members.is_empty() || members == self.members {
            return None;
        }
        self.rejected.clear();
        // The models this choice could not take, on estimates that may rest on a cold
        // start, wait to fit as those of O1's first choice did; members that no longer
        // fit were measured slow at their own work and do not.
        self.waiting = (0..models.len())
            .filter(|m| !self.pool.contains(m) && !self.members.contains(m))
            .collect();
        self.replace(members.clone(), self.generation + 1);
        Some(Adjustment::Refit(members))
    }

    /// From now on the members follow the traffic ([`crate::tracking`]): a tracker
    /// starting from the current members chooses them at every [`Ensemble::served`],
    /// from the items [`Ensemble::remember`] keeps, and O2 stands aside.
    pub fn track(&mut self, config: TrackingConfig) {
        self.tracker = Some(Box::new(Tracker::new(config, self.members.clone())));
    }

    /// One more request was served. Under tracking, the tracker's check: when it chose
    /// other members they are served from now on (a new generation) and returned.
    pub fn served(&mut self, models: &[Candidate]) -> Option<Adjustment> {
        let tracker = self.tracker.as_mut()?;
        let why = tracker.served(models, &self.constraint);
        let chosen = tracker.members();
        if chosen.is_empty() {
            return None;
        }
        let Some(why) = why else {
            // No new choice; under a paced mix, maybe the turn of its other side: no new
            // generation either.
            if chosen != self.members {
                chosen.clone_into(&mut self.members);
            }
            return None;
        };
        // A new mix is a new choice even when the side it starts with serves now.
        if tracker.mix().is_none() && same_members(chosen, &self.members) {
            return None;
        }
        let chosen = chosen.to_vec();
        self.replace(chosen.clone(), self.generation + 1);
        Some(Adjustment::Tracked(chosen, why))
    }

    /// Keeps a labelled item with every candidate's answer it has (`answers[model]`), for
    /// measured selection or, under tracking, for the tracker (as served now).
    pub fn remember(&mut self, item: Labelled) {
        self.remember_served(self.requests_served(), item);
    }

    /// [`Ensemble::remember`] for an item served when [`Ensemble::requests_served`] was
    /// `served_at` (its label came later): the tracker forgets it by that age.
    pub fn remember_served(&mut self, served_at: u64, item: Labelled) {
        match &mut self.tracker {
            Some(tracker) => tracker.label(served_at, item),
            None => self.buffer.push(item),
        }
    }

    /// Under a paced tracker, the mix served now: (the cheaper choice, the dearer one,
    /// the dearer one's share of the requests); `members` is one of them at a time.
    pub fn mix(&self) -> Option<(&[usize], &[usize], f64)> {
        self.tracker.as_ref()?.mix()
    }

    /// The models the ensemble serves with: its members, or both sides of its mix.
    pub fn in_use(&self) -> Vec<usize> {
        match self.mix() {
            Some((lo, hi, _)) => {
                let mut models = lo.to_vec();
                models.extend(hi.iter().filter(|m| !lo.contains(m)));
                models
            }
            None => self.members.clone(),
        }
    }

    /// Under tracking, the requests served so far (the tracker's count); else 0.
    pub fn requests_served(&self) -> u64 {
        self.tracker.as_ref().map_or(0, |t| t.requests())
    }

    /// Labelled items kept for measured selection or tracking.
    pub fn remembered(&self) -> usize {
        self.tracker.as_ref().map_or(self.buffer.len(), |t| t.len())
    }

    /// Adopts a new member list (from O2, tracking or another master through the
    /// cache); an addition on trial is settled by whoever made the change.
    pub fn replace(&mut self, members: Vec<usize>, generation: u64) {
        if let Some(tracker) = &mut self.tracker {
            tracker.adopt(&members);
        }
        self.members = members;
        self.generation = generation;
        self.trial = None;
        self.reset_window();
    }

    fn reset_window(&mut self) {
        self.window = Window {
            member_correct: vec![0; self.members.len()],
            ..Window::default()
        };
    }

    /// The accuracy of the current window.
    pub fn window_accuracy(&self) -> Option<f64> {
        self.window.accuracy()
    }

    /// The labelled outcomes since the last change or interval.
    pub fn window(&self) -> &Window {
        &self.window
    }

    pub fn window_labelled(&self) -> usize {
        self.window.labelled
    }
}

/// Whether `a` and `b` hold the same models, in any order.
fn same_members(a: &[usize], b: &[usize]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// Per model (of `models`), the tightest latency target among `(latency_ms, members)`
/// pairs that use it; `None` for a model none uses. The autoscalers buy a pool only
/// types fast enough for it, the live master and the simulator from their ensembles.
pub fn tightest_targets<'a>(
    ensembles: impl IntoIterator<Item = (f64, &'a [usize])>,
    models: usize,
) -> Vec<Option<f64>> {
    let mut targets: Vec<Option<f64>> = vec![None; models];
    for (latency_ms, members) in ensembles {
        for &m in members {
            if let Some(t) = targets.get_mut(m) {
                *t = Some(t.map_or(latency_ms, |t| t.min(latency_ms)));
            }
        }
    }
    targets
}

/// [`tightest_targets`] of the ensembles' constraints and the models they use (both
/// sides of a paced mix, [`Ensemble::in_use`]): `Some` exactly for the models in use.
pub fn targets_of(ensembles: &[Ensemble], models: usize) -> Vec<Option<f64>> {
    let in_use: Vec<(f64, Vec<usize>)> = ensembles
        .iter()
        .map(|e| (e.constraint.latency_ms, e.in_use()))
        .collect();
    tightest_targets(
        in_use
            .iter()
            .map(|(latency_ms, m)| (*latency_ms, m.as_slice())),
        models,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate with packing factor 1.
    fn model(latency_ms: f64, accuracy: f64) -> Candidate {
        Candidate {
            latency_ms,
            accuracy,
            packing_factor: 1,
        }
    }
    use crate::selection::Objective;
    use crate::tracking::Reselect;

    /// One labelled item of class 0 per row of `answers` (each member's class, in
    /// member order); the ensemble answers class 0 when half or more of them do.
    fn window(e: &mut Ensemble, answers: &[&[usize]]) {
        for row in answers {
            let classes: Vec<Option<usize>> = row.iter().map(|&c| Some(c)).collect();
            let right = row.iter().filter(|&&c| c == 0).count();
            let ensemble = usize::from(2 * right < row.len());
            e.record(e.generation, &classes, ensemble, row.len(), 0);
        }
    }

    #[test]
    fn an_addition_the_next_window_does_not_confirm_is_reverted_and_not_tried_again() {
        let models = [
            model(1.0, 0.80),
            model(1.0, 0.85),
            model(1.0, 0.86),
            model(1.0, 0.87),
        ];
        let config = SelectionConfig {
            accuracy_margin: 0.0,
            rule: Rule::Cocktail,
        };
        let constraint = Constraint {
            latency_ms: 1.0,
            accuracy: 0.9,
            objective: Objective::Accuracy,
        };
        // Generation 1: past O1's first interval (which would choose again).
        let mut e = Ensemble::new(&models, constraint, vec![1], 1);
        window(&mut e, &[&[0], &[1]]);
        assert_eq!(
            e.revisit(&models, &config, None),
            Some(Adjustment::Add(vec![3]))
        );
        assert_eq!(e.members, [1, 3]);
        // Model 3 answers as model 1 does: no item is right that was not right without
        // it, so it is taken back, for good (even though this window is the better one).
        window(&mut e, &[&[0, 0], &[0, 0], &[1, 1]]);
        assert_eq!(
            e.revisit(&models, &config, None),
            Some(Adjustment::Revert(vec![3]))
        );
        assert_eq!((e.members.as_slice(), e.generation), (&[1][..], 3));
        window(&mut e, &[&[0], &[1]]);
        assert_eq!(
            e.revisit(&models, &config, None),
            Some(Adjustment::Add(vec![2]))
        );
        // Model 2 is right where 1 is not and, more accurate, wins the tie: it stays.
        window(&mut e, &[&[0, 0], &[1, 0], &[1, 1]]);
        assert_eq!(
            e.revisit(&models, &config, None),
            Some(Adjustment::Add(vec![0]))
        );
        assert_eq!(e.members, [1, 2, 0]);
    }

    #[test]
    fn a_member_whose_predicted_response_no_longer_fits_makes_o1_choose_again() {
        let constraint = Constraint {
            latency_ms: 1.0,
            accuracy: 0.85,
            objective: Objective::Accuracy,
        };
        let config = SelectionConfig::default();
        // Before any call is measured, the profiles alone: model 1 fits and suffices.
        let profiled = [model(0.2, 0.80), model(0.6, 0.88), model(0.3, 0.86)];
        let mut e = Ensemble::select(&profiled, constraint, None);
        assert_eq!(e.members, [1]);
        // The calls turn out to take 0.5 ms more than inference: model 1 is predicted
        // at 1.1 ms and no longer fits; O1 chooses again, without waiting for labels.
        let measured = crate::response::predicted(&profiled, &[], &[], Some(0.5));
        assert_eq!(
            e.revisit(&measured, &config, None),
            Some(Adjustment::Refit(vec![2]))
        );
        assert_eq!((e.members.as_slice(), e.generation), (&[2][..], 1));
        assert_eq!(e.pool, [0, 2]);
        // Nothing fits at all: the members stay (their late answers are violations).
        let slow = crate::response::predicted(&profiled, &[], &[], Some(5.0));
        assert_eq!(e.revisit(&slow, &config, None), None);
        assert_eq!(e.members, [2]);
    }

    #[test]
    fn o1s_first_choice_is_made_again_when_a_model_it_could_not_take_fits() {
        let constraint = Constraint {
            latency_ms: 10.0,
            accuracy: 0.85,
            objective: Objective::Accuracy,
        };
        let config = SelectionConfig::default();
        // At the first request the accurate model's pool has answered a few calls slowly
        // (a starting cluster), and a weak model's too: only model 0 fits, and O1 takes it.
        let starting = [model(4.0, 0.86), model(30.0, 0.92), model(30.0, 0.70)];
        let mut e = Ensemble::select(&starting, constraint, None);
        assert_eq!(e.members, [0]);
        // By the end of the interval its calls take 6 ms: O1 chooses again, though
        // the member still fits and no label has come.
        let settled = [model(4.0, 0.86), model(6.0, 0.92), model(30.0, 0.70)];
        assert_eq!(
            e.revisit(&settled, &config, None),
            Some(Adjustment::Refit(vec![1]))
        );
        assert_eq!((e.members.as_slice(), e.generation), (&[1][..], 1));
        // The same at a later interval: a pool never called is predicted on the fleet's
        // estimate, which may take a while to settle.
        let mut later = Ensemble::select(&starting, constraint, None);
        assert_eq!(later.revisit(&starting, &config, None), None);
        assert_eq!(
            later.revisit(&settled, &config, None),
            Some(Adjustment::Refit(vec![1]))
        );
        // Only ranked otherwise: the fastest that meets 0.85 is now model 1, but both
        // fitted already and O1's choice stays (the hop's noise reorders models within
        // milliseconds of each other), though the weak model joined: O1 would not take it.
        let fastest = Constraint {
            objective: Objective::Latency,
            ..constraint
        };
        let mut quick = Ensemble::select(&settled, fastest, None);
        assert_eq!(quick.members, [0]);
        let reordered = [model(7.0, 0.86), model(6.0, 0.92), model(5.0, 0.70)];
        assert_eq!(quick.revisit(&reordered, &config, None), None);
        assert_eq!(quick.members, [0]);
    }

    #[test]
    fn a_model_o1_could_not_take_is_taken_between_intervals_as_soon_as_it_fits() {
        let constraint = Constraint {
            latency_ms: 10.0,
            accuracy: 0.85,
            objective: Objective::Accuracy,
        };
        let starting = [model(4.0, 0.86), model(30.0, 0.92), model(30.0, 0.70)];
        let mut e = Ensemble::select(&starting, constraint, None);
        assert!(e.waits());
        // Nothing fits that did not: nothing changes, and the models still wait.
        assert_eq!(e.take_waiting(&starting, None), None);
        assert_eq!((e.members.as_slice(), e.generation), (&[0][..], 0));
        // The accurate model's calls settle: O1 takes it at once, no interval's end needed.
        let settled = [model(4.0, 0.86), model(6.0, 0.92), model(30.0, 0.70)];
        assert_eq!(
            e.take_waiting(&settled, None),
            Some(Adjustment::Refit(vec![1]))
        );
        assert_eq!((e.members.as_slice(), e.generation), (&[1][..], 1));
        // A member that no longer fits is O2's business at the interval's end, not this.
        let slow = [model(4.0, 0.86), model(12.0, 0.92), model(30.0, 0.70)];
        assert_eq!(e.take_waiting(&slow, None), None);
        assert_eq!(e.members, [1]);
        // A weak model that joins, which O1 would not take, stops waiting; nothing changes.
        let mut quick = Ensemble::select(&starting, constraint, None);
        let weak_fits = [model(4.0, 0.86), model(30.0, 0.92), model(5.0, 0.70)];
        assert_eq!(quick.take_waiting(&weak_fits, None), None);
        assert_eq!((quick.members.as_slice(), quick.generation), (&[0][..], 0));
        assert_eq!(
            quick.take_waiting(&settled, None),
            Some(Adjustment::Refit(vec![1])),
            "model 1 still waited"
        );
    }

    #[test]
    fn a_model_o1s_second_choice_could_not_take_is_taken_once_it_fits() {
        let constraint = Constraint {
            latency_ms: 10.0,
            accuracy: 0.85,
            objective: Objective::Accuracy,
        };
        let config = SelectionConfig::default();
        // On the profiles all three fit, and O1 takes the most accurate, model 1.
        let profiled = [model(2.0, 0.86), model(5.0, 0.92), model(4.0, 0.90)];
        let mut e = Ensemble::select(&profiled, constraint, None);
        assert_eq!(e.members, [1]);
        // Measured, model 1 does not fit, and model 2, never called, is predicted on a
        // cold start's estimate that does not fit either: O1 chooses model 0.
        let starting = [model(3.0, 0.86), model(12.0, 0.92), model(15.0, 0.90)];
        assert_eq!(
            e.revisit(&starting, &config, None),
            Some(Adjustment::Refit(vec![0]))
        );
        // Model 2 fits once the estimate settles: O1 chooses again and takes it, though
        // no member stopped fitting and no label has come.
        let settled = [model(3.0, 0.86), model(12.0, 0.92), model(6.0, 0.90)];
        assert_eq!(
            e.revisit(&settled, &config, None),
            Some(Adjustment::Refit(vec![2]))
        );
        assert_eq!((e.members.as_slice(), e.generation), (&[2][..], 2));
        // Once for each: the same estimates again change nothing.
        assert_eq!(e.revisit(&settled, &config, None), None);
    }

    #[test]
    fn a_tracking_ensemble_follows_its_tracker_and_o2_stands_aside() {
        // Model 0 is cheap, model 1 slow and the most accurate by profile.
        let models = [model(1.0, 0.80), model(5.0, 0.90)];
        let constraint = Constraint {
            latency_ms: 10.0,
            accuracy: 0.85,
            objective: Objective::Accuracy,
        };
        let mut e = Ensemble::new(&models, constraint, vec![1], 0);
        e.track(crate::tracking::TrackingConfig::serving(
            crate::estimate::Rule::Majority,
            Some(100),
            crate::tracking::Knobs {
                pace: false,
                ..Default::default()
            },
        ));
        // On this traffic the cheap model is always right and the accurate one never.
        let item = Labelled {
            label: 0,
            answers: vec![Some(0), Some(1)],
            probabilities: Vec::new(),
        };
        let serve = |e: &mut Ensemble, labelled: bool| {
            if labelled {
                e.remember(item.clone());
            }
            e.served(&models)
        };
        for _ in 0..49 {
            assert_eq!(serve(&mut e, true), None);
        }
        assert_eq!(e.remembered(), 49, "the items went to the tracker");
        // 50 labels show the served model falling short: it chooses again at once.
        assert_eq!(
            serve(&mut e, true),
            Some(Adjustment::Tracked(vec![0], Reselect::Shift))
        );
        assert_eq!((e.members.as_slice(), e.generation), (&[0][..], 1));
        // O2's interval passes without a change: the tracker chooses.
        assert_eq!(e.revisit(&models, &SelectionConfig::default(), None), None);
        assert_eq!(e.members, [0]);
        // Another master's choice through the cache is adopted, until the tracker's
        // interval ends (request 100) and it chooses on its window again.
        e.replace(vec![1], 2);
        assert_eq!(serve(&mut e, false), None);
        for _ in 0..48 {
            assert_eq!(serve(&mut e, true), None);
        }
        assert_eq!(e.members, [1]);
        assert_eq!(
            serve(&mut e, true),
            Some(Adjustment::Tracked(vec![0], Reselect::Interval))
        );
        assert_eq!(e.generation, 3);
    }

    #[test]
    fn a_paced_mix_takes_turns_without_a_new_generation() {
        // The cheap model is right on 75 % of the items, the slow one on 95 %: a mix of
        // the two meets the target (with Cocktail's margin) for less than the slow one.
        let models = [model(1.0, 0.80), model(5.0, 0.90)];
        let constraint = Constraint {
            latency_ms: 10.0,
            accuracy: 0.8,
            objective: Objective::Accuracy,
        };
        let mut e = Ensemble::new(&models, constraint, vec![1], 0);
        e.track(crate::tracking::TrackingConfig::serving(
            crate::estimate::Rule::Majority,
            Some(100),
            crate::tracking::Knobs {
                pace: true,
                ..Default::default()
            },
        ));
        let item = |k: usize| Labelled {
            label: 0,
            answers: vec![
                Some(u16::from(k.is_multiple_of(4))),
                Some(u16::from(k.is_multiple_of(20))),
            ],
            probabilities: Vec::new(),
        };
        let mut changes = Vec::new();
        let mut served = Vec::new();
        for k in 0..300 {
            e.remember(item(k));
            changes.extend(e.served(&models));
            served.push(e.members.clone());
        }
        // One choice, the mix, at the first interval; its turns are no new generation.
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(e.generation, 1);
        let last = &served[100..];
        let slow = last.iter().filter(|m| *m == &[1]).count();
        assert!(last.iter().all(|m| m == &[0] || m == &[1]));
        assert!((50..150).contains(&slow), "{slow} of {}", last.len());
        // Both sides are in use (their pools stay) whichever serves now.
        assert_eq!(
            e.mix().map(|(lo, hi, _)| (lo, hi)),
            Some((&[0][..], &[1][..]))
        );
        let mut in_use = e.in_use();
        in_use.sort_unstable();
        assert_eq!(in_use, [0, 1]);
    }

    #[test]
    fn measured_selection_chooses_from_the_buffer_once_it_is_big_enough() {
        let model = |accuracy| Candidate {
            latency_ms: 1.0,
            accuracy,
            packing_factor: 1,
        };
        let models = [model(0.90), model(0.88), model(0.87)];
        let constraint = Constraint {
            latency_ms: 1.0,
            accuracy: 0.95,
            objective: Objective::Accuracy,
        };
        let config = SelectionConfig {
            rule: Rule::Measured,
            ..SelectionConfig::default()
        };
        let mut e = Ensemble::select(&models, constraint, None);
        assert_eq!(
            e.members,
            [0, 1, 2],
            "O1: independent errors would make three 96 %"
        );
        // Model 0 is always right; 1 and 2 err together on a tenth of the items, where
        // they outvote it: the vote of three is worse than model 0 alone.
        let item = |i: usize| Labelled {
            label: 0,
            answers: vec![
                Some(0),
                Some(u16::from(i % 10 == 1)),
                Some(u16::from(i % 10 == 1)),
            ],
            probabilities: Vec::new(),
        };
        for i in 0..measured::MIN_ITEMS - 1 {
            e.remember(item(i));
        }
        assert_eq!(e.revisit(&models, &config, None), None, "O1 stands");
        e.remember(item(99));
        assert_eq!(
            e.revisit(&models, &config, None),
            Some(Adjustment::Measured(vec![0]))
        );
        assert_eq!(e.remembered(), measured::MIN_ITEMS);
        assert_eq!(
            e.revisit(&models, &config, None),
            None,
            "no change: no new generation"
        );
        assert_eq!(e.generation, 1);
    }

    #[test]
    fn a_models_target_is_the_tightest_of_the_ensembles_using_it() {
        let a = [0, 1];
        let b = [1, 2];
        let targets = tightest_targets([(30.0, &a[..]), (10.0, &b[..])], 4);
        assert_eq!(targets, [Some(30.0), Some(10.0), Some(10.0), None]);
    }
}
