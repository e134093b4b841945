//! A pool offered more than it can serve: the master refuses what it cannot answer in
//! time at once (429, `Retry-After`), serves the rest, and fails nothing with a 502.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::time::Duration;

use cocktail_tests::cluster::{Cluster, eventually};
use cocktail_tests::load::{Reply, SLOW_POOL, open_loop};

/// Calls a second the one instance of [`SLOW_POOL`] serves.
const CAPACITY: f64 = 22.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_and_a_half_times_a_pools_capacity_is_served_or_refused_never_failed() {
    // One instance and no scaling during the test (both control intervals 60 s).
    let args = [SLOW_POOL, &["--reactive-interval-s", "60"]].concat();
    let cluster = Cluster::start(&args, &[]).await;
    eventually("the instance", Duration::from_secs(30), || async {
        cluster.get("/v1/workers").await["workers"]
            .as_array()
            .is_some_and(|w| w.len() == 1)
    })
    .await;
    // 300 ms targets, met by a call alone; the late limit (1 s) bounds the queue.
    let seconds = 4.0;
    let replies = open_loop(&cluster, 2.5 * CAPACITY, seconds, 300.0, true).await;
    let with = |status: u16| replies.iter().filter(|r| r.status == status).count();
    let (served, refused) = (with(200), with(429));
    eprintln!(
        "{} requests: {served} served, {refused} refused with 429",
        replies.len()
    );
    let others: Vec<(usize, &Reply)> = replies
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status != 200 && r.status != 429)
        .collect();
    assert!(
        others.is_empty(),
        "neither served nor refused (index sent, reply): {others:?}"
    );
    assert!(refused > 0, "2.5x the capacity refuses some: {replies:?}");
    for r in replies.iter().filter(|r| r.status == 429) {
        assert_eq!(r.body["error_type"], "overloaded", "{r:?}");
        assert!(
            r.body["error"].as_str().unwrap().contains("`mlp_med`"),
            "the refusal names the pool: {r:?}"
        );
        let after: u64 = r.retry_after.as_deref().unwrap().parse().unwrap();
        assert!(after >= 1, "{r:?}");
    }
    // What is admitted is what the pool can finish: at least half its capacity over the
    // load (the rest is the queue's start and the calls in flight at the end).
    assert!(
        served as f64 >= 0.5 * CAPACITY * seconds,
        "{served} served in {seconds} s at {CAPACITY} calls a second"
    );
    // Nothing is stuck once the load stops: the next request is served.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = open_loop(&cluster, 1.0, 1.0, 300.0, true).await;
    assert_eq!(after[0].status, 200, "{after:?}");
}
