//! Prometheus metrics of the master (`GET /metrics`), all prefixed `cocktail_master_`.
//! Label values are bounded: tasks and models come from the zoo, kinds are fixed.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::MasterError;

const SECONDS_BUCKETS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];
const SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0];

/// Installs the process-wide recorder; call once, from `main`.
pub fn install() -> Result<PrometheusHandle, MasterError> {
    let failed =
        |e: metrics_exporter_prometheus::BuildError| MasterError::Internal(format!("metrics: {e}"));
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("seconds".into()), SECONDS_BUCKETS)
        .map_err(failed)?
        .set_buckets_for_metric(
            Matcher::Full("cocktail_master_ensemble_size".into()),
            SIZE_BUCKETS,
        )
        .map_err(failed)?
        .install_recorder()
        .map_err(failed)
}
