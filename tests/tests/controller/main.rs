//! The resource controller with the local provider: real worker processes launched,
//! registered, revoked and recycled by the master itself. `scaling`: pools that follow
//! the load (predictive, reactive, MArk's greedy policy, the loop shared with the
//! simulator); `spot`: revoked and interrupted spot instances; `outages`: the state store
//! and the provider failing under load.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use cocktail_tests::cluster::Cluster;
use cocktail_tests::load::open_loop;
use serde_json::Value;

mod outages;
mod scaling;
mod spot;

const POOLS: &str = "mlp_med,dwsep,cnn_small,linear";

/// The load-step tests' cluster: capacity is made small (100 ms of overhead per request)
/// so that a modest load needs more instances; r5n.large has 2 vCPUs, so Pf is the
/// profile's 2-thread one. No calls join (`--join-calls-us 0`), so no instance counts
/// that overhead as a hop in its slots: it takes its profile's Pf, as the load needs.
/// Each test adds its intervals.
const LOAD_STEP: &[&str] = &[
    "--join-calls-us",
    "0",
    "--provider",
    "local",
    "--models",
    POOLS,
    "--instance-types",
    "r5n.large",
    "--importance-window-s",
    "4",
    "--overhead-ms",
    "100",
    "--idle-timeout-s",
    "3",
    "--provisioning-delay-ms",
    "200",
    "--max-threads",
    "1",
    "--pseudo-label-every",
    "0",
];

async fn registered(cluster: &Cluster) -> Vec<Value> {
    cluster.get("/v1/workers").await["workers"]
        .as_array()
        .unwrap()
        .clone()
}

async fn count(cluster: &Cluster, model: &str) -> usize {
    registered(cluster)
        .await
        .iter()
        .filter(|w| w["model"] == model && w["draining"] == false && w["down"] == false)
        .count()
}

async fn decisions(cluster: &Cluster) -> Vec<Value> {
    cocktail_tests::cluster::decisions(&cluster.master.url).await
}

fn launches_for<'a>(decisions: &'a [Value], pool: &str, trigger: &str) -> Vec<&'a Value> {
    decisions
        .iter()
        .filter(|d| {
            d["trigger"] == trigger
                && d["decision"]["pool"] == pool
                && d["decision"]["action"]["kind"] == "launch"
        })
        .collect()
}

/// Sends `rate` requests per second for `seconds` (open loop) of one image with a 43 µs
/// target; returns the statuses and the answers' `parameters` (error bodies for errors).
async fn load(cluster: &Cluster, rate: f64, seconds: f64) -> Vec<(u16, Value)> {
    load_with(cluster, rate, seconds, 0.043, false).await
}

/// [`load`] with a `latency_ms` target, each request a different image if `distinct`.
async fn load_with(
    cluster: &Cluster,
    rate: f64,
    seconds: f64,
    latency_ms: f64,
    distinct: bool,
) -> Vec<(u16, Value)> {
    open_loop(cluster, rate, seconds, latency_ms, distinct)
        .await
        .into_iter()
        .map(|r| (r.status, r.body))
        .collect()
}
