//! What a drift replay's learning scheme keeps between requests ([`super::drift`]): a
//! [`Tracker`] (`policy::tracking`), or one constraint's [`Ensemble`] as the live master
//! keeps it, adjusted by the paper's O2 or by measured selection.

use std::collections::VecDeque;

use cocktail_policy::ensemble::Ensemble;
use cocktail_policy::estimate::{Recorded, majority_vote};
use cocktail_policy::selection::{self, Candidate, Constraint, SelectionConfig};
use cocktail_policy::tracking::Tracker;

use super::World;

/// A label on its way back: when it is due (a request count), the request it belongs to
/// (its number when served, its item) and the ensemble that served it.
#[derive(Debug, Clone)]
pub struct Pending {
    pub due: u64,
    pub served_at: u64,
    pub item: usize,
    pub generation: u64,
    pub members: Vec<usize>,
}

/// A learning scheme's state.
#[derive(Debug)]
pub enum Learner {
    Tracker(Box<Tracker>),
    /// O1, then O2 (`SelectionConfig::rule` = cocktail) or measured selection (=
    /// measured) at the end of every `interval` requests, on the window of labelled
    /// outcomes (and, measured, the buffer of every candidate's answers).
    Ensemble {
        ensemble: Box<Ensemble>,
        config: SelectionConfig,
        interval: u64,
        requests: u64,
    },
}

impl Learner {
    /// O1's ensemble for `constraint`, adjusted with `config` every `interval` requests.
    pub fn ensemble(
        models: &[Candidate],
        constraint: Constraint,
        recorded: &Recorded,
        config: SelectionConfig,
        interval: u64,
    ) -> Self {
        Self::Ensemble {
            ensemble: Box::new(Ensemble::select(models, constraint, Some(recorded))),
            config,
            interval: interval.max(1),
            requests: 0,
        }
    }

    pub fn members(&self) -> &[usize] {
        match self {
            Self::Tracker(t) => t.members(),
            Self::Ensemble { ensemble, .. } => &ensemble.members,
        }
    }

    fn generation(&self) -> u64 {
        match self {
            Self::Tracker(_) => 0,
            Self::Ensemble { ensemble, .. } => ensemble.generation,
        }
    }

    /// Whether a labelled request needs every candidate's answer (the master's shadow
    /// calls): for tracking and measured selection, not for O2.
    pub fn shadows(&self) -> bool {
        match self {
            Self::Tracker(_) => true,
            Self::Ensemble { config, .. } => config.rule == selection::Rule::Measured,
        }
    }

    /// Whether a paced mix of two choices serves now (`TrackingConfig::pace`).
    pub fn paced(&self) -> bool {
        match self {
            Self::Tracker(t) => t.mix().is_some(),
            Self::Ensemble { .. } => false,
        }
    }

    /// Re-selections the tracker's shift check started.
    pub fn shifts(&self) -> u64 {
        match self {
            Self::Tracker(t) => t.shifts,
            Self::Ensemble { .. } => 0,
        }
    }

    /// Request `item` was served as request number `served_at`; its label is due at
    /// request `due`.
    pub fn pending(&self, due: u64, served_at: u64, item: usize) -> Pending {
        Pending {
            due,
            served_at,
            item,
            generation: self.generation(),
            members: self.members().to_vec(),
        }
    }

    /// Takes the labels of `pending` due by request `k`, in order. `asked`: the
    /// candidates a shadow call asks.
    pub fn deliver(
        &mut self,
        pending: &mut VecDeque<Pending>,
        k: u64,
        world: &World,
        asked: &[usize],
    ) {
        while pending.front().is_some_and(|p| p.due <= k) {
            if let Some(p) = pending.pop_front() {
                self.label(&p, world, asked);
            }
        }
    }

    fn label(&mut self, p: &Pending, world: &World, asked: &[usize]) {
        let shadows = self.shadows();
        match self {
            Self::Tracker(t) => t.label(p.served_at, world.labelled(p.item, asked)),
            Self::Ensemble { ensemble, .. } => {
                // What the master records of an answered request: each member's class,
                // the vote and how many voted for it.
                let classes: Vec<Option<usize>> = p
                    .members
                    .iter()
                    .map(|&m| world.answers.get(m)?.get(p.item).map(|&c| usize::from(c)))
                    .collect();
                let votes = classes.iter().zip(&p.members).filter_map(|(c, &m)| {
                    Some(((*c)?, world.accuracy.get(m).copied().unwrap_or(0.0)))
                });
                let label = world.labels.get(p.item).map(|&l| usize::from(l));
                if let (Some(class), Some(label)) = (majority_vote(votes, &mut Vec::new()), label) {
                    let winning = classes.iter().filter(|c| **c == Some(class)).count();
                    ensemble.record(p.generation, &classes, class, winning, label);
                }
                if shadows {
                    ensemble.remember(world.labelled(p.item, asked));
                }
            }
        }
    }

    /// One more request was served: the tracker's check, or O2 / measured selection at
    /// the end of an interval.
    pub fn served(&mut self, models: &[Candidate], constraint: &Constraint, recorded: &Recorded) {
        match self {
            Self::Tracker(t) => {
                t.served(models, constraint);
            }
            Self::Ensemble {
                ensemble,
                config,
                interval,
                requests,
            } => {
                *requests += 1;
                if requests.is_multiple_of(*interval) {
                    ensemble.revisit(models, config, Some(recorded));
                }
            }
        }
    }
}
