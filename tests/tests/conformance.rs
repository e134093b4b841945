//! API conformance: schemathesis (PyPI, every check) fuzzes the real master and the real
//! worker against the `/openapi.json` each publishes, and every response must keep the
//! promises of that document: no 5xx, only documented statuses, bodies and content types
//! that match their schemas, invalid input refused, valid input accepted, 405 with `Allow`
//! for undeclared methods. `tests/schemathesis.toml` names the few operations whose
//! validity JSON Schema cannot express (a shape that must match its data, an image that
//! must decode): valid-looking input may get a 422 there.
//!
//! The master is fuzzed in three groups, each against a master in the state it needs:
//! serving (a worker of each task registered, so no 503), the worker control plane (a
//! master of its own, since fuzzed registrations add bogus workers), and the resource
//! controller (`--provider local` with a provisioning delay longer than the test, so the
//! instances a fuzzed mix asks for are never started). schemathesis does not fuzz
//! `/openapi.json` itself; it reads it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cocktail_tests::cluster::{ADMIN_TOKEN, CLUSTER_SECRET, Cluster, NO_PSEUDO_LABELS, Process};
use cocktail_tests::workspace_root;
use tokio::process::Command;

/// Test cases per operation and phase: enough to find what odd input breaks, within the
/// test's two minutes.
const MAX_EXAMPLES: &str = "60";

/// The worker control plane: fuzzed in a master of its own.
const CONTROL_PLANE: &str = "^/v1/workers/";
/// The resource controller's routes: fuzzed in a master that has one.
const CONTROLLER: &str = "^/v1/(pools|instances|decisions|mix-decisions|cost)";

/// The fastest model of each task: a worker per task keeps every task ready.
const WORKERS: &[&str] = &["linear", "boe_tiny"];

/// Runs schemathesis with every check against the API at `base`, limited to the paths
/// `filter` selects, and fails the test with its report when it finds anything.
async fn schemathesis(what: &str, base: &str, filter: &[&str]) {
    let binary = std::env::var_os("COCKTAIL_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/schemathesis/bin/schemathesis"));
    let reports = std::env::temp_dir().join(format!(
        "cocktail-schemathesis-{}-{what}",
        std::process::id()
    ));
    std::fs::create_dir_all(&reports).unwrap();
    let config = workspace_root().join("tests/schemathesis.toml");
    let started = Instant::now();
    let run = Command::new(&binary)
        .arg("--no-color")
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{base}/openapi.json"))
        .args(["--checks", "all"])
        .args(["--max-examples", MAX_EXAMPLES])
        .args(["--seed", "1"])
        .args(["--workers", "1"])
        .args(["--request-timeout", "30"])
        .args(["--generation-database", "none"])
        .args(filter)
        .current_dir(&reports)
        .env("COCKTAIL_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("COCKTAIL_CLUSTER_SECRET", CLUSTER_SECRET)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .unwrap_or_else(|_| panic!("schemathesis against the {what} took over 5 minutes"))
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/test.sh installs it)", binary.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!(
        "schemathesis against the {what} ({:.0?}):\n{stdout}{stderr}",
        started.elapsed()
    );
    assert!(
        output.status.success(),
        "schemathesis found failures in the {what} ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let _ = std::fs::remove_dir_all(&reports);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_masters_serving_api_keeps_its_openapi_promises() {
    // The controller's routes are fuzzed here too: without a controller they answer the
    // documented 404 `no_controller`.
    let cluster = Cluster::start(NO_PSEUDO_LABELS, WORKERS).await;
    schemathesis(
        "master (serving)",
        &cluster.master.url,
        &["--exclude-path-regex", CONTROL_PLANE],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_masters_control_plane_keeps_its_openapi_promises() {
    let cluster = Cluster::start(NO_PSEUDO_LABELS, &[]).await;
    schemathesis(
        "master (control plane)",
        &cluster.master.url,
        &["--include-path-regex", CONTROL_PLANE],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_masters_controller_api_keeps_its_openapi_promises() {
    let mut args = NO_PSEUDO_LABELS.to_vec();
    args.extend([
        "--provider",
        "local",
        "--models",
        "linear",
        "--instance-types",
        "r5n.large,c5n.2xlarge",
        // No fuzzed mix ever starts a process: the test is over long before.
        "--provisioning-delay-ms",
        "3600000",
        "--controller-interval-s",
        "1",
    ]);
    let cluster = Cluster::start(&args, &[]).await;
    schemathesis(
        "master (controller)",
        &cluster.master.url,
        &["--include-path-regex", CONTROLLER],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_keeps_its_openapi_promises() {
    // One model per kind of preprocessing: images and text.
    for model in WORKERS {
        let worker = Process::start(
            "cocktail-worker",
            &["--model", model, "--port", "0"].map(str::to_owned),
        )
        .await;
        schemathesis(&format!("worker ({model})"), &worker.url, &[]).await;
    }
}
