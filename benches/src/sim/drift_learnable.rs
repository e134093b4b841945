//! How soon a learner could adapt to a drift schedule's phase changes: the reference
//! behind issue 34's adaptation-lag goal (adapted within 2 selection intervals after
//! every change).
//!
//! A scheme that re-selects every interval on its labels holds, at its second
//! re-selection after a change, at most two intervals' labels of the new phase. The
//! learner here is given exactly those and more help than any scheme has: it is told the
//! moment the phase changes, its labels come from the new phase alone (none of the old
//! one, no blend), and it scores every choice the oracle scores (each single model and
//! odd majority of up to five) on them, serving the most accurate (of equals, the
//! cheaper). It re-selects after one interval's labels and after two, and has adapted
//! in time when either choice is adapted as the replay judges every scheme
//! ([`DriftWorld::adapted`]). Over many draws, the share in time is how often it meets
//! the lag goal at that change; the draws being independent, the product over the
//! changes is how often it meets the goal after every one. Where few choices are
//! adapted (few meet the target, or no choice clears it by a point and only those
//! within a point of the best count), the most accurate on two hundred labels is often
//! a lucky one (the winner's curse). A reference for what the new phase's labels alone
//! tell, not a limit on every scheme: one that already serves a choice adapted on both
//! sides of a change needs none (measured selection's lags on `class-skew` are 0), and
//! one with other knowledge (of the corruptions, say) could adapt sooner.

use cocktail_policy::estimate::Rule;
use rand::SeedableRng;
use rand::distr::Distribution as _;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::SmallRng;

use super::drift_world::{DriftWorld, inference_ms, oracle_choices, vote_right};

/// Draws of labels per phase change.
pub const DRAWS: usize = 200;

/// What the learner reaches on one phase the schedule changes into.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseLearnable {
    pub phase: &'static str,
    /// Times the schedule changes into it.
    pub changes: usize,
    /// The choices adapted to it.
    pub adapted: usize,
    /// The share of draws in which the choice most accurate on one interval's labels is
    /// adapted, and in which that one or the choice on two intervals' labels is.
    pub after_one: f64,
    pub by_two: f64,
}

/// The learner on every phase of a schedule that it changes into.
#[derive(Debug, Clone, PartialEq)]
pub struct Learnable {
    /// The choices scored (the oracle's: singles and odd majorities of up to five).
    pub choices: usize,
    /// Labels per interval.
    pub interval: usize,
    pub phases: Vec<PhaseLearnable>,
}

impl Learnable {
    /// `dw`'s phases after a change, `DRAWS` draws each of `interval` labels and twice
    /// that, from `seed`.
    pub fn new(dw: &DriftWorld<'_>, interval: usize, seed: u64) -> anyhow::Result<Self> {
        let world = &dw.world;
        let choices = oracle_choices(world);
        let cost: Vec<f64> = choices.iter().map(|c| inference_ms(world, c)).collect();
        let schedule = dw.drift.schedule;
        // The changes into each phase: every phase of every round but the first's first.
        let changes = |p: usize| schedule.rounds - usize::from(p == 0);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut phases = Vec::new();
        for (p, phase) in schedule.phases.iter().enumerate() {
            if changes(p) == 0 {
                continue;
            }
            let items = dw.phase_items(p);
            let pick = WeightedIndex::new(items.iter().map(|&(_, w)| w))?;
            // Whether each choice's vote is right on each of the phase's items: scored
            // once, then summed over each draw.
            let right: Vec<Vec<bool>> = choices
                .iter()
                .map(|c| {
                    items
                        .iter()
                        .map(|&(i, _)| vote_right(world, c, i, Rule::Majority))
                        .collect()
                })
                .collect();
            // Adapted as `DriftWorld::adapted` judges it, from the same answers: the
            // weighted share of the phase's items each choice gets right.
            let needed = dw.adapted_accuracy(p);
            let adapted: Vec<bool> = right
                .iter()
                .map(|r| {
                    let accuracy: f64 = items
                        .iter()
                        .zip(r)
                        .filter(|(_, ok)| **ok)
                        .map(|(&(_, w), _)| w)
                        .sum();
                    accuracy >= needed
                })
                .collect();
            let most_accurate = |drawn: &[usize]| -> usize {
                let scores: Vec<usize> = right
                    .iter()
                    .map(|r| drawn.iter().filter(|&&d| r[d]).count())
                    .collect();
                (0..choices.len())
                    .max_by(|&a, &b| scores[a].cmp(&scores[b]).then(cost[b].total_cmp(&cost[a])))
                    .unwrap_or(0)
            };
            let (mut after_one, mut by_two) = (0_usize, 0_usize);
            for _ in 0..DRAWS {
                let drawn: Vec<usize> = (0..2 * interval).map(|_| pick.sample(&mut rng)).collect();
                let first = adapted[most_accurate(&drawn[..interval])];
                after_one += usize::from(first);
                by_two += usize::from(first || adapted[most_accurate(&drawn)]);
            }
            phases.push(PhaseLearnable {
                phase: phase.name,
                changes: changes(p),
                adapted: adapted.iter().filter(|&&a| a).count(),
                after_one: after_one as f64 / DRAWS as f64,
                by_two: by_two as f64 / DRAWS as f64,
            });
        }
        Ok(Self {
            choices: choices.len(),
            interval,
            phases,
        })
    }

    /// How often the learner has adapted within two intervals after every change.
    pub fn every_change(&self) -> f64 {
        self.phases
            .iter()
            .map(|p| p.by_two.powi(i32::try_from(p.changes).unwrap_or(i32::MAX)))
            .product()
    }
}

#[cfg(test)]
mod tests {
    use cocktail_common::Zoo;

    use super::*;
    use crate::sim::World;
    use crate::workload::drift::{FASHION_CORRUPTIONS, SENTIMENT_DOMAINS};

    #[test]
    fn labels_alone_tell_a_clear_best_sooner_than_a_near_tie() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        // Sentiment: few models, a handful of choices; every phase is changed into twice.
        let world = World::load(&zoo, "sentiment").unwrap();
        let dw = DriftWorld::new(&zoo, &world, &SENTIMENT_DOMAINS).unwrap();
        let l = Learnable::new(&dw, 100, 1).unwrap();
        assert_eq!(l.phases.len(), SENTIMENT_DOMAINS.phases.len());
        assert!(l.phases.iter().all(|p| p.changes
            == SENTIMENT_DOMAINS.rounds
                - usize::from(p.phase == SENTIMENT_DOMAINS.phases[0].name)));
        for p in &l.phases {
            assert!(p.adapted >= 1 && p.adapted <= l.choices, "{p:?}");
            assert!(p.after_one <= p.by_two, "{p:?}");
        }
        // The same seed draws the same labels.
        assert_eq!(Learnable::new(&dw, 100, 1).unwrap(), l);
        // Fashion under corruption: one round, so the clean start is never changed into;
        // on a shift most choices survive, nearly every draw finds one; on inversion,
        // where a dozen of thousands are adapted, many draws do not.
        let fashion = World::load(&zoo, "fashion").unwrap();
        let dw = DriftWorld::new(&zoo, &fashion, &FASHION_CORRUPTIONS).unwrap();
        let l = Learnable::new(&dw, 100, 1).unwrap();
        assert_eq!(l.phases.len(), FASHION_CORRUPTIONS.phases.len() - 1);
        let phase = |name: &str| l.phases.iter().find(|p| p.phase == name).unwrap();
        let mild = phase("shot noise 1");
        let inverse = phase("inverse");
        assert!(
            mild.adapted > l.choices / 2 && mild.by_two > 0.95,
            "{mild:?}"
        );
        assert!(inverse.adapted < 100 && inverse.by_two < 0.9, "{inverse:?}");
        assert!(l.every_change() < inverse.by_two);
    }
}
