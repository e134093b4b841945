//! One constraint key's ensemble as O2 sees it (cocktail.txt §4.1): the members, the
//! candidate pool, a generation bumped by every change, and the window of labelled
//! outcomes. No clocks: the live master (`cocktail_master::serving::state::KeyState`) and the simulator
//! each decide when an interval is over and then call [`Ensemble::revisit`].

use crate::selection::{self, Adjustment, Candidate, Constraint, SelectionConfig, Window};

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
}

impl Ensemble {
    pub fn new(
        models: &[Candidate],
        constraint: Constraint,
        members: Vec<usize>,
        generation: u64,
        config: &SelectionConfig,
    ) -> Self {
        Self {
            pool: selection::candidates(models, &constraint, config),
            window: Window {
                member_correct: vec![0; members.len()],
                ..Window::default()
            },
            members,
            constraint,
            generation,
        }
    }

    /// O1: the initial ensemble for `constraint`.
    pub fn select(models: &[Candidate], constraint: Constraint, config: &SelectionConfig) -> Self {
        let members = selection::initial(models, &constraint, config);
        Self::new(models, constraint, members, 0, config)
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
    }

    /// O2 at the end of an interval: returns the change made, if any. The candidate pool
    /// is refreshed first, so models deployed since can join.
    pub fn revisit(
        &mut self,
        models: &[Candidate],
        config: &SelectionConfig,
    ) -> Option<Adjustment> {
        self.pool = selection::candidates(models, &self.constraint, config);
        if self.window.labelled == 0 {
            return None; // Keep collecting until labels arrive.
        }
        let adjustment = selection::adjust(
            models,
            &self.members,
            &self.pool,
            &self.window,
            self.constraint.accuracy,
            config,
        );
        match &adjustment {
            Adjustment::Keep => self.reset_window(),
            Adjustment::Prune(members) => self.replace(members.clone(), self.generation + 1),
            Adjustment::Add(model) => {
                let mut members = self.members.clone();
                members.push(*model);
                self.replace(members, self.generation + 1);
            }
        }
        (adjustment != Adjustment::Keep).then_some(adjustment)
    }

    /// Adopts a new member list (from O2 or from another master through the cache).
    pub fn replace(&mut self, members: Vec<usize>, generation: u64) {
        self.members = members;
        self.generation = generation;
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

/// [`tightest_targets`] of the ensembles' constraints and members: `Some` exactly for the
/// models in use.
pub fn targets_of(ensembles: &[Ensemble], models: usize) -> Vec<Option<f64>> {
    tightest_targets(
        ensembles
            .iter()
            .map(|e| (e.constraint.latency_ms, e.members.as_slice())),
        models,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_models_target_is_the_tightest_of_the_ensembles_using_it() {
        let a = [0, 1];
        let b = [1, 2];
        let targets = tightest_targets([(30.0, &a[..]), (10.0, &b[..])], 4);
        assert_eq!(targets, [Some(30.0), Some(10.0), Some(10.0), None]);
    }
}
