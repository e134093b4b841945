//! Result tables: markdown for people, CSV and JSON for tools.

use std::fmt::Write as _;

use serde::{Serialize, Serializer};

use crate::sim::SimResult;

/// One row per run: the headline figures of Cocktail §6.
pub fn markdown(results: &[SimResult]) -> String {
    let mut out = String::from(
        "| scheme | autoscaler | requests | accuracy | accuracy met | models/request | p50 ms | p99 ms | max ms | SLO violations | cost $ | VMs (mean / max) | revocations |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} % | {:.1} % | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} % | {:.4} | {:.1} / {} | {} |",
            r.scheme,
            r.autoscaler,
            r.requests,
            r.accuracy * 100.0,
            r.accuracy_met * 100.0,
            r.models_per_request,
            r.latency_ms.p50,
            r.latency_ms.p99,
            r.latency_ms.max,
            r.slo_violations * 100.0,
            r.cost,
            r.vms_mean,
            r.vms_max,
            r.revocations
        );
    }
    out
}

/// One row per run and constraint type (Fig. 9a's models per constraint).
pub fn types_markdown(results: &[SimResult]) -> String {
    let mut out = String::from(
        "| scheme | constraint | latency ms | target accuracy | requests | models/request | accuracy | accuracy met |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        for t in &r.types {
            let _ = writeln!(
                out,
                "| {} | {} | {:.4} | {:.4} | {} | {:.2} | {:.2} % | {:.1} % |",
                r.scheme,
                t.name,
                t.latency_ms,
                t.accuracy_target,
                t.requests,
                t.models_per_request,
                t.accuracy * 100.0,
                t.accuracy_met * 100.0
            );
        }
    }
    out
}

/// One line of the results CSV: the headline figures of a run. The header is the field
/// names; figures keep the fixed decimals the committed `docs/results/*.csv` have.
#[derive(Debug, Serialize)]
struct CsvRow<'a> {
    task: &'a str,
    scheme: &'a str,
    autoscaler: &'a str,
    mix: &'a str,
    requests: u64,
    failed: u64,
    #[serde(serialize_with = "decimals::<5, _>")]
    accuracy: f64,
    #[serde(serialize_with = "decimals::<5, _>")]
    accuracy_met: f64,
    #[serde(serialize_with = "decimals::<4, _>")]
    models_per_request: f64,
    #[serde(serialize_with = "decimals::<4, _>")]
    latency_p50_ms: f64,
    #[serde(serialize_with = "decimals::<4, _>")]
    latency_p90_ms: f64,
    #[serde(serialize_with = "decimals::<4, _>")]
    latency_p99_ms: f64,
    #[serde(serialize_with = "decimals::<4, _>")]
    latency_max_ms: f64,
    #[serde(serialize_with = "decimals::<5, _>")]
    slo_violations: f64,
    #[serde(serialize_with = "decimals::<6, _>")]
    cost_usd: f64,
    #[serde(serialize_with = "decimals::<2, _>")]
    vms_mean: f64,
    vms_max: usize,
    launches: u64,
    revocations: u64,
}

impl<'a> CsvRow<'a> {
    fn of(r: &'a SimResult) -> Self {
        Self {
            task: &r.task,
            scheme: &r.scheme,
            autoscaler: &r.autoscaler,
            mix: &r.mix,
            requests: r.requests,
            failed: r.failed,
            accuracy: r.accuracy,
            accuracy_met: r.accuracy_met,
            models_per_request: r.models_per_request,
            latency_p50_ms: r.latency_ms.p50,
            latency_p90_ms: r.latency_ms.p90,
            latency_p99_ms: r.latency_ms.p99,
            latency_max_ms: r.latency_ms.max,
            slo_violations: r.slo_violations,
            cost_usd: r.cost,
            vms_mean: r.vms_mean,
            vms_max: r.vms_max,
            launches: r.launches,
            revocations: r.revocations,
        }
    }
}

/// `value` with `N` decimals.
fn decimals<const N: usize, S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{value:.N$}"))
}

/// The headline figures as CSV, one [`CsvRow`] per run.
pub fn csv(results: &[SimResult]) -> Result<String, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for r in results {
        writer.serialize(CsvRow::of(r))?;
    }
    let bytes = writer.into_inner().map_err(|e| e.into_error())?;
    // Every field is UTF-8 (numbers and the run's names), so this never replaces anything.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row of `docs/results/sentiment_strict.csv` (its run time aside, which changes
    /// with every regeneration), written again with the same fixed decimals.
    #[test]
    fn a_csv_row_keeps_the_committed_format() {
        let row = CsvRow {
            task: "sentiment",
            scheme: "InFaaS",
            autoscaler: "reactive",
            mix: "strict",
            requests: 179_207,
            failed: 186,
            accuracy: 0.812_524,
            accuracy_met: 0.563_238,
            models_per_request: 1.0,
            latency_p50_ms: 0.645_51,
            latency_p90_ms: 10.975_7,
            latency_p99_ms: 21.436_4,
            latency_max_ms: 30.975_7,
            slo_violations: 0.001_19,
            cost_usd: 0.447,
            vms_mean: 3.0,
            vms_max: 3,
            launches: 3,
            revocations: 0,
        };
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.serialize(row).unwrap();
        let written = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        let committed = include_str!("../../docs/results/sentiment_strict.csv");
        let header = committed.lines().next().unwrap();
        let expected = format!(
            "{header}\nsentiment,InFaaS,reactive,strict,179207,186,0.81252,0.56324,1.0000,\
             0.6455,10.9757,21.4364,30.9757,0.00119,0.447000,3.00,3,3,0\n"
        );
        assert_eq!(written, expected);
    }
}
