//! Result tables: markdown for people, CSV and JSON for tools.

use std::fmt::Write as _;

use crate::sim::SimResult;

/// One row per run: the headline figures of cocktail.txt §6.
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

/// The headline figures as CSV.
pub fn csv(results: &[SimResult]) -> String {
    let mut out = String::from(
        "task,scheme,autoscaler,mix,requests,failed,accuracy,accuracy_met,models_per_request,latency_p50_ms,latency_p90_ms,latency_p99_ms,latency_max_ms,slo_violations,cost_usd,vms_mean,vms_max,launches,revocations,elapsed_s\n",
    );
    for r in results {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{:.5},{:.5},{:.4},{:.4},{:.4},{:.4},{:.4},{:.5},{:.6},{:.2},{},{},{},{:.3}",
            r.task,
            r.scheme,
            r.autoscaler,
            r.mix,
            r.requests,
            r.failed,
            r.accuracy,
            r.accuracy_met,
            r.models_per_request,
            r.latency_ms.p50,
            r.latency_ms.p90,
            r.latency_ms.p99,
            r.latency_ms.max,
            r.slo_violations,
            r.cost,
            r.vms_mean,
            r.vms_max,
            r.launches,
            r.revocations,
            r.elapsed_s
        );
    }
    out
}
