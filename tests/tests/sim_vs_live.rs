//! The simulator against the live system: the same short trace, seed and constraint mix
//! through a real master with real workers (driven by the load generator) and through
//! `cocktail sim` agree on accuracy met within 3 points (issue 14, point 7) and on models
//! per request within 10 % (issue 6). Accuracy met is a threshold on a sliding window
//! whose accuracy sits near the target, so a few answers completing in another order
//! move it by a point or two while accuracy itself agrees to a few items.
//!
//! Latency targets are end to end (issue 14). The simulator is given the hop the live
//! master measured; both run the default deadline grace (none). In a debug build on a shared
//! 2-core machine the measured hop (about 1.5 ms) exceeds every constraint type's target
//! (profiled inference plus 0.5 ms), so both choose on the profiles alone, as the master
//! does when nothing is predicted to fit, and every answer is late in both: both count an
//! answer after `latency_ms` as an SLO violation, and they agree on that too.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::sync::Arc;
use std::time::Duration;

use cocktail_benches::loadgen::{self, LoadgenConfig};
use cocktail_benches::sim::{self, Scheme, SimConfig, World};
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use cocktail_tests::cluster::Cluster;
use cocktail_tests::zoo_manifest;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_agrees_with_the_live_system_on_the_same_trace() {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    // 90 s at 30 req/s: about 2,700 requests, O2 every 300 requests per constraint.
    let rates = vec![30.0; 90];
    let interval = INTERVAL_REQUESTS.to_string();
    let cluster = Cluster::start(&["--interval-requests", &interval], MODELS).await;
    let types = loadgen::types_for(&zoo, "fashion", 1.0).unwrap();
    let (inputs, labels) = loadgen::inputs(&zoo, "fashion").unwrap();
    let live = loadgen::run(
        &LoadgenConfig {
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
        },
        &types,
        Arc::new(inputs),
        Arc::new(labels),
        None,
    )
    .await
    .unwrap();
    assert_eq!(live.errors.values().sum::<u64>(), 0, "{live:?}");
    assert_eq!(live.dropped, 0);

    // The simulator models the hop master ↔ worker; here it is the one the live master
    // measured.
    let hop_ms = cocktail_tests::cluster::measured_overhead_ms(&cluster, "fashion").await;

    let world = World::load(&zoo, "fashion").unwrap();
    let mut config = SimConfig::new(Scheme::Cocktail, Mix::Strict, rates, SEED);
    config.o2_interval_requests = Some(INTERVAL_REQUESTS);
    config.hop_ms = hop_ms;
    let simulated = sim::run(&world, &config, None);

    eprintln!(
        "live: {} requests, accuracy met {:.4}, models/request {:.3}, accuracy {:.4}, SLO violations {:.4}\nsim:  {} requests, accuracy met {:.4}, models/request {:.3}, accuracy {:.4}, SLO violations {:.4} (hop {hop_ms:.3} ms)",
        live.sent,
        live.accuracy_met,
        live.models_per_request,
        live.accuracy,
        live.slo_violations,
        simulated.requests,
        simulated.accuracy_met,
        simulated.models_per_request,
        simulated.accuracy,
        simulated.slo_violations,
    );
    assert_eq!(live.sent, simulated.requests, "the same arrivals");
    assert!(
        (live.accuracy_met - simulated.accuracy_met).abs() <= 0.03,
        "accuracy met: live {} vs sim {}",
        live.accuracy_met,
        simulated.accuracy_met
    );
    assert!(
        (live.slo_violations - simulated.slo_violations).abs() <= 0.05,
        "SLO violations: live {} vs sim {}",
        live.slo_violations,
        simulated.slo_violations
    );
    let ratio = live.models_per_request / simulated.models_per_request;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "models per request: live {} vs sim {}",
        live.models_per_request,
        simulated.models_per_request
    );
}
