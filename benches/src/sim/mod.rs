//! `cocktail sim`: a discrete-event simulator that runs the master's own policies
//! (selection and O2 from `policy::ensemble`, the batch vote, and the resource
//! controller's loop `policy::control` with its autoscalers and load predictors, through
//! `sim::fleet`) on a trace, in simulated time.
//!
//! What is real: every model's answer comes from the recorded predictions on the test
//! set, so ensemble accuracy is the accuracy the zoo would give; latencies per call come
//! from the measured profile; prices, Pf per instance type and the spot process come from
//! the catalog. What is modelled: the network hop (`hop_ms`), launch delays, spot
//! revocations (price above the bid, plus a chaos rate) and instance failures.
//!
//! Latency is end to end, as live: a request's answer is due `latency_ms` after it
//! arrives; members whose answers would come later are left out of the vote (unless none
//! of them is predicted to fit: then the request waits for their late answers), and the
//! request is an SLO violation when its answer comes after `latency_ms` or a member
//! missed. Cocktail's selection sees each model's predicted response time, its profiled
//! latency plus the overhead its pool measured ([`Cluster::predicted`]).

mod ask;
pub mod cluster;
mod config;
pub mod drift;
pub mod drift_bound;
pub mod drift_learnable;
mod drift_world;
mod fleet;
mod learner;
mod result;
mod schemes;
pub mod tuning;
mod world;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cocktail_policy::control::Control;
use cocktail_policy::ensemble::{WAITING_CHECK_S, targets_of};
use cocktail_policy::response;
use cocktail_policy::selection::Rule;
use cocktail_policy::voting::{self, ClassWeights, Voter};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;

use crate::traces::Arrivals;
use crate::workload;
use ask::Ballots;
use cluster::Cluster;
pub use config::{Autoscaler, Failure, LiveAnswer, NEARBY_ANSWERS, Scheme, SimConfig};
use fleet::{Event, Fleet, Timed};
pub use result::{ACCURACY_WINDOW, Bucket, Percentiles, SimResult, TypeResult, by_scheme};
use result::{Outcomes, Tally};
pub use schemes::infaas_choice;
use schemes::o2;
pub use world::World;

/// Runs every `(world, config)`, one at a time per core (rayon's pool), and returns their
/// results in the order given: each run is deterministic on its own, so the results are
/// the same bytes as one by one. `bar` counts the finished runs.
pub fn run_all(jobs: &[(&World, SimConfig)], bar: &indicatif::ProgressBar) -> Vec<SimResult> {
    crate::parallel::map_counted(jobs, Some(bar), |(world, config)| run(world, config, None))
}

/// The [`NEARBY_ANSWERS`] of `answers` (sorted by arrival) whose requests arrived
/// nearest `t_s` (all of them when there are fewer).
fn nearby(answers: &[LiveAnswer], t_s: f64) -> &[LiveAnswer] {
    let at = answers.partition_point(|a| a.at_s < t_s);
    let start = at
        .saturating_sub(NEARBY_ANSWERS / 2)
        .min(answers.len().saturating_sub(NEARBY_ANSWERS));
    answers
        .get(start..(start + NEARBY_ANSWERS).min(answers.len()))
        .unwrap_or(answers)
}

/// Runs one scheme on the trace. `progress` is set to the simulated second.
pub fn run(
    world: &World,
    config: &SimConfig,
    progress: Option<&indicatif::ProgressBar>,
) -> SimResult {
    let started = std::time::Instant::now();
    let mut rng = SmallRng::seed_from_u64(config.seed ^ 0x5EED);
    // Which constraint type and test item each request is: the load generator draws the
    // same sequence for the same seed.
    let mut requests = SmallRng::seed_from_u64(config.seed);
    // Its own stream, so that drawing these changes no other draw.
    let mut live_answers = SmallRng::seed_from_u64(config.seed ^ 0x0075_1DE5);
    let mut answers = config.live_answers.clone();
    answers.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let models = &world.candidates;
    let allowed: Vec<usize> = world
        .catalog
        .types
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            config.instance_types.is_empty() || config.instance_types.contains(&t.name)
        })
        .map(|(k, _)| k)
        .collect();
    let latency_ms: Vec<f64> = models.iter().map(|m| m.latency_ms).collect();
    let mut ensembles = schemes::initial_ensembles(world, config, &allowed);
    let cluster = Cluster::new(
        world.catalog.clone(),
        allowed,
        (&latency_ms, config.hop_ms, config.per_type_latency),
        world.packing.clone(),
        world.type_latency.clone(),
        config.seed,
    );
    // Every scheme votes by plain majority, which per-class weights do not touch.
    let no_weights = ClassWeights::seeded(&[], 0.0);
    let mut dropped: Vec<Vec<usize>> = vec![Vec::new(); world.types.len()];
    let mix = config.mix.cumulative(world.types.len());
    let shares: Vec<f64> = mix
        .iter()
        .scan(0.0, |prev, c| {
            let share = c - *prev;
            *prev = *c;
            Some(share)
        })
        .collect();
    let control_config = config.control();
    let predictor = config
        .predictor
        .build(control_config.steps_per_day(), control_config.lead_steps());
    let mut control = Control::new(control_config, predictor, 0.0);
    control.prime(&config.history);
    let duration = config.rates.len() as f64;
    let mut fleet = Fleet {
        cluster,
        events: BinaryHeap::new(),
        sequence: 0,
        launches: 0,
        launch_s: config.launch_s,
    };

    // Pools start sized for the first interval's load, ready at once (a warm start).
    let first_rate = config
        .rates
        .iter()
        .take(config.interval_s as usize)
        .sum::<f64>()
        / config.interval_s.min(duration).max(1.0);
    fleet.warm_start(world, config, &ensembles, &shares, first_rate);

    let mut latencies: Vec<f32> =
        Vec::with_capacity(config.rates.iter().sum::<f64>() as usize + 16);
    let mut all = Tally::default();
    let mut per_type = vec![Tally::default(); world.types.len()];
    let mut outcomes = vec![Outcomes::default(); world.types.len()];
    let mut overall = Outcomes::default();
    let mut bucket = Tally::default();
    let mut series = Vec::new();
    let mut violations = 0_u64;
    let mut failed = 0_u64;
    let mut degraded = 0_u64;
    let mut arrived = 0_u64;
    let mut vms_sum = 0.0;
    let mut vms_max = 0;
    // The spot market: revocations are looked for as often as the reactive check runs.
    let mut next_market = config.reactive_interval_s;
    let mut next_o2 = if config.o2_interval_requests.is_some() {
        f64::INFINITY
    } else {
        config.o2_interval_s
    };
    let mut since_o2 = vec![0_u64; world.types.len()];
    let mut next_bucket = config.bucket_s;
    let mut failure = config.failure;
    let deadline_s: Vec<f64> = world
        .types
        .iter()
        .map(|t| t.constraint.latency_ms / 1000.0)
        .collect();
    let grace_s = config.grace_ms / 1000.0;
    let mut members: Vec<usize> = Vec::new();
    let mut ballots = Ballots::default();
    // Requests are the test items selection does not estimate on (`World::recorded`).
    let (first_scored, items) = world.scored_items();
    let chaos = config.revocations_per_hour * config.reactive_interval_s / 3600.0;
    // Measured selection and tracking choose on every candidate's answers (the
    // master's shadow calls).
    let shadows = config.scheme == Scheme::Cocktail
        && matches!(config.selection.rule, Rule::Measured | Rule::Tracking);
    let tracking = config.scheme == Scheme::Cocktail && config.selection.rule == Rule::Tracking;
    // Cocktail's O1 takes a model it could not take as soon as it fits, checked between
    // O2's intervals as often as the master checks it.
    let waiting = config.scheme == Scheme::Cocktail && config.selection.rule == Rule::Cocktail;
    let mut waiting_checked = vec![0.0_f64; world.types.len()];
    let mut shadowed = 0_u64;
    let spot = config.scheme.spot();

    // A last pseudo-arrival at the end lets the final ticks (the last bucket) happen.
    for t in Arrivals::new(&config.rates, config.seed).chain(std::iter::once(duration)) {
        // Everything scheduled before this arrival.
        loop {
            let event_at = fleet.events.peek().map_or(f64::INFINITY, |Reverse(e)| e.0);
            let failure_at = failure.map_or(f64::INFINITY, |f| f.at_s);
            let next_control = control.next_due();
            let at = event_at
                .min(next_market)
                .min(next_control)
                .min(next_o2)
                .min(next_bucket)
                .min(failure_at);
            if at > t {
                break;
            }
            if at == event_at {
                if let Some(Reverse(Timed(_, _, event))) = fleet.events.pop() {
                    match event {
                        Event::Ready(id) => fleet.cluster.ready(id),
                        Event::End(id) => fleet.cluster.end(id, at),
                    }
                }
            } else if at == failure_at {
                if let Some(f) = failure.take() {
                    fleet.fail(f.fraction, at, &mut rng);
                }
            } else if at == next_market {
                next_market += config.reactive_interval_s;
                fleet.cluster.bill(at);
                let interruptions = fleet.revoke(world, at, chaos, &mut rng);
                if !interruptions.is_empty() {
                    let targets = targets_of(&ensembles, models.len());
                    fleet.control(
                        &mut control,
                        world,
                        &targets,
                        arrived,
                        interruptions,
                        at,
                        spot,
                    );
                }
            } else if at == next_control {
                let targets = targets_of(&ensembles, models.len());
                fleet.control(&mut control, world, &targets, arrived, Vec::new(), at, spot);
            } else if at == next_o2 {
                next_o2 += config.o2_interval_s;
                for (ensemble, dropped) in ensembles.iter_mut().zip(&mut dropped) {
                    o2(config, world, &fleet.cluster, ensemble, dropped, at);
                }
            } else {
                next_bucket += config.bucket_s;
                let counts = fleet.cluster.counts();
                let vms: usize = counts.iter().sum();
                vms_sum += vms as f64;
                vms_max = vms_max.max(vms);
                fleet.cluster.bill(at);
                let n = bucket.requests.max(1) as f64;
                series.push(Bucket {
                    t_s: at,
                    rate: bucket.requests as f64 / config.bucket_s,
                    models_per_request: bucket.models as f64 / n,
                    window_accuracy: overall.accuracy(),
                    cumulative_accuracy: all.correct as f64 / all.requests.max(1) as f64,
                    accuracy_met: bucket.met as f64 / n,
                    vms: counts,
                    cost: fleet.cluster.cost,
                });
                bucket = Tally::default();
                if let Some(bar) = progress {
                    bar.set_position(at as u64);
                }
            }
        }

        if t >= duration {
            break;
        }
        // The request.
        let (kind, item) = workload::draw(&mut requests, &mix, items);
        let item = first_scored + item;
        let (Some(ensemble), Some(&deadline), Some(&label)) = (
            ensembles.get_mut(kind),
            deadline_s.get(kind),
            world.labels.get(item),
        ) else {
            continue;
        };
        let label = usize::from(label);
        let outside_s = match nearby(&answers, t).choose(&mut live_answers) {
            Some(answer) => {
                fleet.cluster.set_hop_ms(answer.hop_ms);
                answer.outside_ms / 1e3
            }
            None => 0.0,
        };
        members.clear();
        members.extend_from_slice(&ensemble.members);
        let generation = ensemble.generation;
        // As live: when none of the members is predicted to answer in time, the request
        // waits for their late answers ([`response::wait_ms`]).
        let none_fits = members.iter().all(|m| !ensemble.pool.contains(m));
        let wait_s = response::wait_ms(deadline * 1e3, config.grace_ms, none_fits) / 1e3;
        let (finish, missed) = ballots.ask(
            &mut fleet.cluster,
            world,
            ensemble,
            &members,
            (item, t, t + deadline + grace_s, t + wait_s),
        );
        let voters: Vec<Voter<'_>> = ballots
            .cast
            .iter()
            .map(|(model, class)| Voter {
                model: *model,
                classes: class,
                probabilities: &[],
            })
            .collect();
        let outcome = voting::vote_batch(
            // Every scheme votes as the master does by default (the vote selection
            // estimates); the simulator has no probabilities for Clipper's average.
            voting::Scheme::Majority,
            &voters,
            1,
            &no_weights,
            &world.accuracy,
            world.classes,
        )
        .and_then(|o| Some((*o.class.first()?, *o.winning_votes.first()?)));
        let correct = outcome.is_some_and(|(class, _)| class == label);
        if let Some((class, winning_votes)) = outcome {
            ensemble.record(
                generation,
                &ballots.member_classes,
                class,
                winning_votes,
                label,
            );
            shadowed += 1;
            if shadows && shadowed.is_multiple_of(config.shadow_every.max(1)) {
                ensemble.remember(world.labelled(item, &ensemble.pool));
            }
        } else {
            failed += 1;
        }
        let latency = finish - t + outside_s;
        degraded += u64::from(missed && outcome.is_some());
        if outcome.is_none() || missed || latency > deadline + 1e-9 {
            violations += 1;
        }
        latencies.push((latency * 1000.0) as f32);
        let Some(window) = outcomes.get_mut(kind) else {
            continue;
        };
        window.push(correct);
        overall.push(correct);
        let met = window.accuracy() >= ensemble.constraint.accuracy;
        for tally in [&mut all, &mut bucket]
            .into_iter()
            .chain(per_type.get_mut(kind))
        {
            tally.requests += 1;
            tally.models += members.len() as u64;
            tally.correct += u64::from(correct);
            tally.met += u64::from(met);
        }
        arrived += 1;
        if tracking {
            ensemble.served(&fleet.cluster.predicted(&world.candidates, t));
        }
        if let Some(checked) = waiting_checked.get_mut(kind)
            && waiting
            && ensemble.waits()
            && t - *checked >= WAITING_CHECK_S as f64
        {
            *checked = t;
            let models = fleet.cluster.predicted(&world.candidates, t);
            ensemble.take_waiting(&models, Some(&world.recorded));
        }
        if let (Some(n), Some(count), Some(dropped)) = (
            config.o2_interval_requests,
            since_o2.get_mut(kind),
            dropped.get_mut(kind),
        ) {
            *count += 1;
            if *count >= n.max(1) {
                *count = 0;
                o2(config, world, &fleet.cluster, ensemble, dropped, t);
            }
        }
    }
    fleet.cluster.bill(duration);
    let used = targets_of(&ensembles, models.len());
    let ever: Vec<bool> = (0..models.len())
        .map(|p| {
            used.get(p).is_some_and(Option::is_some)
                || series.iter().any(|b| b.vms.get(p).is_some_and(|&v| v > 0))
        })
        .collect();
    let keep = |v: &Vec<usize>| -> Vec<usize> {
        v.iter()
            .zip(&ever)
            .filter(|(_, e)| **e)
            .map(|(c, _)| *c)
            .collect()
    };
    for b in &mut series {
        b.vms = keep(&b.vms);
    }
    let n = all.requests.max(1) as f64;
    let mut sorted = latencies.clone();
    SimResult {
        task: world.task.clone(),
        scheme: config.label(),
        autoscaler: config.autoscaler.name().to_owned(),
        mix: config.mix.name().to_owned(),
        importance_weights: config.importance_weights,
        failure: config.failure,
        requests: all.requests,
        failed,
        degraded,
        slo_violations: violations as f64 / n,
        latency_ms: Percentiles::of(&mut sorted),
        accuracy: all.correct as f64 / n,
        accuracy_met: all.met as f64 / n,
        models_per_request: all.models as f64 / n,
        cost: fleet.cluster.cost,
        vms_mean: vms_sum / series.len().max(1) as f64,
        vms_max,
        launches: fleet.launches,
        revocations: fleet.cluster.revocations,
        types: world
            .types
            .iter()
            .zip(&per_type)
            .map(|(t, tally)| {
                let n = tally.requests.max(1) as f64;
                TypeResult {
                    name: t.name.clone(),
                    latency_ms: t.constraint.latency_ms,
                    accuracy_target: t.constraint.accuracy,
                    requests: tally.requests,
                    models_per_request: tally.models as f64 / n,
                    accuracy: tally.correct as f64 / n,
                    accuracy_met: tally.met as f64 / n,
                }
            })
            .collect(),
        pools: world
            .models
            .iter()
            .zip(&ever)
            .filter(|(_, e)| **e)
            .map(|(m, _)| m.clone())
            .collect(),
        series,
        elapsed_s: started.elapsed().as_secs_f64(),
        latencies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Mix;
    use cocktail_common::Zoo;

    fn world() -> World {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        World::load(&zoo, "fashion").unwrap()
    }

    fn config(scheme: Scheme, seconds: usize, rate: f64) -> SimConfig {
        SimConfig::new(scheme, Mix::Strict, vec![rate; seconds], 3)
    }

    #[test]
    fn schemes_use_the_models_they_promise_and_runs_replay_for_a_seed() {
        let world = world();
        let infaas = run(&world, &config(Scheme::Infaas, 300, 20.0), None);
        let clipper = run(&world, &config(Scheme::Clipper, 300, 20.0), None);
        let cocktail = run(&world, &config(Scheme::Cocktail, 300, 20.0), None);
        assert!(infaas.requests > 5_000, "{}", infaas.requests);
        assert_eq!(infaas.models_per_request, 1.0);
        assert!(clipper.models_per_request > cocktail.models_per_request);
        // InFaaS answers with the constraint's own model: its accuracy is the recorded one.
        for t in &infaas.types {
            let model = world.types.iter().find(|w| w.name == t.name).unwrap().model;
            assert!((t.accuracy - world.accuracy[model]).abs() < 0.03, "{t:?}");
        }
        // Spot instances cost less than on-demand for the same kind of pools.
        assert!(cocktail.cost > 0.0 && cocktail.cost < clipper.cost);
        let again = run(&world, &config(Scheme::Cocktail, 300, 20.0), None);
        assert_eq!(
            (
                again.requests,
                again.accuracy,
                again.cost,
                again.models_per_request
            ),
            (
                cocktail.requests,
                cocktail.accuracy,
                cocktail.cost,
                cocktail.models_per_request
            )
        );
        assert_eq!(cocktail.series.len(), 5, "one bucket a minute");
    }

    #[test]
    fn live_samples_of_the_hop_and_the_outside_time_shape_the_latencies() {
        let answer = |hop_ms, outside_ms| LiveAnswer {
            at_s: 0.0,
            hop_ms,
            outside_ms,
        };
        let world = world();
        let constant = {
            let mut c = config(Scheme::Infaas, 60, 20.0);
            c.hop_ms = 2.0;
            run(&world, &c, None)
        };
        // Samples that are all one value: the same run as that value as a constant.
        let sampled = {
            let mut c = config(Scheme::Infaas, 60, 20.0);
            c.hop_ms = 2.0;
            c.live_answers = vec![answer(2.0, 0.0); 10];
            run(&world, &c, None)
        };
        assert_eq!(sampled.latencies, constant.latencies);
        // A time outside the member calls adds to each request's latency and nothing
        // else: the same answers, each 3 ms later.
        let outside = {
            let mut c = config(Scheme::Infaas, 60, 20.0);
            c.hop_ms = 2.0;
            c.live_answers = vec![answer(2.0, 3.0)];
            run(&world, &c, None)
        };
        assert_eq!(outside.accuracy, constant.accuracy);
        for (o, c) in outside.latencies.iter().zip(&constant.latencies) {
            assert!((o - c - 3.0).abs() < 1e-3, "{o} vs {c}");
        }
        // A spread of hops spreads the latencies around the same middle.
        let spread = {
            let mut c = config(Scheme::Infaas, 60, 20.0);
            c.hop_ms = 2.0;
            c.live_answers = vec![answer(1.0, 0.0), answer(2.0, 0.0), answer(3.0, 0.0)];
            run(&world, &c, None)
        };
        assert!(spread.latency_ms.p99 > constant.latency_ms.p99 + 0.5);
        assert!(spread.latency_ms.min < constant.latency_ms.min - 0.5);
    }

    #[test]
    fn a_request_whose_members_all_answer_late_takes_the_first_late_answer_as_live() {
        // The constraint types give each model its inference plus 0.5 ms; a hop of 5 ms
        // makes every answer late, and each request is still answered, by its one
        // member's late answer (cocktail_master::serving::failover::gather), where the
        // simulator used to lose the vote (sim_vs_live in CI: 0.05 accuracy met against
        // 0.83 live).
        let world = world();
        let late = {
            let mut c = config(Scheme::Infaas, 300, 20.0);
            c.hop_ms = 5.0;
            run(&world, &c, None)
        };
        assert_eq!(late.failed, 0, "{late:?}");
        assert!((late.slo_violations - 1.0).abs() < 1e-9, "{late:?}");
        for t in &late.types {
            let model = world.types.iter().find(|w| w.name == t.name).unwrap().model;
            assert!((t.accuracy - world.accuracy[model]).abs() < 0.03, "{t:?}");
        }
        // Answered when the late answer came: after its inference and the hop.
        assert!(late.latency_ms.min > 5.0, "{:?}", late.latency_ms);
    }

    #[test]
    fn failures_are_replaced_and_load_is_followed() {
        let world = world().with_latency_scale(100.0);
        let mut rates = vec![200.0; 600];
        rates.extend(vec![2000.0; 900]);
        let mut c = SimConfig::new(Scheme::Cocktail, Mix::Strict, rates, 5);
        c.failure = Some(Failure {
            at_s: 1200.0,
            fraction: 0.5,
        });
        let r = run(&world, &c, None);
        let vms = |minute: usize| {
            r.series
                .get(minute)
                .map_or(0, |b| b.vms.iter().sum::<usize>())
        };
        assert!(
            vms(20) > vms(5),
            "scaled out for the step: {} -> {}",
            vms(5),
            vms(20)
        );
        assert!(r.launches as usize > vms(5));
        assert!(r.accuracy > 0.8, "{}", r.accuracy);
        // No weights: every pool sized for all requests, so more instances.
        let mut unweighted = SimConfig::new(Scheme::Cocktail, Mix::Strict, vec![2000.0; 900], 5);
        unweighted.importance_weights = false;
        let weighted = SimConfig {
            importance_weights: true,
            ..unweighted.clone()
        };
        assert!(run(&world, &unweighted, None).vms_mean > run(&world, &weighted, None).vms_mean);
    }

    #[test]
    fn capacity_the_forecast_no_longer_needs_goes_and_reactive_waits_for_the_timeout() {
        // 1,000 req/s for 10 minutes, then 100, on models slow enough (1,000×) that pools
        // need several instances: packing leaves the spare instances idle, the predictive
        // autoscaler releases them once its forecast has settled, the reactive one only
        // after they idled for the 10-minute recycling timeout.
        let world = world().with_latency_scale(1000.0);
        let mut rates = vec![1000.0; 600];
        rates.extend(vec![100.0; 1500]);
        let run_with = |autoscaler| {
            let mut c = SimConfig::new(Scheme::Cocktail, Mix::Strict, rates.clone(), 7);
            c.autoscaler = autoscaler;
            run(&world, &c, None)
        };
        let vms = |r: &SimResult, minute: usize| {
            r.series
                .get(minute)
                .map_or(0, |b| b.vms.iter().sum::<usize>())
        };
        let cocktail = run_with(Autoscaler::Cocktail);
        let reactive = run_with(Autoscaler::Reactive);
        let total: Vec<usize> = (0..cocktail.series.len())
            .map(|m| vms(&cocktail, m))
            .collect();
        assert!(vms(&cocktail, 9) > vms(&cocktail, 20) + 3, "{total:?}");
        assert!(
            vms(&reactive, 18) > vms(&cocktail, 18),
            "reactive {} vs cocktail {} at minute 18",
            vms(&reactive, 18),
            vms(&cocktail, 18)
        );
        assert!(cocktail.cost < reactive.cost);
    }
}
