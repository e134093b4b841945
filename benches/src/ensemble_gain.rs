//! How much an ensemble can gain over a single model within each constraint type's
//! latency (issue 14, point 4): per type, the best single model whose profiled latency
//! fits and the best plain-majority vote (ties to the most accurate voter, as selection
//! estimates) of two to five such models, both counted on the whole recorded test set,
//! and the best soft vote (the highest mean probability) of two to five of them, from the
//! probability vectors recorded for every model and item. `cocktail results` writes the
//! table to `docs/results.md` and `models/README.md`.

use cocktail_policy::estimate::{Recorded, best_vote};

use crate::sim::World;
use crate::workload::HOP_MS;

/// Candidates searched per type: the most accurate that fit (C(9, 2..=5) = 372 subsets).
const SEARCHED: usize = 9;
/// The largest ensemble searched.
const MAX_SIZE: usize = 5;

/// One constraint type's gain.
#[derive(Debug, Clone, PartialEq)]
pub struct Gain {
    pub constraint: String,
    /// The type's inference latency (its end-to-end target less the hop).
    pub latency_ms: f64,
    pub single: (String, f64),
    pub ensemble: (Vec<String>, f64),
    /// The best soft vote, when the zoo has probability vectors.
    pub soft: Option<(Vec<String>, f64)>,
}

impl Gain {
    /// In points of accuracy.
    pub fn points(&self) -> f64 {
        (self.ensemble.1 - self.single.1) * 100.0
    }
}

/// `recorded` (the world's answers on all its items) with the world's probability
/// vectors, so that it counts soft votes; `None` without them.
fn soft(world: &World, recorded: &Recorded) -> Option<Recorded> {
    let vectors = world.probabilities.as_ref()?;
    Some(
        recorded
            .clone()
            .soft(world.classes, vectors.iter().cloned().map(Some).collect()),
    )
}

/// The most accurate soft vote of two to [`MAX_SIZE`] of `fit`'s [`SEARCHED`] most
/// accurate models (by `accuracy`), counted by [`best_vote`] on `soft` (see [`soft`]).
fn best_soft(soft: &Recorded, mut fit: Vec<usize>, accuracy: &[f64]) -> Option<(Vec<usize>, f64)> {
    fit.sort_by(|&a, &b| accuracy[b].total_cmp(&accuracy[a]).then(a.cmp(&b)));
    fit.truncate(SEARCHED);
    best_vote(soft, &fit, MAX_SIZE, accuracy)
}

/// Every constraint type's gain on `world`'s zoo.
pub fn gains(world: &World) -> Vec<Gain> {
    let recorded = Recorded::new(
        world.answers.iter().cloned().map(Some).collect(),
        world.labels.clone(),
    );
    let accuracy = &world.accuracy;
    let soft_recorded = soft(world, &recorded);
    world
        .types
        .iter()
        .map(|t| {
            let latency_ms = t.constraint.latency_ms - HOP_MS;
            let fit: Vec<usize> = (0..world.models.len())
                .filter(|&m| world.candidates[m].latency_ms <= latency_ms + 1e-9)
                .collect();
            let soft = soft_recorded
                .as_ref()
                .and_then(|r| best_soft(r, fit.clone(), accuracy));
            let (single, best) = single_and_vote(&recorded, fit, accuracy, t.model);
            let name = |m: usize| world.models[m].clone();
            Gain {
                constraint: t.name.clone(),
                latency_ms,
                single: (name(single), accuracy[single]),
                ensemble: (best.0.into_iter().map(name).collect(), best.1),
                soft: soft.map(|(m, a)| (m.into_iter().map(name).collect(), a)),
            }
        })
        .collect()
}

/// Among `fit`: the most accurate model (`fallback` when `fit` is empty), and the most
/// accurate plain-majority vote of two to five of the [`SEARCHED`] most accurate when it
/// beats that model, else the model alone. `accuracy[model]` ranks them and breaks ties.
fn single_and_vote(
    recorded: &Recorded,
    mut fit: Vec<usize>,
    accuracy: &[f64],
    fallback: usize,
) -> (usize, (Vec<usize>, f64)) {
    fit.sort_by(|&a, &b| accuracy[b].total_cmp(&accuracy[a]).then(a.cmp(&b)));
    fit.truncate(SEARCHED);
    let single = fit.first().copied().unwrap_or(fallback);
    let best = best_vote(recorded, &fit, MAX_SIZE, accuracy)
        .filter(|(_, a)| *a > accuracy[single] + 1e-12)
        .unwrap_or((vec![single], accuracy[single]));
    (single, best)
}

/// One group's gain: a domain or a corruption that a drift schedule draws from.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupGain {
    pub group: String,
    pub items: usize,
    pub single: (String, f64),
    pub ensemble: (Vec<String>, f64),
    /// The best soft vote, when the zoo has probability vectors.
    pub soft: Option<(Vec<String>, f64)>,
}

impl GroupGain {
    /// In points of accuracy.
    pub fn points(&self) -> f64 {
        (self.ensemble.1 - self.single.1) * 100.0
    }
}

/// Per group of test items (`(name, items)`): the most accurate single model on the
/// group's items and the best plain-majority vote and soft vote of two to five of the
/// group's nine most accurate models, at any latency: how much voting can gain where the
/// traffic goes.
pub fn by_group(world: &World, groups: &[(String, Vec<usize>)]) -> Vec<GroupGain> {
    let all = Recorded::new(
        world.answers.iter().cloned().map(Some).collect(),
        world.labels.clone(),
    );
    let soft_all = soft(world, &all);
    groups
        .iter()
        .map(|(group, items)| {
            let recorded = all.select(items);
            let models: Vec<usize> = (0..world.models.len()).collect();
            let accuracy: Vec<f64> = models
                .iter()
                .map(|&m| recorded.majority(&[m], &world.accuracy).unwrap_or(0.0))
                .collect();
            let soft = soft_all
                .as_ref()
                .and_then(|r| best_soft(&r.select(items), models.clone(), &accuracy));
            let (single, best) = single_and_vote(&recorded, models, &accuracy, 0);
            let name = |m: usize| world.models.get(m).cloned().unwrap_or_default();
            GroupGain {
                group: group.clone(),
                items: items.len(),
                single: (name(single), accuracy[single]),
                ensemble: (best.0.into_iter().map(name).collect(), best.1),
                soft: soft.map(|(m, a)| (m.into_iter().map(name).collect(), a)),
            }
        })
        .collect()
}

/// The markdown table of [`by_group`]'s gains.
pub fn group_table(gains: &[GroupGain]) -> String {
    let mut out = String::from(
        "| group | items | best single model | accuracy | best vote (2–5 models) | accuracy | gain (points) | best soft vote (2–5 models) | accuracy | soft gain (points) |\n|---|---:|---|---:|---|---:|---:|---|---:|---:|\n",
    );
    for g in gains {
        out.push_str(&format!(
            "| {} | {} | `{}` | {:.2} % | {} | {:.2} % | {:+.2} | {} |\n",
            g.group,
            g.items,
            g.single.0,
            g.single.1 * 100.0,
            members(&g.ensemble.0),
            g.ensemble.1 * 100.0,
            g.points(),
            soft_cells(g.soft.as_ref(), g.single.1),
        ));
    }
    out
}

/// The soft vote's three cells: members, accuracy, gain over the single model's `single`.
fn soft_cells(soft: Option<&(Vec<String>, f64)>, single: f64) -> String {
    soft.map_or("- | - | -".into(), |(m, a)| {
        format!(
            "{} | {:.2} % | {:+.2}",
            members(m),
            a * 100.0,
            (a - single) * 100.0
        )
    })
}

/// `a`, `b`: model names as the tables show them.
fn members(names: &[String]) -> String {
    names
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The markdown table.
pub fn table(gains: &[Gain]) -> String {
    let mut out = String::from(
        "| type | inference latency (µs) | best single model | accuracy | best ensemble (2–5 models) | accuracy | gain (points) | best soft vote (2–5 models) | accuracy | soft gain (points) |\n|---|---:|---|---:|---|---:|---:|---|---:|---:|\n",
    );
    for g in gains {
        out.push_str(&format!(
            "| {} | {:.0} | `{}` | {:.2} % | {} | {:.2} % | {:+.2} | {} |\n",
            g.constraint,
            g.latency_ms * 1000.0,
            g.single.0,
            g.single.1 * 100.0,
            members(&g.ensemble.0),
            g.ensemble.1 * 100.0,
            g.points(),
            soft_cells(g.soft.as_ref(), g.single.1),
        ));
    }
    let met = gains.iter().filter(|g| g.points() >= 1.0).count();
    let soft = gains
        .iter()
        .filter(|g| {
            g.soft
                .as_ref()
                .is_some_and(|(_, a)| (a - g.single.1) * 100.0 >= 1.0)
        })
        .count();
    out.push_str(&format!(
        "\n{met} of {} types gain at least 1.0 point with a majority, {soft} with a soft vote.\n",
        gains.len()
    ));
    out
}

/// Replaces the text between `<!-- ensemble-gain:start -->` and `<!-- ensemble-gain:end -->`
/// in `readme` (appends the block when the markers are missing).
pub fn splice(readme: &str, table: &str) -> String {
    splice_block(readme, "ensemble-gain", table)
}

/// Replaces the text between `<!-- NAME:start -->` and `<!-- NAME:end -->` in `readme`
/// (appends the block when the markers are missing).
pub fn splice_block(readme: &str, name: &str, table: &str) -> String {
    let (start, end) = (
        format!("<!-- {name}:start -->"),
        format!("<!-- {name}:end -->"),
    );
    let block = format!("{start}\n{table}{end}");
    match (readme.find(&start), readme.find(&end)) {
        (Some(s), Some(e)) if s < e => {
            format!("{}{block}{}", &readme[..s], &readme[e + end.len()..])
        }
        _ => format!("{readme}\n{block}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_replaces_only_its_block() {
        let readme = "intro\n<!-- ensemble-gain:start -->\nold\n<!-- ensemble-gain:end -->\nrest\n";
        let out = splice(readme, "new\n");
        assert_eq!(
            out,
            "intro\n<!-- ensemble-gain:start -->\nnew\n<!-- ensemble-gain:end -->\nrest\n"
        );
        assert_eq!(splice(&out, "new\n"), out, "idempotent");
    }

    #[test]
    fn the_zoos_gains_are_counted_on_the_recorded_answers() {
        let zoo = cocktail_common::Zoo::load(cocktail_common::Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "fashion").unwrap();
        let gains = gains(&world);
        assert_eq!(gains.len(), world.types.len());
        assert!(
            gains.iter().any(|g| g.soft.is_some()),
            "no soft vote scored"
        );
        for g in &gains {
            // The best single model is a candidate of the ensemble search: no negative gain.
            assert!(g.points() >= 0.0, "{g:?}");
            // The committed zoo has its vectors: a soft vote of two or more members
            // wherever two models fit.
            if let Some((members, _)) = &g.soft {
                assert!((2..=MAX_SIZE).contains(&members.len()), "{g:?}");
            }
            assert!((2..=MAX_SIZE).contains(&g.ensemble.0.len()) || g.points() == 0.0);
        }
    }
}
