//! The simulator against the live system: the same short trace, seed and constraint mix
//! through a real master with real workers (driven by the load generator) and through
//! `cocktail sim` agree on accuracy met within 3 points (issue 14, point 7) and on models
//! per request within 10 % (issue 6). Accuracy met is a threshold on a sliding window
//! whose accuracy sits near the target, so a few answers completing in another order
//! move it by a point or two while accuracy itself agrees to a few items.
//!
//! Latency targets are end to end (issue 14). The simulator is given what live answers
//! took: each request draws one live answer, whose wait for members (less its slowest
//! member's profiled inference) is the hop of its member calls and whose time outside
//! them (the client's hop and the master's own work) adds to its latency; both run the
//! default deadline grace (none).
//! The first test uses the simulator's constraint types (profiled inference plus
//! 0.5 ms), which no answer meets in a debug build on a shared 2-core machine: both
//! choose on the profiles alone (the live master once every pool's calls are measured)
//! and count every answer late. The second
//! uses types made feasible on the measured hop, where deadlines bind, and compares
//! SLO violations and latency as well.

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
use cocktail_benches::stats;
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use cocktail_tests::cluster::Cluster;
use cocktail_tests::load;
use cocktail_tests::zoo_manifest;
use serde_json::json;

/// Every fashion model that is a candidate of some constraint type (all but `vgg`,
/// slower than the slowest type's 0.2 ms).
const MODELS: &[&str] = &[
    "linear",
    "mlp_tiny",
    "dwsep",
    "cnn_tiny",
    "mlp_small",
    "lenet",
    "cnn_small",
    "resnet",
    "cnn_k5",
    "cnn_shift",
    "mlp_med",
    "cnn_wide",
    "cnn_med",
    "cnn_bag_a",
    "mlp_large",
];

const SEED: u64 = 11;
const INTERVAL_REQUESTS: u64 = 300;

/// One trace through the live system and through the simulator, on the same constraint
/// types.
struct Pair {
    live: loadgen::LoadReport,
    simulated: sim::SimResult,
    hop_ms: f64,
}

impl Pair {
    fn print(&self) {
        let (live, simulated) = (&self.live, &self.simulated);
        eprintln!(
            "live: {} requests, accuracy met {:.4}, models/request {:.3}, accuracy {:.4}, SLO violations {:.4}, latency p50 {:.3} p90 {:.3} p99 {:.3} ms\nsim:  {} requests, accuracy met {:.4}, models/request {:.3}, accuracy {:.4}, SLO violations {:.4}, latency p50 {:.3} p90 {:.3} p99 {:.3} ms (median hop {:.3} ms, {} samples)",
            live.sent,
            live.accuracy_met,
            live.models_per_request,
            live.accuracy,
            live.slo_violations,
            live.latency_ms.p50,
            live.latency_ms.p90,
            live.latency_ms.p99,
            simulated.requests,
            simulated.accuracy_met,
            simulated.models_per_request,
            simulated.accuracy,
            simulated.slo_violations,
            simulated.latency_ms.p50,
            simulated.latency_ms.p90,
            simulated.latency_ms.p99,
            self.hop_ms,
            live.times.len(),
        );
        for (l, s) in live.types.iter().zip(&simulated.types) {
            eprintln!("  {l:?}\n  {s:?}");
        }
    }

    /// What both tests check: the same arrivals, no failed request, accuracy met within
    /// 3 points, SLO violations within 5 and models per request within 10 %.
    fn check_agreement(&self) {
        let (live, simulated) = (&self.live, &self.simulated);
        load::assert_agrees(
            live,
            simulated.requests,
            simulated.accuracy_met,
            simulated.models_per_request,
        );
        assert!(
            (live.slo_violations - simulated.slo_violations).abs() <= 0.05,
            "SLO violations: live {} vs sim {}",
            live.slo_violations,
            simulated.slo_violations
        );
    }
}

/// One live run at a time: the deadlines test sets its targets on the hop it measures,
/// and with the other test's cluster on the same two cores that hop need not be the one
/// its own run then meets (in a CI run here on 2026-12-01, with both at once: targets of
/// 6.7-6.9 ms and 4 % of the answers late, where the test needs 10 to 90 %).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Calls each pool a few times, pinned (`parameters.models`), so that the live master's
/// first selections count overheads it measured on member calls, as the simulator's
/// count the live hops' median. Before any call, the master counts its readiness probes'
/// round trip for every pool: in a debug build here 0.60-0.64 ms where member calls
/// took 1.1-1.2 ms over their inference, and on targets of a model's inference plus
/// 0.5 ms that made quick models seem in time and slower ones not. Four runs on
/// 2026-12-07 failed so: the live O1 gave `const5` (0.7014 ms, 92 %) a vote of six quick
/// models (in one, a less accurate single model), each request then voted by whichever
/// answered first, late, where the simulator, predicting nothing in time, chose on
/// inference alone (accuracy met 0.69-0.74 live against 0.83 simulated). Measured first, five runs passed: the live O1
/// chose `resnet` for every type, and in the two that printed, accuracy met 0.8291 on
/// both sides.
async fn measure_every_pool(cluster: &Cluster) {
    for model in MODELS {
        for variant in 0..8 {
            let mut request = load::image(1000.0, variant);
            request["parameters"]["models"] = (*model).into();
            let (status, answer) = cluster.post("/v2/models/fashion/infer", &request).await;
            assert_eq!(status, 200, "{model}: {answer}");
            // A member call of the model's own, not the answer cache's.
            let made = &answer["parameters"];
            assert_eq!(made["models"], json!([model]), "{answer}");
            assert_eq!(made["cache_hit"], false, "{answer}");
        }
    }
}

/// Runs `rates` with `seed` through a fresh cluster of [`MODELS`] and the simulator; the
/// constraint types are the simulator's (`feasible` false) or those the load generator
/// makes feasible on the cluster's measured hop ([`loadgen::types_from_master`]).
async fn pair(rates: Vec<f64>, feasible: bool) -> Pair {
    let _turn = ONE_AT_A_TIME.lock().await;
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let interval = INTERVAL_REQUESTS.to_string();
    let cluster = Cluster::start(&["--interval-requests", &interval], MODELS).await;
    let config = LoadgenConfig {
        url: cluster.master.url.clone(),
        task: "fashion".into(),
        rates: rates.clone(),
        mix: Mix::Strict,
        seed: SEED,
        // SLO violations are answers after `latency_ms`, as the simulator counts them.
        grace_ms: 0.0,
        max_in_flight: 256,
        timeout: Duration::from_secs(30),
        admin_token: None,
        api_key: None,
        drift: None,
        retry_refused: false,
    };
    if !feasible {
        measure_every_pool(&cluster).await;
    }
    let mut world = World::load(&zoo, "fashion").unwrap();
    let types = if feasible {
        loadgen::types_from_master(&zoo, &config, 1.0)
            .await
            .unwrap()
    } else {
        loadgen::types_for(&zoo, "fashion", 1.0).unwrap()
    };
    world.types = types.clone();
    let (inputs, labels) = loadgen::inputs(&zoo, "fashion").unwrap();
    let live = loadgen::run(&config, &types, Arc::new(inputs), Arc::new(labels), None)
        .await
        .unwrap();
    // The simulator models the hop master ↔ worker and what a request takes outside its
    // member calls: here, for each request, what one live answer drawn at random took
    // (its wait for members less the profiled inference of the slowest model that
    // answered it, and its latency less that wait), as `autoscaling_live` draws them.
    let inference_ms = |model: &str| {
        let m = world.models.iter().position(|n| n == model)?;
        world.candidates.get(m).map(|c| c.latency_ms)
    };
    let mut sim_config = SimConfig::new(Scheme::Cocktail, Mix::Strict, rates, SEED);
    sim_config.o2_interval_requests = Some(INTERVAL_REQUESTS);
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
    // Their median is the hop selection assumes before a pool has measured any.
    let mut hops: Vec<f64> = sim_config.live_answers.iter().map(|a| a.hop_ms).collect();
    let hop_ms = stats::median(&mut hops);
    sim_config.hop_ms = hop_ms;
    let simulated = sim::run(&world, &sim_config, None);
    let pair = Pair {
        live,
        simulated,
        hop_ms,
    };
    pair.print();
    pair
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_agrees_with_the_live_system_on_the_same_trace() {
    // 90 s at 30 req/s: about 2,700 requests, O2 every 300 requests per constraint.
    let pair = pair(vec![30.0; 90], false).await;
    pair.check_agreement();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_deadlines_bind_the_simulator_agrees_on_misses_and_latency() {
    // The same trace on types whose targets are the hop the load generator measured at
    // the run's rate, median request: about half the answers are late, and a tenth of a
    // millisecond moves many of them across. Until 2026-12-06 each drawn hop was the
    // answer's wait less the types' median inference, not its own members': the
    // simulated latency sat about 0.12 ms above the live one, and two runs on 2026-12-05
    // missed the bound (SLO violations 76.7 against 90.4 %, 44.4 against 56.4 %; in the
    // second, the simulator's selection saw the accurate single models as too slow and
    // chose votes, 1.6 models per request against 1.0). Since, with each answer's
    // slowest member, four runs on 2026-12-06: SLO violations live 65.2, 72.2, 23.3 and
    // 63.0 %, simulated 65.5, 73.1, 22.9 and 64.3 %; latency p50 4.498, 4.768, 4.589 and
    // 5.231 ms against 4.501, 4.767, 4.594 and 5.240; p90 5.516, 6.139, 5.598 and 6.513
    // against 5.474, 6.098, 5.574 and 6.539. 10 points bound them.
    let pair = pair(vec![30.0; 90], true).await;
    let (live, simulated) = (&pair.live, &pair.simulated);
    load::assert_all_answered(live, simulated.requests);
    assert!(
        (0.1..=0.9).contains(&live.slo_violations),
        "deadlines bind: some answers late, some not ({})",
        live.slo_violations
    );
    assert!(
        (live.slo_violations - simulated.slo_violations).abs() <= 0.10,
        "SLO violations: live {} vs sim {}",
        live.slo_violations,
        simulated.slo_violations
    );
    for (what, l, s) in [
        ("p50", live.latency_ms.p50, simulated.latency_ms.p50),
        ("p90", live.latency_ms.p90, simulated.latency_ms.p90),
    ] {
        assert!(
            (0.85..=1.15).contains(&(l / s)),
            "latency {what}: live {l} vs sim {s} ms"
        );
    }
    // Where every member answers late, the live master votes with the first late answer
    // (up to the late limit, 1 s), and so does the simulator since 2026-12-05, also for
    // a call whose hop alone makes it late; before, it lost those votes (a CI run:
    // accuracy met 0.83 live against 0.12 simulated, 1.0 models per request against 2.4
    // as its selection made up for the lost votes, SLO violations 12 points apart). One
    // run here after: accuracy met 0.8291 on both sides, SLO violations 47.7 against
    // 52.2 %. Which members serve is not compared here: with targets at the median
    // answer's time, whether the accurate single models fit them is decided at the edge
    // by construction, on measured response times live and on the drawn hops simulated.
    // Two CI runs on 2026-12-07 chose differently on one constraint each, one each way:
    // live votes on const3 (1.83 models per request against 1.0 simulated; accuracy met
    // 0.740 against 0.829, while a release build ran beside the tests), and a simulated
    // vote of 3 on const5 (1.70 models per request overall against 1.0 live; accuracy
    // met 0.8291 on both sides, the late votes falling back on the first answer). The
    // first test compares the members where deadlines do not bind; here accuracy met
    // must agree within 10 points, which still catches votes lost to late answers.
    load::assert_accuracy_agrees(live, simulated.requests, simulated.accuracy_met, 0.10);
}
