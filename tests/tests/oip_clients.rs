//! Conformance with the standard Open Inference Protocol client, PyPI `tritonclient`
//! (issue 19): over HTTP with binary tensor data on (its default) and off, over gRPC
//! (`inference.GRPCInferenceService`), PNG images, FP32 pixels and text, health,
//! metadata, a missing constraint and API keys, against a real master and workers.
//!
//! The checks are `tests/oip_clients.py`, run with the venv of scripts/lib.sh's
//! `setup_tritonclient`; each prints `PASS name: ...` or `FAIL name: why`. Each test here
//! starts its own cluster and runs one group of them, so the test names say which surface
//! broke and the failure message holds every check's line.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cocktail_tests::cluster::{Cluster, NO_PSEUDO_LABELS, eventually, free_port};
use cocktail_tests::workspace_root;
use tokio::process::Command;

/// One fast model per task, each right on at least 14 of the 16 test items the script
/// sends (models/predictions), so "at least 12 of 16 right" holds with room to spare.
const WORKERS: &[&str] = &["mlp_med", "boe"];

/// How the script reaches the master.
struct Target<'a> {
    cluster: &'a Cluster,
    grpc_port: Option<u16>,
    api_key: Option<&'a str>,
}

/// A master with gRPC on a free port (`--grpc-port`) and `extra` flags, a worker per
/// task; returns once the gRPC port takes connections.
async fn cluster_with_grpc(extra: &[&str]) -> (Cluster, u16) {
    let port = free_port();
    let port_flag = port.to_string();
    let mut args = NO_PSEUDO_LABELS.to_vec();
    args.extend(["--grpc-port", &port_flag]);
    args.extend(extra);
    let cluster = Cluster::start(&args, WORKERS).await;
    eventually(
        "the master's gRPC port listens",
        Duration::from_secs(30),
        || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        },
    )
    .await;
    (cluster, port)
}

/// Runs the script's checks whose names start with one of `checks` and fails the test,
/// with every check's line, when any failed.
async fn tritonclient(target: &Target<'_>, checks: &[&str]) {
    let python = std::env::var_os("COCKTAIL_TRITONCLIENT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/tritonclient/bin/python"));
    let mut command = Command::new(&python);
    command
        .arg(workspace_root().join("tests/oip_clients.py"))
        .args(["--http", &target.cluster.master.url]);
    if let Some(port) = target.grpc_port {
        command.args(["--grpc", &format!("127.0.0.1:{port}")]);
    }
    if let Some(key) = target.api_key {
        command.args(["--api-key", key]);
    }
    for check in checks {
        command.args(["--check", check]);
    }
    let run = command
        .current_dir(workspace_root())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the tritonclient checks finish within 5 minutes")
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/test.sh installs it)", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("tritonclient {checks:?}:\n{stdout}{stderr}");
    assert!(
        output.status.success(),
        "tritonclient checks {checks:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_over_http_with_json_tensors_classifies_images_pixels_and_text() {
    let cluster = Cluster::start(NO_PSEUDO_LABELS, WORKERS).await;
    let target = Target {
        cluster: &cluster,
        grpc_port: None,
        api_key: None,
    };
    tritonclient(
        &target,
        &[
            "http.health",
            "http.metadata",
            "http.json.",
            "http.missing_latency",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_over_http_with_binary_tensors_classifies_images_pixels_and_text() {
    let cluster = Cluster::start(NO_PSEUDO_LABELS, WORKERS).await;
    let target = Target {
        cluster: &cluster,
        grpc_port: None,
        api_key: None,
    };
    tritonclient(&target, &["http.binary.", "http.outputs"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_over_grpc_classifies_images_pixels_and_text() {
    let (cluster, port) = cluster_with_grpc(&[]).await;
    let target = Target {
        cluster: &cluster,
        grpc_port: Some(port),
        api_key: None,
    };
    tritonclient(&target, &["grpc."]).await;
}

/// An API key file (`--api-keys`) of the test `test` with one key, generous enough never
/// to limit the checks; returns its path.
fn api_keys_file(test: &str, key: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cocktail-oip-keys-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("keys.toml");
    let digest: String = cocktail_common::auth::digest(key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(
        &path,
        format!("[[keys]]\nname = \"tritonclient\"\nsha256 = \"{digest}\"\nrps = 1000.0\n"),
    )
    .unwrap();
    path
}

const API_KEY: &str = "oip-clients-key-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_over_http_needs_the_api_key_when_the_master_has_keys() {
    let keys = api_keys_file("http", API_KEY);
    let mut args = NO_PSEUDO_LABELS.to_vec();
    let keys_flag = keys.display().to_string();
    args.extend(["--api-keys", &keys_flag]);
    let cluster = Cluster::start(&args, WORKERS).await;
    let target = Target {
        cluster: &cluster,
        grpc_port: None,
        api_key: Some(API_KEY),
    };
    tritonclient(&target, &["http.auth"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_over_grpc_needs_the_api_key_when_the_master_has_keys() {
    let keys = api_keys_file("grpc", API_KEY);
    let keys_flag = keys.display().to_string();
    let (cluster, port) = cluster_with_grpc(&["--api-keys", &keys_flag]).await;
    let target = Target {
        cluster: &cluster,
        grpc_port: Some(port),
        api_key: Some(API_KEY),
    };
    tritonclient(&target, &["grpc.auth"]).await;
}
