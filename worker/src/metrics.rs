//! Prometheus metrics of a worker (`GET /metrics`), all prefixed `cocktail_worker_`;
//! the model name is a global label, so every label set here is bounded.

use std::sync::LazyLock;
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::WorkerError;

const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// Requests by outcome: `ok` through [`PerCall`], the error kinds through the macro.
const REQUESTS: &str = "cocktail_worker_requests_total";

/// The metrics every call records, registered once. The `metrics` macros hash a
/// metric's name and labels and look it up in the recorder's registry on every call:
/// seven times per member call, about 3 % of a worker's CPU under load (perf,
/// `peer-bench`'s ensemble at 8 clients). A handle taken before a recorder is installed
/// records nothing, so [`install`] takes these right after installing it.
struct PerCall {
    ok: Counter,
    duration: Histogram,
    inline: Counter,
    queue_depth: Gauge,
    in_flight: Gauge,
    batch_size: Histogram,
    inference: Histogram,
    inference_cpu: Histogram,
}

static PER_CALL: LazyLock<PerCall> = LazyLock::new(|| PerCall {
    ok: metrics::counter!(REQUESTS, "outcome" => "ok"),
    duration: metrics::histogram!("cocktail_worker_request_duration_seconds"),
    inline: metrics::counter!("cocktail_worker_inline_calls_total"),
    queue_depth: metrics::gauge!("cocktail_worker_queue_depth"),
    in_flight: metrics::gauge!("cocktail_worker_in_flight_items"),
    batch_size: metrics::histogram!("cocktail_worker_batch_size"),
    inference: metrics::histogram!("cocktail_worker_inference_duration_seconds"),
    inference_cpu: metrics::histogram!("cocktail_worker_inference_cpu_seconds"),
});

/// Installs the process-wide recorder; call once, from `main`.
pub fn install(model: &str) -> Result<PrometheusHandle, WorkerError> {
    let failed =
        |e: metrics_exporter_prometheus::BuildError| WorkerError::Ort(format!("metrics: {e}"));
    let handle = PrometheusBuilder::new()
        .add_global_label("model", model)
        .set_buckets_for_metric(Matcher::Suffix("seconds".into()), LATENCY_BUCKETS)
        .map_err(failed)?
        .set_buckets_for_metric(
            Matcher::Full("cocktail_worker_batch_size".into()),
            BATCH_BUCKETS,
        )
        .map_err(failed)?
        .install_recorder()
        .map_err(failed)?;
    LazyLock::force(&PER_CALL);
    Ok(handle)
}

/// A finished request: its outcome (`ok` or the error kind) and its time in the worker.
pub fn request(outcome: &'static str, elapsed: Duration) {
    PER_CALL.duration.record(elapsed.as_secs_f64());
    if outcome == "ok" {
        PER_CALL.ok.increment(1);
    } else {
        metrics::counter!(REQUESTS, "outcome" => outcome).increment(1);
        metrics::counter!("cocktail_worker_errors_total", "kind" => outcome).increment(1);
    }
}

/// Requests waiting for a batch.
pub fn queue_depth(depth: usize) {
    PER_CALL.queue_depth.set(depth as f64);
}

/// A lone call run on the thread that received it, not queued for the batch thread.
pub fn inline_call() {
    PER_CALL.inline.increment(1);
}

/// One batch run by the backend: its time, and the CPU time of the thread that ran it
/// (all of the inference's with one intra-op thread, the default; the benchmarks split a
/// request's CPU with it).
pub fn batch(items: usize, inference: Duration, cpu: Duration) {
    PER_CALL.batch_size.record(items as f64);
    PER_CALL.inference.record(inference.as_secs_f64());
    PER_CALL.inference_cpu.record(cpu.as_secs_f64());
}

/// Items in service or queued (admitted, not yet answered).
pub fn in_flight(items: usize) {
    PER_CALL.in_flight.set(items as f64);
}
