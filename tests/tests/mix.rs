//! Mixed-type pools on real processes: the local provider launches workers that emulate
//! their instance types (`--emulate-types`), Ribbon searches a pool's mix through the
//! live `ConfigEvaluator`, the controller picks mixes with Ribbon or Kairos and records
//! them in MongoDB, and the dispatcher spreads batched queries by Kairos' matching.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::time::{Duration, Instant};

use cocktail_benches::hetero::BatchSizes;
use cocktail_benches::hetero::live::LiveEvaluator;
use cocktail_benches::loadgen;
use cocktail_common::Zoo;
use cocktail_policy::mix::{ConfigEvaluator, Space};
use cocktail_policy::ribbon::{Ribbon, Settings};
use cocktail_tests::cluster::{Cluster, Mongo, eventually, free_port};
use serde_json::{Value, json};

/// resnet is the only fashion model that meets 92.8 % alone: these parameters make the
/// master serve it, and only it.
fn resnet_only() -> Value {
    json!({ "latency_ms": 1000.0, "accuracy": 0.928 })
}

/// Types run 20 times slower than modelled, so the emulated latency stays above this
/// host's real inference time (a GPU batch takes ~20 ms, an r5n.large item ~2.4 ms).
const SCALE: &str = "20";
const TYPES: [&str; 2] = ["g4dn.xlarge", "r5n.large"];

/// MongoDB, and a master managing resnet's pool with emulated types and `extra` flags.
async fn start(extra: &[&str]) -> (Mongo, Cluster, String) {
    let port = free_port();
    let mongo_url = format!("mongodb://127.0.0.1:{port}");
    let mongo = Mongo::start(port).await;
    let mut args = vec![
        "--provider",
        "local",
        "--models",
        "resnet",
        "--emulate-types",
        "--emulate-scale",
        SCALE,
        "--max-threads",
        "1",
        "--provisioning-delay-ms",
        "100",
        "--min-instances",
        "0",
        "--pseudo-label-every",
        "0",
        "--mongo-url",
        &mongo_url,
    ];
    args.extend_from_slice(extra);
    let cluster = Cluster::start(&args, &[]).await;
    (mongo, cluster, mongo_url)
}

fn fashion_items() -> Vec<Value> {
    let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
    let (inputs, _) = loadgen::inputs(&zoo, "fashion").unwrap();
    inputs
        .iter()
        .take(200)
        .map(|i| i[0]["data"][0].clone())
        .collect()
}

async fn mix_decisions(cluster: &Cluster) -> Vec<Value> {
    cluster.get("/v1/mix-decisions?limit=1000").await["decisions"]
        .as_array()
        .unwrap()
        .clone()
}

async fn in_mongo(url: &str, optimiser: &str) -> u64 {
    let client = mongodb::Client::with_uri_str(url).await.unwrap();
    client
        .database("cocktail")
        .collection::<mongodb::bson::Document>("mix_decisions")
        .count_documents(mongodb::bson::doc! { "optimiser": optimiser })
        .await
        .unwrap_or(0)
}

/// Batched queries (1 to 32 items) for `seconds` at `rate`, through the master.
async fn batched_load(cluster: &Cluster, items: &[Value], rate: f64, seconds: f64) -> usize {
    let sizes = cocktail_benches::hetero::Workload::new(1000, BatchSizes::DEFAULT, 5).batches;
    let url = cluster.url("/v2/models/fashion/infer");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..(rate * seconds) as usize {
        tokio::time::sleep_until((start + Duration::from_secs_f64(k as f64 / rate)).into()).await;
        let n = sizes[k % sizes.len()].min(32);
        let data: Vec<Value> = (0..n)
            .map(|j| items[(k + j) % items.len()].clone())
            .collect();
        let body = json!({
            "inputs": [{ "name": "image", "shape": [n], "datatype": "BYTES", "data": data }],
            "parameters": resnet_only(),
        });
        let (client, url) = (cluster.client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            client
                .post(&url)
                .json(&body)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += usize::from(t.await.unwrap());
    }
    ok
}

#[test]
fn ribbon_searches_a_pool_mix_on_live_workers() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_mongo, cluster, mongo_url) = runtime.block_on(start(&[
        "--controller-interval-s",
        "3600",
        "--reactive-interval-s",
        "3600",
    ]));
    let mut live = LiveEvaluator {
        handle: runtime.handle().clone(),
        client: cluster.client.clone(),
        master: cluster.url(""),
        task: "fashion".into(),
        model: "resnet".into(),
        types: TYPES.iter().map(|t| (*t).to_owned()).collect(),
        parameters: resnet_only(),
        // A 32-item batch takes 25 ms on the emulated GPU, 77 ms on an r5n.large, a
        // 21-item one about 55 ms there. The debug-built client, master and worker add
        // their own time on top: this seed's two 21-item queries took 65-72 ms end to end
        // on an r5n.large on a 2-core machine, and more on CI's, where at a 70 ms target
        // both missed in every configuration (31 of 33, so none met 95 %). 100 ms leaves
        // room for that and some queueing; the test is about Ribbon's search on live
        // workers, not about where a type's limit falls.
        qos_ms: 100.0,
        window: Duration::from_secs(4),
        sizes: BatchSizes {
            median: 4.0,
            sigma: 1.0,
            max: 32,
        },
        items: fashion_items(),
        input_name: "image".into(),
        seed: 3,
        ready_timeout: Duration::from_secs(90),
    };
    let space = Space {
        types: live.types.clone(),
        prices: vec![0.526, 0.149],
        max: vec![2, 2],
    };
    let mut ribbon = Ribbon::new(
        space,
        Settings {
            target: 0.95,
            ..Settings::default()
        },
    );
    let rate = 8.0;
    let mut measured = Vec::new();
    while let Some(config) = ribbon.suggest() {
        let m = live.measure(&config, rate).unwrap();
        println!(
            "{config:?}: {:.3} of {} queries in time",
            m.satisfaction, m.queries
        );
        assert!(m.queries > 10, "{m:?}");
        ribbon.observe(&config, m.satisfaction);
        measured.push((config, m.satisfaction));
    }
    let best = ribbon.best().expect("some configuration met 95 %").clone();
    println!("Ribbon: {best:?} after {} measurements", measured.len());
    assert!(
        measured.len() < ribbon.size(),
        "pruning spared some of the {} configurations",
        ribbon.size()
    );
    assert!(best.satisfaction >= 0.95);
    // Every measurement set the pool's mix, recorded in MongoDB.
    runtime.block_on(async {
        eventually("the mixes in MongoDB", Duration::from_secs(30), || async {
            in_mongo(&mongo_url, "manual").await >= measured.len() as u64
        })
        .await;
        let bad = cluster
            .client
            .put(cluster.url("/v1/pools/resnet/mix"))
            .json(&json!({ "instances": [{ "type": "g4dn.xlarge", "count": 99 }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status().as_u16(), 422);
        assert!(bad.text().await.unwrap().contains("`count`"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_mixes_types_with_kairos_and_the_dispatcher_matches() {
    let (_mongo, cluster, mongo_url) = start(&[
        "--pool-mix",
        "kairos",
        "--mix-types",
        "g4dn.xlarge,r5n.large",
        "--mix-budget",
        "0.9",
        "--mix-qos-ms",
        "40",
        "--controller-interval-s",
        "2",
    ])
    .await;
    eventually("a Kairos mix decision", Duration::from_secs(30), || async {
        !mix_decisions(&cluster).await.is_empty()
    })
    .await;
    // Before any query the batch mix is unknown (one item): the cheap type serves it all.
    // Batched load (1 to 32 items) shows queries the r5n.large cannot serve in time.
    let items = fashion_items();
    batched_load(&cluster, &items, 10.0, 6.0).await;
    eventually("a mix of both types", Duration::from_secs(60), || async {
        let decisions = mix_decisions(&cluster).await;
        decisions.last().is_some_and(|d| {
            d["config"]
                .as_array()
                .is_some_and(|c| c.iter().all(|n| n.as_u64() > Some(0)))
        })
    })
    .await;
    let decision = mix_decisions(&cluster).await.last().unwrap().clone();
    assert_eq!(decision["optimiser"], "kairos");
    assert!(
        decision["cost_per_hour"].as_f64().unwrap() <= 0.9,
        "{decision}"
    );
    assert!(
        !decision["evidence"]["top_bounds"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(decision["evidence"]["base"], "g4dn.xlarge", "{decision}");
    eventually("both types serving", Duration::from_secs(60), || async {
        let workers = cluster.get("/v1/workers").await;
        let types: Vec<String> = workers["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["instance_type"].as_str().map(str::to_owned))
            .collect();
        TYPES.iter().all(|t| types.iter().any(|s| s == t))
    })
    .await;
    let matched = || async {
        let metrics = reqwest::get(cluster.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics
            .lines()
            .find(|l| l.starts_with("cocktail_master_matched_total"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let before = matched().await;
    let ok = batched_load(&cluster, &items, 10.0, 4.0).await;
    assert!(ok >= 35, "{ok} of 40 batched queries answered");
    let after = matched().await;
    assert!(after - before >= 35.0, "{before} -> {after}");
    eventually(
        "Kairos' choices in MongoDB",
        Duration::from_secs(30),
        || async { in_mongo(&mongo_url, "kairos").await > 0 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_measures_ribbon_configurations_once_they_have_settled() {
    let (_mongo, cluster, mongo_url) = start(&[
        "--pool-mix",
        "ribbon",
        "--mix-types",
        "g4dn.xlarge,r5n.large",
        "--mix-max-per-type",
        "2",
        "--controller-interval-s",
        "4",
    ])
    .await;
    let items = fashion_items();
    // Load for eight intervals: a configuration is deployed in one, serves the whole
    // next one, and is measured by it.
    let ok = batched_load(&cluster, &items, 6.0, 32.0).await;
    // 192 batched queries; the mix changes under them and no query may fail for it.
    assert!(ok >= 182, "{ok} of 192 batched queries answered");
    let decisions = mix_decisions(&cluster).await;
    let ribbon: Vec<&Value> = decisions
        .iter()
        .filter(|d| d["optimiser"] == "ribbon")
        .collect();
    assert!(ribbon.len() >= 5, "{decisions:?}");
    let measured_of = |d: &Value| d["evidence"]["measured"].as_array().unwrap().len();
    for pair in ribbon.windows(2) {
        if measured_of(pair[1]) > measured_of(pair[0]) {
            // Measured only by a window that started with the configuration in place.
            assert_eq!(pair[0]["evidence"]["settled"], true, "{pair:?}");
            assert_eq!(pair[1]["current"], pair[0]["config"], "{pair:?}");
        }
    }
    let last = ribbon.last().unwrap();
    let measured = last["evidence"]["measured"].as_array().unwrap();
    assert!(!measured.is_empty(), "{last}");
    assert!(
        measured
            .iter()
            .all(|m| (0.0..=1.0).contains(&m["satisfaction"].as_f64().unwrap()))
    );
    eventually(
        "Ribbon's choices in MongoDB",
        Duration::from_secs(30),
        || async { in_mongo(&mongo_url, "ribbon").await >= 3 },
    )
    .await;
}
