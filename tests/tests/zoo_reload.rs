//! Adding and removing a model while serving (issue 33): a master managing its pools on
//! the local provider serves a reduced fashion zoo under steady load; a model is added
//! to the manifest and the zoo reloaded (`POST /v1/zoo/reload`), a broken manifest is
//! refused, and the model most used then is removed (SIGHUP): with the Strict mix, the
//! added model. No request may fail; the new model
//! serves and the removed one's workers are stopped. Prints the figures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cocktail_benches::loadgen::{self, LoadReport, LoadgenConfig};
use cocktail_benches::process::worker_pids;
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use cocktail_tests::cluster::{
    Cluster, NO_PSEUDO_LABELS, Process, Signal, admin_client, admin_get, decisions, eventually,
    image_request, managed_master_args, png_base64, serving_workers, signal, wait_for_models,
};
use cocktail_tests::zoo_manifest;
use serde_json::{Value, json};

/// The zoo the master starts with.
const FIRST: &[&str] = &[
    "linear",
    "mlp_med",
    "lenet",
    "cnn_small",
    "cnn_k5",
    "cnn_wide",
];
/// The most accurate fashion model, added while serving: selections of high accuracy
/// targets take it.
const ADDED: &str = "resnet";
const RATE: f64 = 20.0;
const SECONDS: usize = 30;
const SEED: u64 = 7;

/// The tests share this machine's two cores: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A copy of the fashion zoo's manifest with some of its models, in a folder of its own
/// that links to the checkout's model files and data.
struct TempZoo {
    dir: PathBuf,
    header: String,
    /// Each model's name and its `[[models]]` table.
    models: Vec<(String, String)>,
}

impl TempZoo {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("cocktail-zoo-reload-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let source = zoo_manifest();
        let root = source.parent().unwrap().to_owned();
        for entry in std::fs::read_dir(&root).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() != "zoo.toml" {
                std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).unwrap();
            }
        }
        let text = std::fs::read_to_string(&source).unwrap();
        let mut parts = text.split("\n[[models]]\n");
        let header = parts.next().unwrap().to_owned();
        let models = parts
            .map(|table| {
                let name = table
                    .lines()
                    .find_map(|l| l.strip_prefix("name = \""))
                    .and_then(|l| l.strip_suffix('"'))
                    .unwrap()
                    .to_owned();
                (name, table.to_owned())
            })
            .collect();
        Self {
            dir,
            header,
            models,
        }
    }

    fn manifest(&self) -> PathBuf {
        self.dir.join("zoo.toml")
    }

    /// Writes the manifest with `models` (and `extra` after them), replacing it whole
    /// (a rename, so the master never reads half a file).
    fn write(&self, models: &[&str], extra: &str) {
        let mut text = self.header.clone();
        for name in models {
            let (_, table) = self.models.iter().find(|(n, _)| n == name).unwrap();
            text.push_str("\n[[models]]\n");
            text.push_str(table);
        }
        text.push_str(extra);
        let partial = self.dir.join("zoo.toml.partial");
        std::fs::write(&partial, text).unwrap();
        std::fs::rename(partial, self.manifest()).unwrap();
    }
}

impl Drop for TempZoo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A model whose file is missing: `check_files` refuses the manifest.
fn broken_model() -> String {
    let manifest = std::fs::read_to_string(zoo_manifest()).unwrap();
    let table = manifest
        .split("\n[[models]]\n")
        .find(|t| t.starts_with("name = \"linear\""))
        .unwrap()
        .replacen("name = \"linear\"", "name = \"ghost\"", 1)
        .replacen("fashion/linear.onnx", "fashion/ghost.onnx", 1);
    format!("\n[[models]]\n{table}")
}

/// An infer request of one image with `parameters`; its status and answer.
async fn infer(url: &str, parameters: Value) -> (u16, Value) {
    let pixels: Vec<u8> = (0..28 * 28).map(|i| (i % 251) as u8).collect();
    let body = image_request(&[png_base64(28, 28, &pixels)], parameters);
    let response = admin_client()
        .post(format!("{url}/v2/models/fashion/infer"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn failed(report: &LoadReport) -> u64 {
    report.errors.values().sum::<u64>() + report.dropped
}

async fn reload(url: &str) -> (u16, Value) {
    let response = admin_client()
        .post(format!("{url}/v1/zoo/reload"))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// `POST /v2/repository/index`: each model's state by name.
async fn index(url: &str) -> Vec<(String, String)> {
    let listed: Value = admin_client()
        .post(format!("{url}/v2/repository/index"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Each constraint's members, by how many constraints use them, most used first.
async fn members_in_use(url: &str) -> Vec<(String, usize)> {
    let listed = admin_get(&format!("{url}/v1/ensembles")).await;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for e in listed["ensembles"].as_array().unwrap() {
        for m in e["members"].as_array().unwrap() {
            *counts.entry(m.as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    counts
}

/// Every model some constraint's ensemble (members or candidates) names.
async fn ensemble_models(url: &str) -> Vec<String> {
    let listed = admin_get(&format!("{url}/v1/ensembles")).await;
    let mut models: Vec<String> = listed["ensembles"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| {
            e["members"]
                .as_array()
                .unwrap()
                .iter()
                .chain(e["candidates"].as_array().unwrap())
                .map(|m| m.as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    models.sort();
    models.dedup();
    models
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_added_and_one_removed_under_load_fail_no_request() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let zoo = TempZoo::new("managed");
    zoo.write(FIRST, "");
    let manifest = zoo.manifest().display().to_string();
    let args = managed_master_args(&["--zoo", &manifest]);
    let master = Process::start("cocktail-master", &args).await;
    let url = master.url.clone();
    wait_for_models(
        &reqwest::Client::new(),
        &url,
        FIRST,
        Duration::from_secs(120),
    )
    .await;

    let run = tokio::spawn({
        let url = url.clone();
        async move {
            let images = Zoo::load(zoo_manifest()).unwrap();
            let config = LoadgenConfig {
                grace_ms: 200.0,
                ..LoadgenConfig::steady(&url, "fashion", RATE, SECONDS, Mix::Strict, SEED)
            };
            loadgen::run_zoo(&images, &config).await.unwrap()
        }
    });
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Added: the reload says so, and the controller launches its pool once in use.
    let with_added: Vec<&str> = FIRST.iter().copied().chain([ADDED]).collect();
    zoo.write(&with_added, "");
    let added_at = Instant::now();
    let (status, change) = reload(&url).await;
    assert_eq!(status, 200, "{change}");
    assert_eq!(change["added"], json!([ADDED]), "{change}");
    assert_eq!(change["removed"], json!([]), "{change}");
    eventually(
        "the added model serves",
        Duration::from_secs(60),
        || async {
            index(&url)
                .await
                .contains(&(ADDED.to_owned(), "READY".to_owned()))
        },
    )
    .await;
    let ready_after = added_at.elapsed();
    let (status, answer) = infer(
        &url,
        json!({ "latency_ms": 1000.0, "accuracy": 0.5, "models": ADDED }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["parameters"]["models"], json!([ADDED]), "{answer}");

    // A broken manifest is refused, naming the problem; the zoo served stays.
    zoo.write(&with_added, &broken_model());
    let (status, refused) = reload(&url).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error_type"], "zoo_refused", "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("ghost.onnx"),
        "{refused}"
    );
    assert!(
        index(&url).await.iter().any(|(m, _)| m == ADDED),
        "the zoo served stays"
    );

    // The model most constraints use now (the added one, when it is the best) is
    // removed, by SIGHUP, 15 s into the load.
    tokio::time::sleep(Duration::from_secs(15).saturating_sub(started.elapsed())).await;
    let in_use = members_in_use(&url).await;
    let removed = in_use
        .first()
        .map(|(m, _)| m.clone())
        .unwrap_or_else(|| panic!("no ensemble yet: {in_use:?}"));
    let without: Vec<&str> = with_added
        .iter()
        .copied()
        .filter(|m| **m != removed)
        .collect();
    zoo.write(&without, "");
    let removed_at = Instant::now();
    signal(master.child.id().unwrap() as i32, Signal::SIGHUP);
    eventually(
        "no ensemble names the removed model",
        Duration::from_secs(30),
        || async {
            !ensemble_models(&url).await.contains(&removed)
                && !index(&url)
                    .await
                    .iter()
                    .any(|(m, state)| *m == removed && state != "UNLOADING")
        },
    )
    .await;
    let client = reqwest::Client::new();
    let master_pid = master.child.id().unwrap();
    eventually(
        "the removed model's workers are stopped",
        Duration::from_secs(60),
        || async {
            worker_pids(master_pid, &removed).is_empty()
                && !serving_workers(&client, &url)
                    .await
                    .iter()
                    .any(|(_, m)| *m == removed)
        },
    )
    .await;
    let stopped_after = removed_at.elapsed();

    let report = run.await.unwrap();
    let ran = started.elapsed();
    let models = ensemble_models(&url).await;
    eprintln!(
        "{}\nzoo reload under load: sent {}, failed {} {:?}, degraded {}, accuracy {:.4}, p99 {:.1} ms over {ran:.1?}; {ADDED} served {ready_after:.1?} after its reload; {removed}'s workers (the most used of {in_use:?}) stopped {stopped_after:.1?} after its removal; ensembles use {models:?}",
        loadgen::markdown(&report),
        report.sent,
        failed(&report),
        report.errors,
        report.degraded,
        report.accuracy,
        report.latency_ms.p99,
    );
    assert_eq!(failed(&report), 0, "no request fails: {report:?}");
    assert!(!models.contains(&removed), "{models:?}");
    let terminated: Vec<Value> = decisions(&url)
        .await
        .into_iter()
        .filter(|d| {
            d["trigger"] == "zoo"
                && d["decision"]["pool"] == removed.as_str()
                && d["decision"]["action"]["kind"] == "terminate"
        })
        .collect();
    assert!(!terminated.is_empty(), "the removal is a recorded decision");
    let metrics = admin_client()
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "cocktail_master_zoo_reloads_total{outcome=\"ok\"} 2",
        "cocktail_master_zoo_reloads_total{outcome=\"refused\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in /metrics");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_controller_a_reload_admits_the_new_models_workers_and_retires_the_removed() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let zoo = TempZoo::new("static");
    zoo.write(&["linear", "lenet"], "");
    let manifest = zoo.manifest().display().to_string();
    let args: Vec<&str> = NO_PSEUDO_LABELS
        .iter()
        .copied()
        .chain(["--zoo", &manifest])
        .collect();
    let mut cluster = Cluster::start(&args, &["linear", "lenet"]).await;
    let url = cluster.master.url.clone();
    let selected = json!({ "latency_ms": 1000.0, "accuracy": 0.8 });
    let (status, answer) = infer(&url, selected.clone()).await;
    assert_eq!(status, 200, "{answer}");

    // Added: its static workers may register once the zoo has it.
    zoo.write(&["linear", "lenet", "mlp_med"], "");
    let (status, change) = reload(&url).await;
    assert_eq!(status, 200, "{change}");
    assert_eq!(change["added"], json!(["mlp_med"]), "{change}");
    assert_eq!(change["tasks"], json!(["fashion"]), "{change}");
    assert!(
        index(&url)
            .await
            .contains(&("mlp_med".to_owned(), "UNAVAILABLE".to_owned()))
    );
    cluster.add_worker("mlp_med").await;
    let (status, answer) = infer(
        &url,
        json!({ "latency_ms": 1000.0, "accuracy": 0.5, "models": "mlp_med" }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["parameters"]["models"],
        json!(["mlp_med"]),
        "{answer}"
    );

    // Removed: no request selects or pins it; its worker, not the master's, stays
    // registered and is listed as unloading.
    zoo.write(&["linear", "mlp_med"], "");
    let (status, change) = reload(&url).await;
    assert_eq!(status, 200, "{change}");
    assert_eq!(change["removed"], json!(["lenet"]), "{change}");
    for _ in 0..10 {
        let (status, answer) = infer(&url, selected.clone()).await;
        assert_eq!(status, 200, "{answer}");
        let members = answer["parameters"]["models"].as_array().unwrap();
        assert!(!members.contains(&json!("lenet")), "{answer}");
    }
    assert!(!ensemble_models(&url).await.contains(&"lenet".to_owned()));
    let (status, refused) = infer(
        &url,
        json!({ "latency_ms": 1000.0, "accuracy": 0.5, "models": "lenet" }),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        index(&url)
            .await
            .contains(&("lenet".to_owned(), "UNLOADING".to_owned()))
    );
}
