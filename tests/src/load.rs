//! Open-loop load on a cluster's fashion task, for the tests that need a queue: requests
//! go out at a fixed rate whatever the answers take, as real clients send them.

#![allow(
    clippy::unwrap_used,
    reason = "test harness: a request that cannot be sent fails the test"
)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{Cluster, image_request, png_base64};

/// A master's flags for one slow pool: `mlp_med` on r5n.large, launched by the local
/// provider and emulated 10,000 times slower than modelled (about 0.22 s a call, 5 at
/// once: about 22 calls a second), the periodic control step every 60 s. Tests add their
/// reactive interval.
pub const SLOW_POOL: &[&str] = &[
    "--provider",
    "local",
    "--models",
    "mlp_med",
    "--instance-types",
    "r5n.large",
    "--emulate-types",
    "--emulate-scale",
    "10000",
    "--controller-interval-s",
    "60",
    "--provisioning-delay-ms",
    "100",
    "--max-threads",
    "1",
];

/// What one request got back.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// The answer's `parameters` (its provenance), or the error body of a refusal.
    pub body: Value,
    /// The `Retry-After` header, when there is one.
    pub retry_after: Option<String>,
}

/// An image request with a `latency_ms` target (and 95 % accuracy); each `variant` a
/// different image, so that the master's answer cache does not answer it.
pub fn image(latency_ms: f64, variant: usize) -> Value {
    let pixels: Vec<u8> = (0..28 * 28).map(|i| ((i + variant) % 251) as u8).collect();
    image_request(
        &[png_base64(28, 28, &pixels)],
        json!({ "latency_ms": latency_ms, "accuracy": 0.95 }),
    )
}

/// Sends `rate` requests per second for `seconds` to the fashion task, each with a
/// `latency_ms` target and a different image if `distinct` (else one image, which the
/// answer cache may serve); returns every reply in the order sent.
pub async fn open_loop(
    cluster: &Cluster,
    rate: f64,
    seconds: f64,
    latency_ms: f64,
    distinct: bool,
) -> Vec<Reply> {
    let url = cluster.url("/v2/models/fashion/infer");
    let start = Instant::now();
    let total = (rate * seconds) as usize;
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        let at = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(at.into()).await;
        let body = image(latency_ms, if distinct { i } else { 0 });
        let (client, url) = (cluster.client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let response = client.post(&url).json(&body).send().await.unwrap();
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let answer: Value = response.json().await.unwrap_or_default();
            let body = if status == 200 {
                answer["parameters"].clone()
            } else {
                answer
            };
            Reply {
                status,
                body,
                retry_after,
            }
        }));
    }
    let mut replies = Vec::with_capacity(total);
    for t in tasks {
        replies.push(t.await.unwrap());
    }
    replies
}

/// What a live run and the simulation of the same requests must agree on (issues 14
/// and 34): nothing failed or dropped, the same `requests`, accuracy met within 3 points
/// (a threshold on a window whose accuracy sits near the target: a few answers completing
/// in another order move it by a point or two) and models per request within 10 %.
pub fn assert_agrees(
    live: &cocktail_benches::loadgen::LoadReport,
    requests: u64,
    accuracy_met: f64,
    models_per_request: f64,
) {
    assert_accuracy_agrees(live, requests, accuracy_met, 0.03);
    assert!(
        models_agree(live.models_per_request, models_per_request),
        "models per request: live {} vs simulated {models_per_request}",
        live.models_per_request
    );
}

/// A live run sent `requests` and every one was answered: none failed or dropped.
pub fn assert_all_answered(live: &cocktail_benches::loadgen::LoadReport, requests: u64) {
    assert_eq!(live.errors.values().sum::<u64>(), 0, "{live:?}");
    assert_eq!(live.dropped, 0);
    assert_eq!(live.sent, requests, "the same requests");
}

/// Whether a live run's models per request are within 10 % of a simulation's.
pub fn models_agree(live: f64, simulated: f64) -> bool {
    (0.9..=1.1).contains(&(live / simulated))
}

/// [`assert_agrees`] without models per request: nothing failed or dropped, the same
/// `requests`, accuracy met within `points` (a share: 0.03 is 3 points).
pub fn assert_accuracy_agrees(
    live: &cocktail_benches::loadgen::LoadReport,
    requests: u64,
    accuracy_met: f64,
    points: f64,
) {
    assert_all_answered(live, requests);
    assert!(
        (live.accuracy_met - accuracy_met).abs() <= points,
        "accuracy met: live {} vs simulated {accuracy_met}",
        live.accuracy_met
    );
}
