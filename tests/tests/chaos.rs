//! Faults under load (issue 15), on real processes and real ONNX Runtime: workers
//! SIGKILLed or SIGSTOPped, the master restarted, Redis and MongoDB stopped and brought
//! back, while `cocktail loadgen` sends open-loop load with real test images. Each
//! scenario prints its figures (failed, degraded, accuracy, time to replace).
//!
//! The scenarios share this machine's two cores, so they run one at a time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::time::{Duration, Instant};

use cocktail_benches::loadgen::{self, LoadReport, LoadgenConfig};
use cocktail_benches::process::worker_pids;
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use cocktail_tests::cluster::{
    Mongo, Process, Redis, Signal, decisions, eventually, free_port, managed_master_args,
    serving_workers, signal, wait_for_models,
};
use cocktail_tests::zoo_manifest;
use serde_json::Value;

/// The ten workers: one instance per model.
const MODELS: &[&str] = &[
    "linear",
    "mlp_med",
    "lenet",
    "cnn_small",
    "cnn_med",
    "cnn_wide",
    "cnn_k5",
    "cnn_bag_a",
    "cnn_shift",
    "resnet",
];
/// 20 % of the instances, the two most used by the Strict mix.
const KILLED: &[&str] = &["cnn_wide", "resnet"];
/// The run: 20 req/s of the Strict mix for 60 s, seed 7, the kills 20 s in.
const SEED: u64 = 7;
const RATE: f64 = 20.0;
const SECONDS: usize = 60;
const KILLS_AT: Duration = Duration::from_secs(20);
/// The other scenarios' faults, 10 s into 20 s of load.
const FAULT_AT: Duration = Duration::from_secs(10);
const REPLACED_WITHIN: Duration = Duration::from_secs(15);

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A master that manages its pools on the local provider, as `cocktail up` starts it.
async fn managed_master(extra: &[&str]) -> Process {
    let mut args = managed_master_args(&["--models", &MODELS.join(",")]);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let master = Process::start("cocktail-master", &args).await;
    wait_for_models(
        &reqwest::Client::new(),
        &master.url,
        MODELS,
        Duration::from_secs(120),
    )
    .await;
    master
}

/// `seconds` of the Strict mix at [`RATE`] against `url`, same seed every time.
async fn load(url: &str, seconds: usize) -> LoadReport {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let config = LoadgenConfig {
        grace_ms: 200.0,
        ..LoadgenConfig::steady(url, "fashion", RATE, seconds, Mix::Strict, SEED)
    };
    loadgen::run_zoo(&zoo, &config).await.unwrap()
}

fn failed(report: &LoadReport) -> u64 {
    report.errors.values().sum::<u64>() + report.dropped
}

/// Waits until `model` has a serving worker other than `old`; returns how long it took.
async fn replaced(url: &str, model: &str, old: &[String], since: Instant) -> Duration {
    let client = reqwest::Client::new();
    eventually(
        &format!("{model} replaced"),
        REPLACED_WITHIN + Duration::from_secs(30),
        || async {
            serving_workers(&client, url)
                .await
                .iter()
                .any(|(id, m)| m == model && !old.contains(id))
        },
    )
    .await;
    since.elapsed()
}

async fn ids_of(url: &str, model: &str) -> Vec<String> {
    serving_workers(&reqwest::Client::new(), url)
        .await
        .into_iter()
        .filter(|(_, m)| m == model)
        .map(|(id, _)| id)
        .collect()
}

async fn health_decisions(url: &str) -> Vec<Value> {
    decisions(url)
        .await
        .into_iter()
        .filter(|d| d["trigger"] == "health")
        .collect()
}

/// Each constraint's final ensemble, for the printout.
async fn ensembles(url: &str) -> String {
    let listed = cocktail_tests::cluster::admin_get(&format!("{url}/v1/ensembles")).await;
    listed["ensembles"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}: {} (generation {})",
                e["key"], e["members"], e["generation"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn summary(name: &str, report: &LoadReport) -> String {
    format!(
        "{name}: sent {}, failed {} {:?}, degraded {}, accuracy {:.4}, accuracy met {:.4}, models/request {:.2}, p50 {:.1} ms, p99 {:.1} ms",
        report.sent,
        failed(report),
        report.errors,
        report.degraded,
        report.accuracy,
        report.accuracy_met,
        report.models_per_request,
        report.latency_ms.p50,
        report.latency_ms.p99,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_fifth_of_the_workers_fails_no_request_and_they_are_replaced() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let clean = {
        let master = managed_master(&[]).await;
        let report = load(&master.url, SECONDS).await;
        eprintln!(
            "{}\n{}",
            loadgen::markdown(&report),
            ensembles(&master.url).await
        );
        report
    };
    eprintln!("{}", summary("clean", &clean));
    assert_eq!(failed(&clean), 0, "{clean:?}");

    let master = managed_master(&[]).await;
    let url = master.url.clone();
    let run = tokio::spawn({
        let url = url.clone();
        async move { load(&url, SECONDS).await }
    });
    tokio::time::sleep(KILLS_AT).await;
    let mut old = Vec::new();
    for model in KILLED {
        old.push(ids_of(&url, model).await);
        // Every instance of the pool: the controller may have scaled it out by now.
        let pids = worker_pids(master.child.id().unwrap(), model);
        assert!(!pids.is_empty(), "a {model} worker");
        for pid in pids {
            signal(pid, Signal::SIGKILL);
        }
    }
    let killed_at = Instant::now();
    let mut times = Vec::new();
    for (model, old) in KILLED.iter().zip(&old) {
        times.push(replaced(&url, model, old, killed_at).await);
    }
    let chaos = run.await.unwrap();
    eprintln!("{}\n{}", loadgen::markdown(&chaos), ensembles(&url).await);
    eprintln!("{}", summary("2 of 10 killed", &chaos));
    eprintln!("replaced after {times:?}");
    let decisions = health_decisions(&url).await;
    assert_eq!(failed(&chaos), 0, "no request fails: {chaos:?}");
    assert!(
        (clean.accuracy - chaos.accuracy).abs() <= 0.006,
        "accuracy {:.4} against {:.4} clean",
        chaos.accuracy,
        clean.accuracy
    );
    for (model, took) in KILLED.iter().zip(&times) {
        assert!(*took <= REPLACED_WITHIN, "{model} replaced after {took:?}");
    }
    for (model, old) in KILLED.iter().zip(&old) {
        assert!(
            decisions.iter().any(|d| d["decision"]["pool"] == *model
                && d["decision"]["action"]["kind"] == "terminate"
                && d["decision"]["action"]["id"] == old[0].as_str()),
            "the replacement of {model} is a recorded decision: {decisions:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_worker_is_taken_out_of_rotation_and_replaced() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let master = managed_master(&[]).await;
    let url = master.url.clone();
    let run = tokio::spawn({
        let url = url.clone();
        async move { load(&url, 20).await }
    });
    tokio::time::sleep(FAULT_AT).await;
    // Every resnet instance (the controller may have scaled the pool out by now).
    let old = ids_of(&url, "resnet").await;
    let pids = worker_pids(master.child.id().unwrap(), "resnet");
    assert!(!pids.is_empty(), "a resnet worker");
    for &pid in &pids {
        signal(pid, Signal::SIGSTOP);
    }
    let stopped_at = Instant::now();
    let took = replaced(&url, "resnet", &old, stopped_at).await;
    let report = run.await.unwrap();
    // The stopped processes cannot act on the master's SIGTERM; end them here.
    for &pid in &pids {
        signal(pid, Signal::SIGKILL);
    }
    eprintln!("{}", summary("resnet SIGSTOPped", &report));
    eprintln!("replaced after {took:?}");
    assert_eq!(failed(&report), 0, "no request fails: {report:?}");
    assert!(took <= REPLACED_WITHIN, "replaced after {took:?}");
    let decisions = health_decisions(&url).await;
    assert!(
        decisions
            .iter()
            .any(|d| d["decision"]["action"]["kind"] == "terminate"
                && old
                    .iter()
                    .any(|id| d["decision"]["action"]["id"] == id.as_str())),
        "{decisions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_under_load_gets_its_workers_back() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let port = free_port().to_string();
    // gRPC on any port: on a fixed `--port` the master takes 8001 beside it, which
    // another process on the machine may hold.
    let args: Vec<String> = ["--port", &port, "--grpc-port", "0"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut master = Process::start("cocktail-master", &args).await;
    let url = master.url.clone();
    let mut workers = Vec::new();
    for model in MODELS {
        let args: Vec<String> = [
            "--model",
            model,
            "--port",
            "0",
            "--master",
            &url,
            "--threads",
            "1",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        workers.push(Process::start("cocktail-worker", &args).await);
    }
    let client = reqwest::Client::new();
    wait_for_models(&client, &url, MODELS, Duration::from_secs(60)).await;
    let run = tokio::spawn({
        let url = url.clone();
        async move { load(&url, 20).await }
    });
    tokio::time::sleep(FAULT_AT).await;
    master.kill().await;
    let crashed = Instant::now();
    let master = Process::start("cocktail-master", &args).await;
    let down_for = crashed.elapsed();
    wait_for_models(&client, &master.url, MODELS, Duration::from_secs(10)).await;
    let back_after = crashed.elapsed();
    let report = run.await.unwrap();
    eprintln!("{}", summary("master SIGKILLed and restarted", &report));
    eprintln!("listening again after {down_for:?}, every model's worker back after {back_after:?}");
    // Requests in flight at the crash fail, and those sent before the new master
    // listens find no server; the rest must not.
    let exposed = (RATE * back_after.as_secs_f64()).ceil() as u64 + 5;
    assert!(
        failed(&report) <= exposed,
        "{} failed; at most {exposed} were in flight or sent while no master was up",
        failed(&report)
    );
    let after = load(&master.url, 5).await;
    eprintln!("{}", summary("after the restart", &after));
    assert_eq!(failed(&after), 0, "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_and_mongodb_outages_fail_no_request() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let redis = Redis::start().await;
    let redis_port = redis.port;
    let mongo_port = free_port();
    let mut mongo = Mongo::start(mongo_port).await;
    let master = managed_master(&[
        "--redis-url",
        &redis.url(),
        "--mongo-url",
        &mongo.url(),
        "--controller-interval-s",
        "2",
    ])
    .await;
    let run = tokio::spawn({
        let url = master.url.clone();
        async move { load(&url, 20).await }
    });
    let mut redis = Some(redis);
    tokio::time::sleep(Duration::from_secs(4)).await;
    if let Some(mut r) = redis.take() {
        r.stop().await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let redis = Redis::start_on(redis_port).await;
    mongo.kill().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let _mongo = Mongo::start(mongo_port).await;
    let report = run.await.unwrap();
    drop(redis);
    eprintln!(
        "{}",
        summary("Redis and MongoDB stopped and restarted", &report)
    );
    assert_eq!(failed(&report), 0, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_writes_every_document_once_across_a_server_crash() {
    use cocktail_master::resources::store::{Collection, MongoStore, Store};
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = std::env::temp_dir().join(format!(
        "cocktail-store-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let port = free_port();
    let mut mongo = Mongo::start_durable(port, &dir).await;
    let store = MongoStore::start(&mongo.url(), "exactly_once")
        .await
        .unwrap();
    const DOCUMENTS: usize = 20_000;
    for n in 0..DOCUMENTS {
        store.record(Collection::Utilisation, serde_json::json!({ "n": n }));
        // Twice the same `_id`: the batch that holds the second copy partly fails.
        if n == 1_000 || n == 1_100 {
            store.record(
                Collection::Utilisation,
                serde_json::json!({ "_id": "twice", "n": -1 }),
            );
        }
    }
    let client = mongodb::Client::with_uri_str(mongo.url()).await.unwrap();
    let collection = client
        .database("exactly_once")
        .collection::<mongodb::bson::Document>("utilisation");
    // Kill the server while batches are being written.
    eventually(
        "some documents written",
        Duration::from_secs(30),
        || async {
            collection
                .count_documents(mongodb::bson::doc! {})
                .await
                .is_ok_and(|n| n > 0)
        },
    )
    .await;
    let written_at_crash = collection
        .count_documents(mongodb::bson::doc! {})
        .await
        .unwrap_or(0);
    mongo.kill().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Back on the same port: the test's client reconnects as the store's does.
    let _mongo = Mongo::start_durable(port, &dir).await;
    eventually(
        "every document written",
        Duration::from_secs(120),
        || async {
            collection
                .count_documents(mongodb::bson::doc! {})
                .await
                .is_ok_and(|n| n as usize > DOCUMENTS)
        },
    )
    .await;
    // Settle, then check nothing was written twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let count = collection
        .count_documents(mongodb::bson::doc! {})
        .await
        .unwrap() as usize;
    let distinct = collection
        .distinct("n", mongodb::bson::doc! {})
        .await
        .unwrap()
        .len();
    eprintln!(
        "{count} documents, {distinct} distinct, of {DOCUMENTS} + 1 recorded ({written_at_crash} read back just before the crash)"
    );
    // Every document once, and the second `twice` not at all.
    assert_eq!((count, distinct), (DOCUMENTS + 1, DOCUMENTS + 1));
    let _ = std::fs::remove_dir_all(&dir);
}
