//! Member calls of concurrent requests to one worker go out joined in one batch call
//! (`--join-calls-us`): each request still gets its own rows, and one request's bad input
//! fails only that request.

use super::*;

/// Concurrent requests, enough that calls to the one worker overlap.
const CLIENTS: usize = 16;
const ROUNDS: usize = 8;

/// One model pinned, a generous target: every request is one call to the one worker.
fn pinned(images: &[String]) -> Value {
    image_request(
        images,
        json!({ "latency_ms": 2000, "accuracy": 0.5, "models": "mlp_med" }),
    )
}

/// The answer's class and the probability the one member gave it (its vote's weight).
fn class_and_top(body: &Value) -> (u64, f64) {
    let class = outputs(body, "class")[0].as_u64().unwrap();
    let top = body["parameters"]["votes"][0]["weight"][0]
        .as_f64()
        .unwrap_or_else(|| panic!("no vote weight in {body}"));
    (class, top)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_to_one_worker_are_joined_and_each_request_gets_its_own_answer() {
    // The defaults a user gets: `mlp_med`'s inference is well within the linger.
    let cluster = Cluster::start(&[], &["mlp_med"]).await;
    let (images, _) = fashion_images(CLIENTS);
    // Each image alone first: what the model answers for it.
    let mut alone = Vec::new();
    for image in &images {
        let (status, body) = cluster
            .post(
                "/v2/models/fashion/infer",
                &pinned(std::slice::from_ref(image)),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        alone.push(class_and_top(&body));
    }
    assert!(
        alone.iter().any(|a| a.0 != alone[0].0),
        "the images must not all get one class, or a mix-up could not show: {alone:?}"
    );

    let joined_before = cluster
        .metric("cocktail_master_member_calls_joined_total")
        .await;
    for _ in 0..ROUNDS {
        let answers = futures_util::future::join_all(images.iter().map(|image| {
            let request = pinned(std::slice::from_ref(image));
            let cluster = &cluster;
            async move { cluster.post("/v2/models/fashion/infer", &request).await }
        }))
        .await;
        for (i, (status, body)) in answers.iter().enumerate() {
            assert_eq!(*status, 200, "{body}");
            let (class, top) = class_and_top(body);
            assert_eq!(class, alone[i].0, "image {i} answered as alone: {body}");
            assert!(
                (top - alone[i].1).abs() < 2e-3,
                "image {i}'s probabilities are its own: {top} against {} alone",
                alone[i].1
            );
        }
    }
    let joined = cluster
        .metric("cocktail_master_member_calls_joined_total")
        .await
        - joined_before;
    assert!(
        joined >= 2.0,
        "{} concurrent calls to one worker, none joined",
        CLIENTS * ROUNDS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_input_in_a_joined_call_fails_only_its_own_request() {
    let cluster = Cluster::start(&[], &["mlp_med"]).await;
    let (images, _) = fashion_images(CLIENTS - 1);
    let undecodable = "bm90IGFuIGltYWdl".to_owned();
    let joined_before = cluster
        .metric("cocktail_master_member_calls_joined_total")
        .await;
    assert_eq!(
        cluster
            .metric("cocktail_master_joined_calls_refused_total")
            .await,
        0.0
    );
    let mut bad_answers = 0;
    for _ in 0..ROUNDS {
        let mut requests: Vec<Value> = images
            .iter()
            .map(|image| pinned(std::slice::from_ref(image)))
            .collect();
        requests.insert(CLIENTS / 2, pinned(std::slice::from_ref(&undecodable)));
        let answers = futures_util::future::join_all(requests.iter().map(|request| {
            let cluster = &cluster;
            async move { cluster.post("/v2/models/fashion/infer", request).await }
        }))
        .await;
        for (i, (status, body)) in answers.iter().enumerate() {
            if i == CLIENTS / 2 {
                assert_eq!(*status, 422, "the bad image is refused: {body}");
                assert!(body["error"].as_str().unwrap().contains("image"), "{body}");
                bad_answers += 1;
            } else {
                assert_eq!(*status, 200, "a good image beside a bad one: {body}");
            }
        }
    }
    assert_eq!(bad_answers, ROUNDS);
    let joined = cluster
        .metric("cocktail_master_member_calls_joined_total")
        .await
        - joined_before;
    let split = cluster
        .metric("cocktail_master_joined_calls_refused_total")
        .await;
    assert!(
        joined >= 2.0 && split >= 1.0,
        "the bad image never went in a joined call ({joined} calls joined, {split} joined calls refused): the test shows nothing"
    );
}
