//! A drift schedule bound to a task's recorded answers ([`DriftWorld`]): the requests
//! every scheme of [`super::drift`] sees, the oracle's choice per phase, and whether a
//! choice has adapted to a phase.

use std::borrow::Cow;
use std::collections::HashMap;

use anyhow::Context as _;
use cocktail_common::{Predictions, Zoo};
use cocktail_policy::estimate::{Rule, combinations, majority_vote};
use cocktail_policy::selection::{Constraint, Objective};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::World;
use super::drift::MAX_MEMBERS;
use crate::workload::drift::{self as workload, Drift, GroupBy, Schedule};

/// A schedule bound to a task: the world, the draw, and each item's group.
#[derive(Debug)]
pub struct DriftWorld<'a> {
    /// The task's world; for a [`GroupBy::Shifted`] schedule, a copy with the shifted
    /// items appended.
    pub world: Cow<'a, World>,
    pub drift: Drift,
    /// The scored items of each of the schedule's groups, in the order it first uses them.
    pub groups: Vec<(String, Vec<usize>)>,
    /// The scored items of each phase, with their weight in the phase.
    phase_items: Vec<Vec<(usize, f64)>>,
    /// Per phase: the oracle's choice, and the best accuracy any choice reaches.
    oracle: Vec<Vec<usize>>,
    best_accuracy: Vec<f64>,
    /// The same schedule drawn from the first half of the test set instead (the half
    /// selection estimates on, never scored), to tune on; `None` when it cannot be
    /// ([`Schedule::has_held_out`]).
    pub held_out: Option<Box<DriftWorld<'a>>>,
}

impl<'a> DriftWorld<'a> {
    /// Binds `schedule` to `world` (the task's models and recorded answers): drawn from
    /// the scored second half, and held out from the first.
    pub fn new(zoo: &Zoo, world: &'a World, schedule: &'static Schedule) -> anyhow::Result<Self> {
        let held_out = if schedule.has_held_out() {
            Some(Box::new(Self::bind(zoo, world, schedule, false)?))
        } else {
            None
        };
        Ok(Self {
            held_out,
            ..Self::bind(zoo, world, schedule, true)?
        })
    }

    /// Binds `schedule` to the scored half of `world`'s test set (and its shifted copies)
    /// when `scored`, else to the first half.
    fn bind(
        zoo: &Zoo,
        world: &'a World,
        schedule: &'static Schedule,
        scored: bool,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            world.task == schedule.task,
            "schedule `{}` draws from task `{}`, not `{}`",
            schedule.name,
            schedule.task,
            world.task
        );
        let (first, n) = world.scored_items();
        let mut world = Cow::Borrowed(world);
        let groups: Vec<String> = match schedule.group_by {
            GroupBy::Source => cocktail_common::testset::sources(zoo, &world.task)?
                .ok_or_else(|| anyhow::anyhow!("task `{}` has no sources", world.task))?,
            GroupBy::Class => {
                let names = &zoo.task(&world.task)?.labels;
                world
                    .labels
                    .iter()
                    .map(|&l| names.get(usize::from(l)).cloned().unwrap_or_default())
                    .collect()
            }
            GroupBy::Shifted(folder) => {
                let shifted = world.to_mut();
                let mut groups = vec![workload::CLEAN.to_owned(); shifted.labels.len()];
                for group in schedule.groups() {
                    if group == workload::CLEAN {
                        continue;
                    }
                    let path = format!("{folder}/{group}.tsv.gz");
                    let answers = Predictions::load(&zoo.resolve(&path))
                        .map_err(anyhow::Error::from)
                        .and_then(|p| {
                            let vectors =
                                super::world::load_probabilities(zoo, &path, &shifted.models, p.len())?;
                            shifted.append(&p, vectors.as_ref())
                        })
                        .with_context(|| {
                            format!(
                                "schedule `{}`: the recorded answers on `{group}` (`{path}` in the zoo; models/build-zoo.sh records them)",
                                schedule.name
                            )
                        });
                    answers?;
                    groups.resize(shifted.labels.len(), group.to_owned());
                }
                groups
            }
        };
        anyhow::ensure!(
            groups.len() == world.labels.len(),
            "{} test items but {} recorded answers",
            groups.len(),
            world.labels.len()
        );
        // The clean scored half, and every shifted item after it; or the first half.
        let scored = if scored {
            first..first + n + world.shifted
        } else {
            0..first
        };
        let drift = Drift::new(schedule, scored.clone(), |i| groups.get(i).cloned())?;
        let by_group: Vec<(String, Vec<usize>)> = schedule
            .groups()
            .into_iter()
            .map(|group| {
                let items = scored
                    .clone()
                    .filter(|&i| groups.get(i).map(String::as_str) == Some(group))
                    .collect();
                (group.to_owned(), items)
            })
            .collect();
        let items_of = |group: &str| {
            by_group
                .iter()
                .find(|(g, _)| g == group)
                .map_or(&[][..], |(_, items)| items.as_slice())
        };
        let phase_items: Vec<Vec<(usize, f64)>> = schedule
            .phases
            .iter()
            .map(|phase| {
                let total: f64 = phase.shares.iter().map(|(_, s)| s).sum();
                phase
                    .shares
                    .iter()
                    .flat_map(|&(group, share)| {
                        let items = items_of(group);
                        let weight = share / total / items.len().max(1) as f64;
                        items.iter().map(move |&i| (i, weight))
                    })
                    .collect()
            })
            .collect();
        let (oracle, best_accuracy) = oracle(&world, &phase_items, schedule.target)
            .into_iter()
            .unzip();
        Ok(Self {
            world,
            drift,
            groups: by_group,
            phase_items,
            oracle,
            best_accuracy,
            held_out: None,
        })
    }

    /// The requests every scheme sees for `seed`: each one's test item, and whether its
    /// label comes back when a share `fraction` of the requests is labelled
    /// (`cocktail loadgen --drift` sends the same requests).
    pub fn requests(&self, seed: u64, fraction: f64) -> (Vec<usize>, Vec<bool>) {
        let mut draws = SmallRng::seed_from_u64(seed);
        let mut labels = SmallRng::seed_from_u64(seed ^ 0x1ABE1);
        (0..self.drift.schedule.requests())
            .map(|k| {
                let item = self.drift.draw(&mut draws, k);
                // Drawn for every request, so that every fraction sees the same draws.
                (item, labels.random::<f64>() < fraction)
            })
            .unzip()
    }

    /// The schedule's one constraint: its target at any model's latency, served by the
    /// fewest and fastest models that meet it (objective latency), as InFaaS and the
    /// oracle serve it: O1 starts from the cheapest model whose profile meets the
    /// target, not from the most accurate, and it is for the rest of the selection to
    /// add what the traffic needs. (Until the O1/O2 and measured schemes joined the page
    /// the objective was accuracy, which only set the trackers' first choice.)
    pub fn constraint(&self) -> Constraint {
        Constraint {
            latency_ms: f64::INFINITY,
            accuracy: self.drift.schedule.target,
            objective: Objective::Latency,
        }
    }

    /// The oracle's choice per phase: the cheapest single model or odd vote whose
    /// accuracy on the phase's scored items meets the target; else the most accurate.
    pub fn oracle(&self) -> &[Vec<usize>] {
        &self.oracle
    }

    /// The scored items of phase `phase`, with their weight in it.
    pub(super) fn phase_items(&self, phase: usize) -> &[(usize, f64)] {
        self.phase_items.get(phase).map_or(&[][..], Vec::as_slice)
    }

    /// The accuracy on phase `phase`'s items at which a choice has adapted to it: the
    /// target or a point below the best any choice reaches, whichever asks less (the
    /// latter where no choice clears the target by a point).
    pub(super) fn adapted_accuracy(&self, phase: usize) -> f64 {
        let best = self.best_accuracy.get(phase).copied().unwrap_or(0.0);
        self.drift.schedule.target.min(best - 0.01)
    }

    /// Whether `members` have adapted to phase `phase`: their accuracy on the phase's
    /// items reaches [`DriftWorld::adapted_accuracy`]. `seen` keeps the answers per
    /// (phase, members).
    pub(super) fn adapted(
        &self,
        phase: usize,
        members: &[usize],
        rule: Rule,
        seen: &mut HashMap<(usize, Vec<usize>), bool>,
    ) -> bool {
        if let Some(&adapted) = seen.get(&(phase, members.to_vec())) {
            return adapted;
        }
        let accuracy = accuracy_on(&self.world, self.phase_items(phase), members, rule);
        let adapted = accuracy >= self.adapted_accuracy(phase);
        seen.insert((phase, members.to_vec()), adapted);
        adapted
    }
}

/// The choices the oracle weighs: every single model of `world` and every odd majority
/// of up to [`MAX_MEMBERS`] of them.
pub(super) fn oracle_choices(world: &World) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..world.candidates.len()).collect();
    (1..=MAX_MEMBERS.min(all.len()))
        .step_by(2)
        .flat_map(|k| combinations(&all, k))
        .collect()
}

/// A choice's inference: its members' summed profiled latency (ms).
pub(super) fn inference_ms(world: &World, members: &[usize]) -> f64 {
    members
        .iter()
        .map(|&m| world.candidates[m].latency_ms)
        .sum()
}

/// Per phase (its scored items with their weights): the oracle's choice, the cheapest
/// single model or odd vote whose accuracy on the items meets `target`, else the most
/// accurate; and the best accuracy any such choice reaches.
fn oracle(world: &World, phase_items: &[Vec<(usize, f64)>], target: f64) -> Vec<(Vec<usize>, f64)> {
    let cost = |m: &[usize]| inference_ms(world, m);
    phase_items
        .iter()
        .map(|items| {
            let mut choices: Vec<(Vec<usize>, f64)> = oracle_choices(world)
                .into_iter()
                .map(|m| {
                    let accuracy = accuracy_on(world, items, &m, Rule::Majority);
                    (m, accuracy)
                })
                .collect();
            choices.sort_by(|a, b| cost(&a.0).total_cmp(&cost(&b.0)));
            let best = choices.iter().map(|c| c.1).fold(0.0, f64::max);
            let choice = choices
                .iter()
                .find(|(_, a)| *a >= target)
                .or_else(|| choices.iter().max_by(|a, b| a.1.total_cmp(&b.1)))
                .map(|(m, _)| m.clone())
                .unwrap_or_default();
            (choice, best)
        })
        .collect()
}

/// The weighted share of `items` on which the vote of `members` under `rule` is right.
pub(super) fn accuracy_on(
    world: &World,
    items: &[(usize, f64)],
    members: &[usize],
    rule: Rule,
) -> f64 {
    items
        .iter()
        .map(|&(item, w)| w * f64::from(u8::from(vote_right(world, members, item, rule))))
        .sum()
}

/// Whether the vote of `members` under `rule` is right on `item`: a plain majority (ties
/// to the voter most accurate by profile), or the highest mean probability (wrong when a
/// member's vector is not recorded).
pub(super) fn vote_right(world: &World, members: &[usize], item: usize, rule: Rule) -> bool {
    let label = world.labels.get(item).copied();
    match rule {
        Rule::Majority => {
            let answers = members.iter().filter_map(|&m| {
                let class = *world.answers.get(m)?.get(item)?;
                Some((class, world.accuracy.get(m).copied().unwrap_or(0.0)))
            });
            majority_vote(answers, &mut Vec::new()) == label
        }
        Rule::Soft => world
            .soft_vote(members, item, &mut Vec::new())
            .and_then(|c| u16::try_from(c).ok())
            .is_some_and(|c| Some(c) == label),
    }
}
