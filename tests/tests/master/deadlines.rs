//! Deadlines and pinned ensembles: a request whose members all miss its latency target
//! gets their late answer, flagged, unless it asks for strict deadlines; `models` pins
//! the ensemble, and unknown or unserved models are refused naming the field; a member
//! stuck on a hung instance is hedged on another instance of its pool.

use super::*;

/// A latency target no model's call can meet on any machine: every member is late.
const UNMEETABLE_MS: f64 = 0.01;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_late_for_the_target_give_a_late_answer_unless_deadlines_are_strict() {
    // The defaults a user gets: no deadline grace.
    let cluster = Cluster::start(&[], &["mlp_med", "dwsep", "cnn_small"]).await;
    let (images, labels) = fashion_images(1);
    let pinned = |strict: bool| {
        json!({ "latency_ms": UNMEETABLE_MS, "accuracy": 0.5,
                "models": "mlp_med,dwsep,cnn_small", "strict_deadline": strict })
    };

    let (status, body) = cluster
        .post(
            "/v2/models/fashion/infer",
            &image_request(&images, pinned(false)),
        )
        .await;
    assert_eq!(status, 200, "a late answer, not an error: {body}");
    let p = &body["parameters"];
    assert_eq!(p["latency_met"], false, "{p}");
    // It answered as soon as one member was back: the others count as late.
    let voted = p["votes"].as_array().unwrap().len();
    assert!(voted >= 1, "{p}");
    let late = p["failed"].as_array().map_or(0, Vec::len);
    assert_eq!(voted + late, 3, "every member voted or is listed late: {p}");
    assert!(outputs(&body, "class")[0].as_u64().unwrap() < 10, "{body}");
    let _ = labels;

    let (status, body) = cluster
        .post(
            "/v2/models/fashion/infer",
            &image_request(&images, pinned(true)),
        )
        .await;
    assert_eq!(
        status, 504,
        "strict deadlines: nobody answered in time: {body}"
    );
    assert_eq!(body["error_type"], "members_late", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("missed the deadline"),
        "{body}"
    );

    // The same through /v1/classify, the flag as JSON.
    let (status, body) = cluster
        .post(
            "/v1/classify",
            &json!({ "task": "fashion", "image": images[0], "latency_ms": UNMEETABLE_MS,
                     "accuracy": 0.5, "models": ["dwsep"] }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["latency_met"], false, "{body}");
    assert_eq!(body["models"], json!(["dwsep"]), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_ensemble_is_served_as_named_and_bad_pins_name_the_field() {
    let cluster = Cluster::start(&[], &["mlp_med", "dwsep", "cnn_small"]).await;
    let (images, _) = fashion_images(1);
    let request = |models: Value| {
        image_request(
            &images,
            json!({ "latency_ms": 500, "accuracy": 0.5, "models": models }),
        )
    };
    // At 0.5 selection serves one model; the pin serves all three.
    let (status, body) = cluster
        .post(
            "/v2/models/fashion/infer",
            &request(json!("cnn_small, mlp_med,dwsep")),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let p = &body["parameters"];
    assert_eq!(p["models"], json!(["cnn_small", "mlp_med", "dwsep"]), "{p}");
    assert_eq!(p["votes"].as_array().unwrap().len(), 3, "{p}");
    // A pinned request teaches selection nothing: no constraint key was created.
    let ensembles = cluster.get("/v1/ensembles").await;
    assert_eq!(ensembles["ensembles"], json!([]), "{ensembles}");

    for (models, says) in [
        (json!("resnet_9000"), "is not a model of this task"),
        (json!("resnet"), "has no worker serving it now"),
        (json!("dwsep,dwsep"), "twice"),
        (json!(""), "must name at least one model"),
        (json!(7), "must be a comma-separated string"),
    ] {
        let (status, body) = cluster
            .post("/v2/models/fashion/infer", &request(models.clone()))
            .await;
        assert_eq!(status, 422, "{models}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(
            error.contains("`models`") && error.contains(says),
            "{models}: {body}"
        );
    }
}

/// A worker that stops answering (SIGSTOP: its connections stay open) holds the calls
/// sent to it until they time out. Such a call is hedged on another instance of the
/// member's pool: with two `dwsep` workers and the first stopped, every request pinned to
/// `dwsep` (no substitute may stand in) with strict deadlines is answered. Before the
/// hedge could go to another instance, the requests sent to the stopped one failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_on_a_hung_instance_is_hedged_on_another_instance_of_its_pool() {
    use cocktail_tests::cluster::{Signal, signal};
    let cluster = Cluster::start(&[], &["dwsep", "dwsep"]).await;
    let (images, _) = fashion_images(1);
    let body = image_request(
        &images,
        json!({ "latency_ms": 500, "accuracy": 0.5, "models": "dwsep", "strict_deadline": true }),
    );
    // The pool learns its typical call, which sets when a call is hedged.
    for _ in 0..5 {
        let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
        assert_eq!(status, 200, "{answer}");
    }
    // Free instances tie, and the first registered is chosen: the one stopped.
    let stopped = i32::try_from(cluster.workers[0].1.child.id().unwrap()).unwrap();
    signal(stopped, Signal::SIGSTOP);
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
        assert_eq!(answer["parameters"]["models"], json!(["dwsep"]), "{answer}");
        statuses.push(status);
    }
    let hedged = cluster
        .metric("cocktail_master_hedges_total{model=\"dwsep\",on=\"instance\"}")
        .await;
    signal(stopped, Signal::SIGCONT);
    println!("statuses {statuses:?}, {hedged} hedged on the other instance");
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert!(hedged >= 1.0, "{hedged}");
}

/// Both instances of a member's pool stop answering at once (in the compose fault test, a
/// pool's two containers killed and cut off together): the hedge on the other instance
/// hangs too, and a substitute is asked after the same wait. With `dwsep`'s two workers
/// stopped, every request its selection serves with `dwsep` is answered by `linear`,
/// within the target and with strict deadlines. Before the second hedge, such requests
/// failed with 504 until both instances were out of rotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_every_instance_hangs_is_hedged_on_a_substitute() {
    use cocktail_tests::cluster::{Signal, signal};
    let cluster = Cluster::start(&[], &["dwsep", "dwsep", "linear"]).await;
    let (images, _) = fashion_images(1);
    // `dwsep` alone meets 0.86; `linear` does not, and may stand in.
    let body = image_request(
        &images,
        json!({ "latency_ms": 500, "accuracy": 0.86, "strict_deadline": true }),
    );
    for _ in 0..5 {
        let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["parameters"]["models"], json!(["dwsep"]), "{answer}");
    }
    let stopped: Vec<i32> = cluster.workers[..2]
        .iter()
        .map(|w| i32::try_from(w.1.child.id().unwrap()).unwrap())
        .collect();
    for pid in &stopped {
        signal(*pid, Signal::SIGSTOP);
    }
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
        statuses.push((status, answer["parameters"]["substitutes"].clone()));
    }
    let hedged = cluster
        .metric("cocktail_master_hedges_total{model=\"dwsep\",on=\"substitute\"}")
        .await;
    for pid in &stopped {
        signal(*pid, Signal::SIGCONT);
    }
    println!("statuses {statuses:?}, {hedged} hedged on a substitute");
    assert!(statuses.iter().all(|(s, _)| *s == 200), "{statuses:?}");
    assert!(hedged >= 1.0, "{hedged}");
}
