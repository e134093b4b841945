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
mod tests;
