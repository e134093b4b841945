//! Prometheus metrics of a worker (`GET /metrics`), all prefixed `cocktail_worker_`;
//! the model name is a global label, so every label set here is bounded.

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::WorkerError;

const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// Installs the process-wide recorder; call once, from `main`.
pub fn install(model: &str) -> Result<PrometheusHandle, WorkerError> {
    let failed =
        |e: metrics_exporter_prometheus::BuildError| WorkerError::Ort(format!("metrics: {e}"));
    PrometheusBuilder::new()
        .add_global_label("model", model)
        .set_buckets_for_metric(Matcher::Suffix("seconds".into()), LATENCY_BUCKETS)
        .map_err(failed)?
        .set_buckets_for_metric(
            Matcher::Full("cocktail_worker_batch_size".into()),
            BATCH_BUCKETS,
        )
        .map_err(failed)?
        .install_recorder()
        .map_err(failed)
}

/// A finished request: its outcome (`ok` or the error kind) and its time in the worker.
pub fn request(outcome: &'static str, elapsed: Duration) {
    metrics::counter!("cocktail_worker_requests_total", "outcome" => outcome).increment(1);
    metrics::histogram!("cocktail_worker_request_duration_seconds").record(elapsed.as_secs_f64());
    if outcome != "ok" {
        metrics::counter!("cocktail_worker_errors_total", "kind" => outcome).increment(1);
    }
}

/// Requests waiting for a batch.
pub fn queue_depth(depth: usize) {
    metrics::gauge!("cocktail_worker_queue_depth").set(depth as f64);
}

/// A lone call run on the thread that received it, not queued for the batch thread.
pub fn inline_call() {
    metrics::counter!("cocktail_worker_inline_calls_total").increment(1);
}

/// One batch run by the backend: its time, and the CPU time of the thread that ran it
/// (all of the inference's with one intra-op thread, the default; the benchmarks split a
/// request's CPU with it).
pub fn batch(items: usize, inference: Duration, cpu: Duration) {
    metrics::histogram!("cocktail_worker_batch_size").record(items as f64);
    metrics::histogram!("cocktail_worker_inference_duration_seconds")
        .record(inference.as_secs_f64());
    metrics::histogram!("cocktail_worker_inference_cpu_seconds").record(cpu.as_secs_f64());
}

/// Items in service or queued (admitted, not yet answered).
pub fn in_flight(items: usize) {
    metrics::gauge!("cocktail_worker_in_flight_items").set(items as f64);
}
