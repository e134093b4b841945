//! The baselines' model choices (Cocktail §5.1) and each scheme's interval step.

use cocktail_policy::ensemble::Ensemble;
use cocktail_policy::selection::{self, Candidate, Constraint, Rule};
use cocktail_policy::tracking::TrackingConfig;
use cocktail_policy::{estimate, response};

use super::World;
use super::cluster::Cluster;
use super::config::{Scheme, SimConfig};

/// Each constraint type's first ensemble under the scheme: Cocktail's O1, InFaaS's one
/// model, or every candidate (Clipper, Clipper-X), on the predicted response times as the
/// live master sees them at its first request: each pool's first worker has registered,
/// so inference is the model's latency on the instance type it runs on (with
/// `per_type_latency`, the fastest of the `allowed` catalog types; else the profile's),
/// plus the hop its readiness probe measured.
pub(super) fn initial_ensembles(
    world: &World,
    config: &SimConfig,
    allowed: &[usize],
) -> Vec<Ensemble> {
    let inference: Vec<Option<f64>> = if config.per_type_latency {
        world
            .type_latency
            .iter()
            .map(|per_type| {
                allowed
                    .iter()
                    .filter_map(|&k| per_type.get(k).copied())
                    .min_by(f64::total_cmp)
            })
            .collect()
    } else {
        Vec::new()
    };
    let models = &response::predicted(&world.candidates, &inference, &[], Some(config.hop_ms));
    world
        .types
        .iter()
        .map(|t| {
            let c = t.constraint;
            match config.scheme {
                Scheme::Cocktail => {
                    let members = selection::initial_or_feasible(
                        models,
                        &world.candidates,
                        &c,
                        Some(&world.recorded),
                    );
                    let mut ensemble = Ensemble::new(models, c, members, 0);
                    if config.selection.rule == Rule::Tracking {
                        // The simulator votes by majority (`sim::run`).
                        ensemble.track(TrackingConfig::serving(
                            estimate::Rule::Majority,
                            config.o2_interval_requests,
                            config.knobs,
                        ));
                    }
                    ensemble
                }
                Scheme::Infaas => Ensemble::new(models, c, vec![infaas_choice(models, &c)], 0),
                Scheme::Clipper | Scheme::ClipperX => {
                    let mut all = selection::candidates(models, &c);
                    if all.is_empty() {
                        all.push(infaas_choice(models, &c));
                    }
                    Ensemble::new(models, c, all, 0)
                }
            }
        })
        .collect()
}

/// InFaaS's choice: the fastest model meeting the accuracy within the latency; else the
/// fastest meeting the accuracy at all; else the most accurate within the latency.
pub fn infaas_choice(models: &[Candidate], c: &Constraint) -> usize {
    let within = selection::candidates(models, c);
    let fastest = |it: &mut dyn Iterator<Item = usize>| {
        it.min_by(|&a, &b| models[a].latency_ms.total_cmp(&models[b].latency_ms))
    };
    fastest(
        &mut within
            .iter()
            .copied()
            .filter(|&i| models[i].accuracy >= c.accuracy),
    )
    .or_else(|| {
        fastest(
            &mut (0..models.len())
                .filter(|&i| models[i].accuracy >= c.accuracy && models[i].latency_ms.is_finite()),
        )
    })
    .or_else(|| {
        within
            .iter()
            .copied()
            .max_by(|&a, &b| models[a].accuracy.total_cmp(&models[b].accuracy))
    })
    .unwrap_or(0)
}

/// Clipper-X's step: drop the member right least often while the window beats the
/// target; put the last dropped one back when it falls below.
pub(super) fn clipper_x_step(
    models: &[Candidate],
    ensemble: &mut Ensemble,
    dropped: &mut Vec<usize>,
    margin: f64,
) {
    let window = ensemble.window();
    let Some(accuracy) = window.accuracy() else {
        return;
    };
    let target = ensemble.constraint.accuracy;
    let members = ensemble.members.clone();
    if accuracy >= target + margin && members.len() > 1 {
        let worst = members
            .iter()
            .enumerate()
            .min_by(|&(a, ma), &(b, mb)| {
                let correct = |slot: usize| window.member_correct.get(slot).copied().unwrap_or(0);
                correct(a)
                    .cmp(&correct(b))
                    .then(models[*ma].accuracy.total_cmp(&models[*mb].accuracy))
            })
            .map(|(slot, _)| slot);
        if let Some(slot) = worst {
            let mut kept = members;
            dropped.push(kept.remove(slot));
            let generation = ensemble.generation + 1;
            ensemble.replace(kept, generation);
            return;
        }
    }
    if accuracy < target
        && let Some(back) = dropped.pop()
    {
        let mut grown = members;
        grown.push(back);
        let generation = ensemble.generation + 1;
        ensemble.replace(grown, generation);
        return;
    }
    let generation = ensemble.generation;
    ensemble.replace(members, generation); // a new window
}

/// The end of a constraint type's interval: Cocktail's O2 (on the response times the
/// cluster measured), or Clipper-X's step.
pub(super) fn o2(
    config: &SimConfig,
    world: &World,
    cluster: &Cluster,
    ensemble: &mut Ensemble,
    dropped: &mut Vec<usize>,
    now: f64,
) {
    match config.scheme {
        Scheme::Cocktail => {
            let models = cluster.predicted(&world.candidates, now);
            ensemble.revisit(&models, &config.selection, Some(&world.recorded));
        }
        Scheme::ClipperX => clipper_x_step(
            &world.candidates,
            ensemble,
            dropped,
            config.selection.accuracy_margin,
        ),
        Scheme::Infaas | Scheme::Clipper => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Mix;
    use cocktail_common::Zoo;

    #[test]
    fn first_ensembles_see_the_instance_type_the_pools_run_on() {
        // At 1,000x a type's target is its model's profiled time plus 0.5 ms, so with a
        // 1 ms hop no type's own model fits on its profile and O1 starts from ensembles of
        // faster models. On c5a.xlarge the same models take a third to a half of their
        // profile, and a single model serves every type, as the live master sees it once
        // each pool's first worker has registered.
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "fashion")
            .unwrap()
            .with_latency_scale(1000.0);
        let c5a = world
            .catalog
            .types
            .iter()
            .position(|t| t.name == "c5a.xlarge")
            .unwrap();
        let mut config = SimConfig::new(Scheme::Cocktail, Mix::Strict, vec![16.0; 10], 1);
        config.hop_ms = 1.0;
        let on_profile = initial_ensembles(&world, &config, &[c5a]);
        config.per_type_latency = true;
        let on_type = initial_ensembles(&world, &config, &[c5a]);
        for ((t, profiled), typed) in world.types.iter().zip(&on_profile).zip(&on_type) {
            assert_eq!(typed.members.len(), 1, "{}: {:?}", t.name, typed.members);
            if t.name != "const1" {
                assert!(
                    profiled.members.len() > 1,
                    "{}: {:?}",
                    t.name,
                    profiled.members
                );
            }
        }
    }
}
