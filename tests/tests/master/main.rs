//! The master end to end: real master and worker processes, real ONNX Runtime, real
//! Redis. Workers register through the control plane as in production.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::time::{Duration, Instant};

use cocktail_common::{Input, Predictions, TestSet, Zoo};
use cocktail_policy::estimate::scored_items;
use cocktail_tests::cluster::{Cluster, Redis, image_request, png_base64};
use cocktail_tests::zoo_manifest;
use serde_json::{Value, json};

mod deadlines;
mod dropped;
mod inputs;
mod joined;
mod selection;

/// The fashion models that answer within 43 µs of inference (profile, 1 thread). The
/// tests start workers for these only, so they are the candidates of a generous
/// end-to-end target (`latency_ms = 50`, for debug builds on a busy machine).
const FAST_FASHION: &[&str] = &[
    "linear",
    "mlp_tiny",
    "mlp_small",
    "cnn_tiny",
    "mlp_med",
    "dwsep",
    "lenet",
    "cnn_small",
];

/// The first `count` test images of the half selection does not estimate on, and their
/// labels.
fn fashion_images(count: usize) -> (Vec<String>, Vec<usize>) {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let test = TestSet::load(&zoo, "fashion").unwrap();
    let scored = FIRST_SCORED..FIRST_SCORED + count;
    assert_eq!(scored_items(test.items.len()).0, FIRST_SCORED);
    let images = test.items[scored.clone()]
        .iter()
        .map(|item| match item {
            Input::Image(g) => png_base64(g.width, g.height, &g.pixels),
            Input::Text(_) => panic!("fashion items are images"),
        })
        .collect();
    (images, test.labels[scored].to_vec())
}

/// Where [`fashion_images`] start in the 10,000-item test set.
const FIRST_SCORED: usize = 5_000;

fn outputs(body: &Value, name: &str) -> Vec<Value> {
    body["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no output {name} in {body}"))["data"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_and_a_sentence_are_classified_by_ensembles_shared_through_redis() {
    let redis = Redis::start().await;
    let url = redis.url();
    let args = ["--redis-url", url.as_str(), "--pseudo-label-every", "1"];
    let cluster = Cluster::start(
        &args,
        &["mlp_med", "dwsep", "cnn_small", "boe", "boe_mlp", "gru"],
    )
    .await;

    // An image at a constraint no single fast model meets: an ensemble answers.
    let (images, labels) = fashion_images(1);
    let parameters = json!({ "latency_ms": 50, "accuracy": 0.95 });
    let (status, body) = cluster
        .post(
            "/v2/models/fashion/infer",
            &image_request(&images, parameters.clone()),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let p = &body["parameters"];
    let models = p["models"].as_array().unwrap();
    assert_eq!(models.len(), 3, "{p}");
    assert_eq!(p["votes"].as_array().unwrap().len(), 3);
    for vote in p["votes"].as_array().unwrap() {
        assert!(models.contains(&vote["model"]));
        let weight = vote["weight"][0].as_f64().unwrap();
        assert!(weight > 0.5 && weight <= 1.0, "{vote}");
    }
    assert_eq!(p["cache_hit"], false);
    assert_eq!(p["degraded"], false);
    assert_eq!(p["scheme"], "majority");
    assert_eq!(p["interval"]["seconds"], 30.0);
    assert_eq!(outputs(&body, "class")[0], labels[0], "{body}");
    assert_eq!(outputs(&body, "scores").len(), 10);

    // The selection is in Redis under a namespaced key, with a TTL.
    let key = "cocktail:selection:fashion|50|0.95|accuracy";
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let value = redis.command(&format!("GET \"{key}\"")).await.unwrap();
        if value.contains("mlp_med") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "selection never reached Redis: {value}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ttl = redis.command(&format!("TTL \"{key}\"")).await.unwrap();
    assert!(
        ttl.trim_start_matches(':').trim().parse::<i64>().unwrap() > 0,
        "{ttl}"
    );
    let (_, again) = cluster
        .post(
            "/v2/models/fashion/infer",
            &image_request(&images, parameters.clone()),
        )
        .await;
    assert_eq!(again["parameters"]["cache_hit"], true);

    // A second master sharing the Redis serves the key from the cache at once.
    let other = Cluster::start(&args, &[]).await;
    for w in cluster.get("/v1/workers").await["workers"]
        .as_array()
        .unwrap()
    {
        let registration = json!({ "id": w["id"], "model": w["model"], "url": w["url"],
            "packing_factor": w["packing_factor"], "queue_items": 64, "threads": 1 });
        assert_eq!(
            other.post("/v1/workers/register", &registration).await.0,
            200
        );
    }
    let (status, shared) = other
        .post(
            "/v2/models/fashion/infer",
            &image_request(&images, parameters),
        )
        .await;
    assert_eq!(status, 200, "{shared}");
    assert_eq!(shared["parameters"]["cache_hit"], true, "{shared}");
    assert_eq!(shared["parameters"]["models"], p["models"]);

    // A sentence through /v1/classify (JSON), then an image as a multipart upload.
    let (status, sentence) = cluster
        .post(
            "/v1/classify",
            &json!({ "task": "sentiment", "text": "What a wonderful, delightful film.",
                     "latency_ms": 0.2, "accuracy": 0.9 }),
        )
        .await;
    assert_eq!(status, 200, "{sentence}");
    assert_eq!(sentence["label"], "positive", "{sentence}");
    assert!(
        sentence["models"].as_array().unwrap().len() >= 2,
        "{sentence}"
    );
    assert_eq!(
        sentence["votes"].as_array().unwrap().len(),
        sentence["models"].as_array().unwrap().len()
    );
    let png = std::fs::read(
        cocktail_tests::workspace_root().join("models/samples/fashion/0001_pullover.png"),
    )
    .unwrap();
    let form = reqwest::multipart::Form::new()
        .text("task", "fashion")
        .text("latency_ms", "5")
        .text("accuracy", "0.5")
        .part(
            "image",
            reqwest::multipart::Part::bytes(png).file_name("0001_pullover.png"),
        );
    let upload: Value = cluster
        .client
        .post(cluster.url("/v1/classify"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(upload["label"], "Pullover", "{upload}");
    assert_eq!(
        upload["models"].as_array().unwrap().len(),
        1,
        "one model suffices: {upload}"
    );

    // Feedback on an answered request; unlabelled requests are pseudo-labelled.
    let (status, fed) = cluster
        .post(
            "/v1/feedback",
            &json!({ "id": sentence["id"], "label": "positive" }),
        )
        .await;
    assert_eq!(status, 200, "{fed}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster
        .metric("cocktail_master_labels_total{kind=\"pseudo\"}")
        .await
        < 1.0
    {
        assert!(Instant::now() < deadline, "no pseudo-label was recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        cluster
            .metric("cocktail_master_labels_total{kind=\"real\"}")
            .await
            >= 1.0
    );

    // The API describes itself.
    let openapi = cluster.get("/openapi.json").await;
    for path in [
        "/v2/models/{task}/infer",
        "/v1/classify",
        "/v1/feedback",
        "/v1/workers/register",
        "/v1/pools",
        "/v1/pools/{model}/mix",
        "/v1/mix-decisions",
        "/v1/instances",
        "/v1/decisions",
        "/v1/cost",
        "/metrics",
    ] {
        assert!(
            openapi["paths"][path].is_object(),
            "{path} missing from /openapi.json"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_2000_labelled_images_the_ensemble_beats_the_best_single_candidate() {
    const ITEMS: usize = 2000;
    const BATCH: usize = 20;
    // O2 looks at windows of 400 labelled items. No hedging: on a loaded machine a
    // hedge's substitute would vote instead of a member, and this is about selection.
    let args = [
        "--interval-requests",
        "20",
        "--pseudo-label-every",
        "0",
        "--hedge-min-ms",
        "60000",
    ];
    let cluster = Cluster::start(&args, FAST_FASHION).await;
    let (images, labels) = fashion_images(ITEMS);

    // The best single candidate on the same items, from the recorded predictions (which
    // the workers reproduce exactly; see the worker tests).
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let recorded = Predictions::load(
        &zoo.resolve(zoo.task("fashion").unwrap().predictions.as_deref().unwrap()),
    )
    .unwrap();
    let single = |model: &str| {
        let m = recorded.model_index(model).unwrap();
        (0..ITEMS)
            .filter(|&i| usize::from(recorded.classes[m][FIRST_SCORED + i]) == labels[i])
            .count() as f64
            / ITEMS as f64
    };
    let (best_model, best) = FAST_FASHION
        .iter()
        .map(|m| (*m, single(m)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let target = 0.89;
    let zoo_best = FAST_FASHION
        .iter()
        .map(|m| zoo.model(m).unwrap().accuracy)
        .fold(0.0, f64::max);
    assert!(zoo_best < target, "no single candidate reaches the target");

    let mut correct = 0;
    let mut sizes = Vec::new();
    let mut substituted = 0;
    // Every candidate fits 500 ms whatever the machine's load: at 50 ms a busy debug
    // build once pushed dwsep's measured overhead past the target, O1 chose again without
    // it, and the vote of the four weaker models (84 %) lost to mlp_med. That is right
    // under such a target, but this test is about selection among the same candidates.
    for (chunk, truth) in images.chunks(BATCH).zip(labels.chunks(BATCH)) {
        let parameters = json!({ "latency_ms": 500, "accuracy": target, "label": truth });
        let (status, body) = cluster
            .post(
                "/v2/models/fashion/infer",
                &image_request(chunk, parameters),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["parameters"]["degraded"], false, "{body}");
        sizes.push(body["parameters"]["models"].as_array().unwrap().len());
        substituted += body["parameters"]["substitutes"]
            .as_array()
            .map_or(0, Vec::len);
        correct += outputs(&body, "class")
            .iter()
            .zip(truth)
            .filter(|(c, t)| c.as_u64() == Some(**t as u64))
            .count();
    }
    let ensemble = correct as f64 / ITEMS as f64;
    println!(
        "ensemble {ensemble:.4} vs best single candidate {best_model} {best:.4}; sizes {sizes:?}; {substituted} substitutes"
    );
    assert!(sizes.iter().all(|&s| s >= 2), "{sizes:?}");
    assert!(
        ensemble > best,
        "ensemble {ensemble} vs {best_model} {best}; {substituted} substitutes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o2_shrinks_to_a_bare_majority_grows_when_accuracy_drops_and_reverts_what_did_not_help() {
    let args = ["--interval-requests", "10", "--pseudo-label-every", "0"];
    let cluster = Cluster::start(&args, FAST_FASHION).await;
    let (images, _) = fashion_images(40);
    let key = "fashion|50|0.99|accuracy";
    let parameters = json!({ "latency_ms": 50, "accuracy": 0.99 });

    // Serves one interval; feedback labels each answer with `relabel(answer)`. Returns
    // the models of the interval's first answer.
    let interval = |relabel: fn(u64) -> u64, offset: usize| {
        let cluster = &cluster;
        let images = &images;
        let parameters = parameters.clone();
        async move {
            let mut models: Vec<String> = Vec::new();
            for image in &images[offset..offset + 10] {
                let (status, body) = cluster
                    .post(
                        "/v2/models/fashion/infer",
                        &image_request(std::slice::from_ref(image), parameters.clone()),
                    )
                    .await;
                assert_eq!(status, 200, "{body}");
                if models.is_empty() {
                    models = serde_json::from_value(body["parameters"]["models"].clone()).unwrap();
                }
                let answer = outputs(&body, "class")[0].as_u64().unwrap();
                let (status, fed) = cluster
                    .post(
                        "/v1/feedback",
                        &json!({ "id": body["id"], "label": relabel(answer) }),
                    )
                    .await;
                assert_eq!(status, 200, "{fed}");
            }
            models
        }
    };

    let first = interval(|a| a, 0).await;
    assert!(
        first.len() >= 3,
        "O1 should need several models for 0.99: {first:?}"
    );
    // The first interval ended on its 10th request, before that request's feedback: its
    // window held 9 answers, all right by the labels. When their votes were unanimous
    // often enough it pruned already; the second interval's window, right again, does.
    let pruned = cluster.members(key).await;
    println!("O1 chose {first:?}");
    interval(|a| a, 10).await;
    let after_prune = cluster.members(key).await;
    println!("after two right intervals: {after_prune:?} (after one: {pruned:?})");
    assert_eq!(
        after_prune.len(),
        first.len() / 2 + 1,
        "{after_prune:?} from {first:?}"
    );
    assert!(after_prune.iter().all(|m| first.contains(m)));

    // Labels say every answer was wrong: the ensemble grows by the one or two unused
    // candidates that raise the majority estimated on the recorded answers.
    interval(|a| (a + 1) % 10, 20).await;
    let grown = cluster.members(key).await;
    println!("after a wrong interval: {grown:?}");
    assert!(
        (after_prune.len() + 1..=after_prune.len() + 2).contains(&grown.len()),
        "{grown:?}"
    );
    assert!(after_prune.iter().all(|m| grown.contains(m)));

    // Still every answer wrong: with the addition the majority was right no more often
    // than without it, so the addition is taken back.
    interval(|a| (a + 1) % 10, 30).await;
    let reverted = cluster.members(key).await;
    println!("after the addition's trial: {reverted:?}");
    assert_eq!(reverted, after_prune);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_worker_under_load_loses_no_request() {
    let mut cluster = Cluster::start(&[], &["mlp_med", "dwsep", "cnn_small"]).await;
    let (images, _) = fashion_images(64);
    let parameters = json!({ "latency_ms": 50, "accuracy": 0.95 });
    let cluster_ref = &cluster;
    let run = |seconds: f64| {
        let parameters = parameters.clone();
        let images = images.clone();
        async move {
            let stop = Instant::now() + Duration::from_secs_f64(seconds);
            let mut lanes = Vec::new();
            for lane in 0..8 {
                let parameters = parameters.clone();
                let images = images.clone();
                let client = cluster_ref.client.clone();
                let url = cluster_ref.url("/v2/models/fashion/infer");
                lanes.push(tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut i = lane;
                    while Instant::now() < stop {
                        let body = image_request(&images[i % 64..i % 64 + 1], parameters.clone());
                        let response = client.post(&url).json(&body).send().await.unwrap();
                        let status = response.status().as_u16();
                        let body: Value = response.json().await.unwrap();
                        seen.push((status, body["parameters"]["degraded"] == true, body));
                        i += 8;
                    }
                    seen
                }));
            }
            lanes
        }
    };
    let lanes = run(4.0).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Crash one member's only worker.
    let victim = cluster
        .workers
        .iter()
        .position(|(m, _)| m == "dwsep")
        .unwrap();
    let (_, mut dead) = cluster.workers.remove(victim);
    dead.kill().await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let mut answers = Vec::new();
    for lane in lanes {
        answers.extend(lane.await.unwrap());
    }
    let failed: Vec<_> = answers.iter().filter(|(s, _, _)| *s != 200).collect();
    assert!(
        failed.is_empty(),
        "{} of {} requests failed: {:?}",
        failed.len(),
        answers.len(),
        failed.first()
    );
    let degraded = answers.iter().filter(|(_, d, _)| *d).count();
    // Answers without dwsep say degraded and name it among the failed members, with its
    // crash rather than a missed deadline (on a busy machine, members late for the
    // 50 ms target are left out of the vote too, and say so).
    let crashed = |body: &Value| {
        body["parameters"]["failed"]
            .as_array()
            .is_some_and(|failed| {
                failed
                    .iter()
                    .any(|f| f["model"] == "dwsep" && f["error"] != "missed the deadline")
            })
    };
    let without_dwsep = answers
        .iter()
        .filter(|(_, d, body)| *d && crashed(body))
        .count();
    println!(
        "{} requests, {degraded} degraded, {without_dwsep} for dwsep's crash",
        answers.len()
    );
    assert!(
        without_dwsep > 0,
        "answers without dwsep must say degraded and name it: {:?}",
        answers
            .iter()
            .rev()
            .find(|(_, d, _)| *d)
            .map(|(.., body)| body)
    );

    // A replacement registers and the ensemble is whole again.
    cluster.add_worker("dwsep").await;
    let (status, body) = cluster
        .post(
            "/v2/models/fashion/infer",
            &image_request(&images[..1], parameters.clone()),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["parameters"]["degraded"], false, "{body}");
    assert_eq!(body["parameters"]["votes"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_keep_succeeding_when_redis_stops() {
    let mut redis = Redis::start().await;
    let url = redis.url();
    let args = ["--redis-url", url.as_str()];
    let cluster = Cluster::start(&args, &["mlp_med", "dwsep", "cnn_small"]).await;
    let (images, _) = fashion_images(1);
    let ask = |accuracy: f64| {
        let body = image_request(&images, json!({ "latency_ms": 50, "accuracy": accuracy }));
        let cluster = &cluster;
        async move { cluster.post("/v2/models/fashion/infer", &body).await }
    };
    assert_eq!(ask(0.95).await.0, 200);
    redis.stop().await;
    // Known keys and new keys (which must look in Redis first) keep being served.
    for i in 0..20 {
        let (status, body) = ask(0.95 - f64::from(i % 4) * 0.001).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["parameters"]["degraded"], false, "{body}");
    }
    let errors = cluster.metric("cocktail_master_cache_errors_total").await;
    println!("cache errors while Redis was down: {errors}");
    assert!(errors >= 1.0, "Redis failures must be counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_spills_to_its_burst_instance() {
    use cocktail_tests::cluster::{Process, eventually};
    // dwsep's packing factor is 1 at one thread: a second concurrent request would wait.
    // No calls join, so its instance takes that packing factor, not more slots for the hop.
    let cluster = Cluster::start(&["--join-calls-us", "0"], &["dwsep"]).await;
    let args: Vec<String> = [
        "--model",
        "dwsep",
        "--port",
        "0",
        "--master",
        &cluster.master.url,
        "--burst",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let _burst = Process::start("cocktail-worker", &args).await;
    eventually("the burst instance", Duration::from_secs(30), || async {
        cluster.get("/v1/workers").await["workers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["burst"] == true)
    })
    .await;
    let (images, _) = fashion_images(8);
    let parameters = json!({ "latency_ms": 50, "accuracy": 0.5, "objective": "latency" });
    let mut lanes = Vec::new();
    for lane in 0..8 {
        let body = image_request(&images[lane..=lane], parameters.clone());
        let (client, url) = (
            cluster.client.clone(),
            cluster.url("/v2/models/fashion/infer"),
        );
        lanes.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..20 {
                statuses.push(
                    client
                        .post(&url)
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .status()
                        .as_u16(),
                );
            }
            statuses
        }));
    }
    for lane in lanes {
        assert!(lane.await.unwrap().iter().all(|s| *s == 200));
    }
    let spills = cluster.metric("cocktail_master_burst_spills_total").await;
    println!("{spills} of 160 requests spilled to the burst instance");
    assert!(spills > 0.0 && spills < 160.0, "{spills}");
}
