//! The autoscaling study's live check (issue 20, point 5): the Cocktail autoscaler on the
//! live system, with `cocktail loadgen`'s arrivals on a short, scaled-down Wikipedia-like
//! day, costs what the simulator says the same run costs (within 10 %) at the same SLO
//! violations (within 2 points).
//!
//! Scaled down: one instance type (c5a.xlarge, emulated 10,000 times slower than
//! modelled, so that a fashion model takes 40–670 ms, as in the papers, and `resnet`'s
//! pool needs several instances at 8 requests per second), the controller's periods in
//! seconds instead of minutes, and a day of load in four minutes. Both runs see the same
//! arrivals, the same models' latencies and packing factors, the same spot prices (the
//! same seed), the same control loop and O1's ensembles (O2 held: [`INTERVAL_REQUESTS`]),
//! and the simulator draws each request's hop and time outside the member calls from the
//! live answers sent about the same time; what differs is that the live one really
//! launches workers, sends real requests and measures its own usage. It runs in CI
//! (about five minutes).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::sync::Arc;
use std::time::Duration;

use cocktail_benches::loadgen::{self, LoadgenConfig};
use cocktail_benches::sim::{self, LiveAnswer, Scheme, SimConfig, World};
use cocktail_benches::traces;
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use cocktail_policy::autoscale::AutoscaleConfig;
use cocktail_tests::cluster::Cluster;
use cocktail_tests::zoo_manifest;
use serde_json::Value;

const SEED: u64 = 11;
/// Slow enough that the hop (master, network, worker outside inference) sits far from
/// every target's slack. At 1,000 times, the models' slack under their targets was
/// 1.0 ms (`linear`, `const1`), 4.1 (`resnet`, `const3`), 8.3 (`mlp_med`, `const2`),
/// 10.4, 14.5 and 26.4 ms (`resnet`, `const4`), and the hop at the 90th percentile of a
/// pool's calls measured 5–7 ms on a quiet machine, 12 ms in one CI run and 23–28 ms in
/// another: a choice near one of them flipped with the hop's noise, live and simulated
/// apart, and failed runs cost 0.79–1.13x the simulated. At 10,000 times the first slack
/// that matters is `resnet`'s in `const3`, 41 ms; the simulator gives the same ensembles
/// and cost at a 5 ms hop as at 30 ms.
const SCALE: f64 = 10_000.0;
const TYPE: &str = "c5a.xlarge";
/// At 16, as before at 1,000 times, `resnet` would need up to 12 instances.
const MEAN_RATE: f64 = 8.0;
/// Seconds of steady load before the measured run: the cold start (every pool at its
/// minimum until the first ensembles are chosen) is not part of the comparison.
const WARM_UP_S: usize = 60;
/// Seconds the day is squeezed into.
const RUN_S: usize = 240;
const INTERVAL_S: f64 = 10.0;
const REACTIVE_S: f64 = 5.0;
const HORIZON_S: f64 = 30.0;
const WINDOW_S: f64 = 30.0;
const IDLE_S: f64 = 30.0;
const LAUNCH_MS: u64 = 2000;
/// O2's interval, in requests of a constraint: longer than the run, so both runs keep O1's
/// ensembles and what is compared is the autoscaling. `const2`'s target (0.88) sits at
/// `mlp_med`'s accuracy (0.8856), so whether a window of 200 labels falls short of it,
/// and O2 adds two members, is a coin flip the live and simulated runs toss apart: with
/// O2 every 200 requests, one run here added `dwsep` and `cnn_small` live (1.73 models
/// per request) and none simulated, and cost 1.13x the simulated at the same SLO
/// violations (0.078 and 0.077). `sim_vs_live` compares O2 live and simulated. O1 still
/// takes, as soon as they fit, the models a choice made while the cluster started could
/// not take (`Ensemble::take_waiting`, checked between intervals).
const INTERVAL_REQUESTS: u64 = 1_000_000;

/// What the live master's instances have cost so far, per pool.
async fn live_cost(cluster: &Cluster) -> (f64, Value) {
    let cost = cluster.get("/v1/cost").await;
    (cost["total"].as_f64().unwrap(), cost["pools"].clone())
}

/// Per pool that launched more than its first instance, as the simulator's `instances`
/// line: the instances it launched, how many were spot, and the most up at once.
fn live_instances(list: &Value) -> Vec<String> {
    let instances = list["instances"].as_array().unwrap();
    let mut models: Vec<&str> = instances
        .iter()
        .map(|i| i["model"].as_str().unwrap())
        .collect();
    models.sort_unstable();
    models.dedup();
    models
        .into_iter()
        .filter_map(|model| {
            let pool: Vec<&Value> = instances.iter().filter(|i| i["model"] == model).collect();
            let spot = pool.iter().filter(|i| i["spot"] == true).count();
            // Launches count up and terminations down, in time order.
            let mut events: Vec<(f64, i32)> = pool
                .iter()
                .flat_map(|i| {
                    let up = (i["launched_at"].as_f64().unwrap(), 1);
                    let down = i["terminated_at"].as_f64().map(|t| (t, -1));
                    std::iter::once(up).chain(down)
                })
                .collect();
            events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let peak = events
                .iter()
                .scan(0, |up, (_, step)| {
                    *up += step;
                    Some(*up)
                })
                .max()
                .unwrap_or(0);
            (pool.len() > 1).then(|| {
                format!(
                    "{model}: {} launched ({spot} spot), peak {peak}",
                    pool.len()
                )
            })
        })
        .collect()
}

/// `model`'s live instances up (launched, not yet terminated) at the end of each
/// `bucket_s` of the run that started at `started_s` (Unix seconds), as the simulator's
/// series counts them (booting included).
fn live_timeline(list: &Value, model: &str, started_s: f64, bucket_s: f64, n: usize) -> Vec<usize> {
    let pool: Vec<&Value> = list["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["model"] == model)
        .collect();
    (1..=n)
        .map(|k| {
            let t = started_s + k as f64 * bucket_s;
            pool.iter()
                .filter(|i| {
                    i["launched_at"].as_f64().unwrap() <= t
                        && i["terminated_at"].as_f64().is_none_or(|end| end > t)
                })
                .count()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_autoscaler_costs_what_the_simulated_one_costs() {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let mut rates = vec![MEAN_RATE; WARM_UP_S];
    let day = 86_400.0 / RUN_S as f64;
    let mut run = traces::generate("wiki", RUN_S, MEAN_RATE, day, SEED).unwrap();
    traces::scale_to(&mut run, MEAN_RATE);
    rates.extend(run);

    let scale = SCALE.to_string();
    let (interval, reactive, horizon, window, idle) = (
        INTERVAL_S.to_string(),
        REACTIVE_S.to_string(),
        HORIZON_S.to_string(),
        WINDOW_S.to_string(),
        IDLE_S.to_string(),
    );
    let (launch, o2, seed) = (
        LAUNCH_MS.to_string(),
        INTERVAL_REQUESTS.to_string(),
        SEED.to_string(),
    );
    // No --models: every zoo pool is managed, and kept only while an ensemble uses it.
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--instance-types",
            TYPE,
            "--emulate-types",
            "--emulate-scale",
            &scale,
            "--max-threads",
            "1",
            "--controller-interval-s",
            &interval,
            "--reactive-interval-s",
            &reactive,
            "--horizon-s",
            &horizon,
            "--importance-window-s",
            &window,
            "--idle-timeout-s",
            &idle,
            "--provisioning-delay-ms",
            &launch,
            "--interval-requests",
            &o2,
            "--pseudo-label-every",
            "0",
            "--seed",
            &seed,
        ],
        &[],
    )
    .await;

    let types = loadgen::types_for(&zoo, "fashion", SCALE).unwrap();
    let (inputs, labels) = loadgen::inputs(&zoo, "fashion").unwrap();
    let config = LoadgenConfig {
        url: cluster.master.url.clone(),
        task: "fashion".into(),
        rates: rates.clone(),
        mix: Mix::Strict,
        seed: SEED,
        grace_ms: 0.0,
        max_in_flight: 512,
        timeout: Duration::from_secs(30),
        admin_token: None,
        api_key: None,
        drift: None,
        // As a standard client: the first requests come before any worker of the task
        // is up (every pool is launched when an ensemble first needs it), and the master
        // refuses them with `Retry-After: 1`. Taken as answers, those 2-11 refusals were
        // misses in the accuracy-met window the simulator, which has no refusal, did not
        // count (const2: 34 % live against 69 % simulated).
        retry_refused: true,
    };
    let started_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let load = tokio::spawn(async move {
        loadgen::run(&config, &types, Arc::new(inputs), Arc::new(labels), None).await
    });
    tokio::time::sleep(Duration::from_secs(WARM_UP_S as u64)).await;
    let (cost_before, _) = live_cost(&cluster).await;
    let live = load.await.unwrap().unwrap();
    let (cost_after, live_pools) = live_cost(&cluster).await;
    let live_cost = cost_after - cost_before;

    // The live master's predicted response times and what they count on top of inference,
    // and the ensembles it ended with.
    let models = cocktail_tests::cluster::task_models(&cluster, "fashion").await;
    let ensembles = cluster.get("/v1/ensembles").await;
    let overheads: Vec<String> = models
        .iter()
        .filter(|m| !m["overhead_ms"].is_null())
        .map(|m| {
            format!(
                "{}: overhead {} ms, predicted {} ms",
                m["name"], m["overhead_ms"], m["predicted_ms"]
            )
        })
        .collect();
    let world = World::load(&zoo, "fashion")
        .unwrap()
        .with_latency_scale(SCALE);
    let mut sim_config = SimConfig::new(Scheme::Cocktail, Mix::Strict, rates, SEED);
    sim_config.instance_types = vec![TYPE.to_owned()];
    sim_config.interval_s = INTERVAL_S;
    sim_config.reactive_interval_s = REACTIVE_S;
    sim_config.horizon_s = HORIZON_S;
    sim_config.importance_window_s = WINDOW_S;
    sim_config.launch_s = LAUNCH_MS as f64 / 1000.0;
    sim_config.o2_interval_requests = Some(INTERVAL_REQUESTS);
    sim_config.revocations_per_hour = 0.0;
    sim_config.bucket_s = INTERVAL_S;
    // Each simulated request takes one live answer's hop and time outside the member
    // calls, drawn at random among those sent about the same time (a constant hop made
    // no call late that did not queue: live, the hop's spread makes some answers late on
    // targets their pools meet at the 90th percentile; and the cold start's hops are
    // slower than the rest). An answer's hop is its wait for the members less its
    // slowest voter's inference on the type.
    let on_type = world
        .catalog
        .types
        .iter()
        .position(|t| t.name == TYPE)
        .unwrap();
    let inference_ms = |model: &str| {
        let m = world.models.iter().position(|n| n == model)?;
        world.type_latency.get(m)?.get(on_type).copied()
    };
    sim_config.live_answers = live
        .times
        .iter()
        .filter_map(|t| LiveAnswer::from_times(t, inference_ms))
        .collect();
    assert!(
        sim_config.live_answers.len() as f64 > 0.95 * live.answered as f64,
        "{} answers' times of {}",
        sim_config.live_answers.len(),
        live.answered
    );
    // The hop selection assumes before a pool has measured any: the median of the
    // overheads the live master measured on the pools its ensembles ended with (each a
    // 90th percentile of the pool's calls), what its own selection counted on top of
    // inference. Not the answers' median hop, a 50th percentile: that fell to 4.04 ms in
    // a CI run, under `resnet`'s 4.1 ms of slack in `const3`'s target, so the simulator
    // started `const3` on `resnet`, whose calls were then late by the hop's spread,
    // while the live pools measured 5.1-5.5 ms and `const3` stayed on `cnn_k5` (cost
    // 0.88x the simulated).
    let used: Vec<&Value> = ensembles["ensembles"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["members"].as_array().unwrap())
        .collect();
    let mut measured: Vec<f64> = models
        .iter()
        .filter(|m| used.contains(&&m["name"]))
        .filter_map(|m| m["overhead_ms"].as_f64())
        .collect();
    assert!(!measured.is_empty(), "no overhead measured on {used:?}");
    let hop_ms = cocktail_benches::stats::median(&mut measured);
    sim_config.hop_ms = hop_ms;
    let mut hops: Vec<f64> = sim_config.live_answers.iter().map(|a| a.hop_ms).collect();
    let answers_hop_ms = cocktail_benches::stats::median(&mut hops);
    // The workers emulate their type: calls take the model's latency on it.
    sim_config.per_type_latency = true;
    sim_config.autoscale = AutoscaleConfig {
        idle_timeout_s: IDLE_S,
        ..AutoscaleConfig::default()
    };
    let simulated = sim::run(&world, &sim_config, None);
    let cost_at = |t: f64| {
        simulated
            .series
            .iter()
            .rfind(|b| b.t_s <= t + 1e-6)
            .map_or(0.0, |b| b.cost)
    };
    let sim_cost = simulated.cost - cost_at(WARM_UP_S as f64);
    // Pool `p`'s simulated instances at the end of each interval.
    let sim_up = |p: usize| -> Vec<usize> {
        simulated
            .series
            .iter()
            .map(|b| b.vms.get(p).copied().unwrap_or(0))
            .collect()
    };
    let sim_instances: Vec<String> = simulated
        .pools
        .iter()
        .enumerate()
        .map(|(p, model)| {
            let peak = sim_up(p).into_iter().max().unwrap_or(0);
            format!("{model}: peak {peak}")
        })
        .collect();

    eprintln!(
        "live: {} requests, cost ${live_cost:.5}, SLO violations {:.4}, models/request {:.3}, accuracy met {:.4}, errors by status {:?} (the first: {:?})\n      pools {live_pools}\n      models {overheads:?}\nsim:  {} requests, cost ${sim_cost:.5}, SLO violations {:.4}, models/request {:.3}, accuracy met {:.4} (hop {hop_ms:.3} ms; answers' median {answers_hop_ms:.3})\n      instances {sim_instances:?}",
        live.sent,
        live.slo_violations,
        live.models_per_request,
        live.accuracy_met,
        live.errors,
        live.first_error,
        simulated.requests,
        simulated.slo_violations,
        simulated.models_per_request,
        simulated.accuracy_met,
    );
    // Per constraint type, live (the load generator's table) and simulated, and the
    // ensembles the live master ended with.
    eprintln!("{}", loadgen::markdown(&live));
    let instances = cluster.get("/v1/instances").await;
    eprintln!("live instances: {:?}", live_instances(&instances));
    // Each pool the simulator launched for, up per interval, live and simulated: where
    // the costs part.
    for (p, model) in simulated.pools.iter().enumerate() {
        let simulated_up = sim_up(p);
        if simulated_up.iter().all(|&n| n <= 1) {
            continue;
        }
        let live_up = live_timeline(&instances, model, started_s, INTERVAL_S, simulated_up.len());
        eprintln!("{model} up per {INTERVAL_S} s:\n  live {live_up:?}\n  sim  {simulated_up:?}");
    }
    eprintln!(
        "{}",
        cocktail_benches::report::types_markdown(std::slice::from_ref(&simulated))
    );
    for e in ensembles["ensembles"].as_array().unwrap() {
        eprintln!("live {}: {}", e["key"], e["members"]);
    }
    let arrivals = live.sent as f64 / simulated.requests as f64;
    assert!(
        (0.97..=1.03).contains(&arrivals),
        "arrivals: live {} vs sim {}",
        live.sent,
        simulated.requests
    );
    let ratio = live_cost / sim_cost;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "cost: live ${live_cost:.5} vs sim ${sim_cost:.5} ({ratio:.3}×)"
    );
    assert!(
        (live.slo_violations - simulated.slo_violations).abs() <= 0.02,
        "SLO violations: live {} vs sim {}",
        live.slo_violations,
        simulated.slo_violations
    );
    // As in the simulator, no pool of the other task is kept once ensembles are chosen.
    let sentiment: Vec<String> = zoo
        .models_for("sentiment")
        .map(|m| m.name.clone())
        .collect();
    let left: Vec<&Value> = instances["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| {
            sentiment.iter().any(|m| i["model"] == m.as_str()) && i["status"] != "terminated"
        })
        .collect();
    assert!(left.is_empty(), "sentiment instances still up: {left:?}");
}
