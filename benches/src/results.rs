//! `cocktail results`: every comparison of docs/results.md, run in the simulator, with its
//! tables, CSV, JSON and plots. One command regenerates the whole page.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use cocktail_common::Zoo;
use cocktail_policy::predict::{self, Statistical};
use cocktail_policy::selection::Rule;
use indicatif::{ProgressBar, ProgressStyle};

use crate::sim::{self, Failure, Scheme, SimConfig, SimResult, World, by_scheme};
use crate::workload::HOP_MS;
use crate::workload::Mix;
use crate::{autoscaling, drift_report, ensemble_gain, goals, hetero, plots, report, traces};

/// The paper's setting (Cocktail §5.2): one hour at 50 req/s.
const HOUR: usize = 3600;
const PAPER_RATE: f64 = 50.0;
/// The autoscaling studies: models 100× slower (the papers' 10–300 ms range) at 1,000
/// req/s, so that pools need several instances and bursts need scaling.
const SCALE: f64 = 100.0;
const SCALED_RATE: f64 = 1000.0;
const SCALED_DURATION: usize = 1800;
/// Simulated hours per trace of the autoscaling study.
const AUTOSCALING_HOURS: f64 = 6.0;
const SEED: u64 = 1;

/// Every scheme's configuration, and Cocktail with measured selection (`Cocktail-M`)
/// after them.
fn schemes(mix: Mix, rates: &[f64]) -> Vec<SimConfig> {
    let mut measured = SimConfig::new(Scheme::Cocktail, mix, rates.to_vec(), SEED);
    measured.selection.rule = Rule::Measured;
    Scheme::ALL
        .iter()
        .map(|&s| SimConfig::new(s, mix, rates.to_vec(), SEED))
        .chain(std::iter::once(measured))
        .collect()
}

/// "1.23x" when both are positive.
fn ratio(a: f64, b: f64) -> String {
    if a > 0.0 && b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

fn series<F: Fn(&sim::Bucket) -> f64>(r: &SimResult, f: F) -> Vec<(f64, f64)> {
    r.series.iter().map(|b| (b.t_s / 60.0, f(b))).collect()
}

/// Runs everything and writes `out/results.md`, `out/results/*.{csv,json}` and
/// `out/plots/*.png`.
pub fn generate(zoo: &Zoo, out: &Path) -> anyhow::Result<()> {
    let plots_dir = out.join("plots");
    let data_dir = out.join("results");
    std::fs::create_dir_all(&plots_dir)
        .with_context(|| format!("creating {}", plots_dir.display()))?;
    std::fs::create_dir_all(&data_dir)?;
    let fashion = World::load(zoo, "fashion")?;
    let sentiment = World::load(zoo, "sentiment")?;
    let scaled = fashion.with_latency_scale(SCALE);
    let trace = |name: &str, len: usize, rate: f64| {
        traces::generate(name, len, rate, 1.0, SEED).with_context(|| format!("trace {name}"))
    };
    let wiki = trace("wiki", HOUR, PAPER_RATE)?;
    let twitter = trace("twitter", HOUR, PAPER_RATE)?;
    let bursty = trace("twitter", SCALED_DURATION, SCALED_RATE)?;

    // The comparisons of schemes, and the runs the page sets beside them, as one batch
    // that keeps both cores busy.
    let failure = Failure {
        at_s: SCALED_DURATION as f64 / 2.0,
        fraction: 0.2,
    };
    let sets: [(&World, Mix, &[f64]); 5] = [
        (&fashion, Mix::Strict, &wiki),
        (&fashion, Mix::Relaxed, &wiki),
        (&fashion, Mix::Strict, &twitter),
        (&sentiment, Mix::Strict, &wiki),
        (&scaled, Mix::Strict, &bursty),
    ];
    let mut jobs: Vec<(&World, SimConfig)> = sets
        .iter()
        .flat_map(|&(world, mix, rates)| schemes(mix, rates).into_iter().map(move |c| (world, c)))
        .collect();
    let mut unweighted = SimConfig::new(Scheme::Cocktail, Mix::Strict, bursty.clone(), SEED);
    unweighted.importance_weights = false;
    jobs.push((&scaled, unweighted));
    for scheme in [Scheme::Cocktail, Scheme::Infaas] {
        let mut c = SimConfig::new(scheme, Mix::Strict, bursty.clone(), SEED);
        c.failure = Some(failure);
        jobs.push((&scaled, c));
    }
    let runs = jobs.len() as u64 + autoscaling::runs() + drift_report::runs();
    let bar = ProgressBar::new(runs).with_style(
        ProgressStyle::with_template("{msg:>32} [{bar:40}] {pos}/{len} runs ({elapsed})")?
            .progress_chars("=> "),
    );
    bar.set_message("schemes");
    let mut results = sim::run_all(&jobs, &bar).into_iter();
    let mut take = |n: usize| -> Vec<SimResult> { results.by_ref().take(n).collect() };
    let per_set = schemes(Mix::Strict, &[]).len();
    let (strict, relaxed, strict_twitter, text, big) = (
        take(per_set),
        take(per_set),
        take(per_set),
        take(per_set),
        take(per_set),
    );
    let unweighted = take(1).pop().context("the unweighted run")?;
    let failures = take(2);

    let autoscaling = autoscaling::run(
        &scaled,
        autoscaling::Study {
            hours: AUTOSCALING_HOURS,
            rate: SCALED_RATE,
            seed: SEED,
        },
        &plots_dir,
        &data_dir,
        &bar,
    )?;
    let weighted = by_scheme(&big, "Cocktail")
        .cloned()
        .context("Cocktail run")?;
    let drift = drift_report::generate(zoo, &plots_dir, &data_dir, SEED, &bar)?;
    bar.finish_and_clear();

    // Data files.
    let sets: [(&str, &[SimResult]); 6] = [
        ("wiki_strict", &strict),
        ("wiki_relaxed", &relaxed),
        ("twitter_strict", &strict_twitter),
        ("sentiment_strict", &text),
        ("scaled_twitter_strict", &big),
        ("failures", &failures),
    ];
    for (name, results) in sets {
        std::fs::write(data_dir.join(format!("{name}.csv")), report::csv(results)?)?;
        std::fs::write(
            data_dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(results)?,
        )?;
    }

    // Plots.
    let names: Vec<String> = strict.iter().map(|r| r.scheme.clone()).collect();
    let latencies: Vec<(String, &[f32])> = big
        .iter()
        .map(|r| (r.scheme.clone(), r.latencies.as_slice()))
        .collect();
    plots::boxes(
        &plots_dir.join("latency.png"),
        "Response latency per scheme (100x models, bursty trace)",
        "latency (ms)",
        &latencies,
    )?;
    let latencies: Vec<(String, &[f32])> = strict
        .iter()
        .map(|r| (r.scheme.clone(), r.latencies.as_slice()))
        .collect();
    plots::boxes(
        &plots_dir.join("latency_paper.png"),
        "Response latency per scheme (our models, wiki, 50 req/s)",
        "latency (ms)",
        &latencies,
    )?;
    plots::bars(
        &plots_dir.join("cost.png"),
        "Cost per scheme",
        "USD",
        &names,
        &[
            (
                "wiki, 50 req/s".into(),
                strict.iter().map(|r| r.cost).collect(),
            ),
            (
                "twitter, 50 req/s".into(),
                strict_twitter.iter().map(|r| r.cost).collect(),
            ),
            (
                "100x models, bursty, 1000 req/s (/10)".into(),
                big.iter().map(|r| r.cost / 10.0).collect(),
            ),
        ],
    )?;
    let type_names: Vec<String> = fashion.types.iter().map(|t| t.name.clone()).collect();
    plots::bars(
        &plots_dir.join("models_per_constraint.png"),
        "Models per request by constraint type (wiki, strict)",
        "models per request",
        &type_names,
        &strict
            .iter()
            .map(|r| {
                (
                    r.scheme.clone(),
                    r.types.iter().map(|t| t.models_per_request).collect(),
                )
            })
            .collect::<Vec<_>>(),
    )?;
    let cocktail = by_scheme(&strict, "Cocktail").context("Cocktail run")?;
    plots::lines(
        &plots_dir.join("models_over_time.png"),
        "Cocktail: models per request over time (wiki, strict)",
        "minutes",
        "models per request",
        &[(
            "models per request".into(),
            series(cocktail, |b| b.models_per_request),
        )],
        None,
    )?;
    plots::lines(
        &plots_dir.join("accuracy_over_time.png"),
        "Cocktail: accuracy over time (wiki, strict)",
        "minutes",
        "accuracy",
        &[
            (
                "window of 200".into(),
                series(cocktail, |b| b.window_accuracy),
            ),
            (
                "cumulative".into(),
                series(cocktail, |b| b.cumulative_accuracy),
            ),
        ],
        None,
    )?;
    let total_vms = |r: &SimResult| series(r, |b| b.vms.iter().sum::<usize>() as f64);
    let mut vm_lines = vec![
        ("all pools, weighted".to_owned(), total_vms(&weighted)),
        ("all pools, unweighted".to_owned(), total_vms(&unweighted)),
    ];
    for (k, pool) in weighted.pools.iter().enumerate().take(4) {
        vm_lines.push((
            format!("{pool}, weighted"),
            series(&weighted, |b| b.vms.get(k).copied().unwrap_or(0) as f64),
        ));
    }
    plots::lines(
        &plots_dir.join("vms.png"),
        "Instances over time, with and without importance weights",
        "minutes",
        "instances",
        &vm_lines,
        None,
    )?;
    plots::lines(
        &plots_dir.join("failures.png"),
        "Accuracy met (per minute) with 20 % of instances failing",
        "minutes",
        "share of requests meeting their accuracy",
        &failures
            .iter()
            .map(|r| (r.scheme.clone(), series(r, |b| b.accuracy_met)))
            .collect::<Vec<_>>(),
        Some(failure.at_s / 60.0),
    )?;
    let rmse = predictor_rmse();
    let trace_names: Vec<String> = traces::NAMES.iter().map(|s| (*s).to_owned()).collect();
    plots::bars(
        &plots_dir.join("predictors.png"),
        "Load predictors: RMSE of the 10-minute-ahead forecast",
        "RMSE (req/s)",
        &trace_names,
        &rmse,
    )?;

    let gains = ensemble_gain::gains(&fashion);
    let readme = zoo.root().join("README.md");
    if let Ok(text) = std::fs::read_to_string(&readme) {
        std::fs::write(
            &readme,
            ensemble_gain::splice(&text, &ensemble_gain::table(&gains)),
        )?;
    }
    let page = page(&PageInputs {
        strict: &strict,
        relaxed: &relaxed,
        twitter: &strict_twitter,
        text: &text,
        big: &big,
        autoscaling: &autoscaling,
        weighted: &weighted,
        unweighted: &unweighted,
        failures: &failures,
        failure,
        types: &fashion.types,
        models: &fashion.models,
        rmse: &rmse,
        gains: &gains,
    });
    let mixed = hetero::study::run(zoo, &plots_dir, &data_dir, hetero::study::Scale::FULL)?;
    std::fs::write(
        out.join("results.md"),
        format!("{page}\n{drift}\n{mixed}\n{}", measured_sections(out)?),
    )?;
    Ok(())
}

/// The page's live-measured sections, which end it, each fragment as its tool wrote it.
fn measured_sections(out: &Path) -> anyhow::Result<String> {
    let reliability = measured(out, RELIABILITY, &RELIABILITY_FRAGMENTS)?;
    let wire = measured(out, WIRE, &WIRE_FRAGMENTS)?;
    Ok(format!("{reliability}\n{wire}"))
}

/// `cocktail results --only measured`: the live-measured sections read again from
/// `out/measured/` and put in place of the page's, without simulating anything (the
/// full command writes the same page).
pub fn splice_measured(out: &Path) -> anyhow::Result<()> {
    let path = out.join("results.md");
    let page =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let start = page
        .find(RELIABILITY)
        .with_context(|| format!("{} has no section starting {RELIABILITY:?}", path.display()))?;
    std::fs::write(
        &path,
        format!("{}{}", &page[..start], measured_sections(out)?),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `cocktail results --only drift`: the drift section alone, spliced into
/// `out/results.md` (the full command regenerates it too).
pub fn generate_drift(zoo: &Zoo, out: &Path) -> anyhow::Result<()> {
    drift_report::regenerate(zoo, out, SEED)
}

/// A fragment measured live: its title, its file under `out/measured/`, the tool that
/// writes it.
type Fragment = (&'static str, &'static str, &'static str);

const RELIABILITY: &str = "## Reliability (measured live)\n\nNot simulated: each part below comes from the tool named in it \
     and is kept in `docs/measured/`; the chaos scenarios (workers killed and hung, the master \
     restarted, Redis and MongoDB down) are tests, `tests/tests/chaos.rs`.\n";

const RELIABILITY_FRAGMENTS: [Fragment; 2] = [
    (
        "Soak: memory and descriptors under steady load",
        "soak.md",
        "`target/release/soak-bench --out docs`",
    ),
    (
        "Fuzzing the parsers of untrusted bytes",
        "fuzzing.md",
        "`scripts/fuzz.sh`",
    ),
];

const WIRE: &str = "## Speed on the wire (measured live)\n\nNot simulated: real processes on this \
     2-core machine, each part from the tool named in it, kept in `docs/measured/`. Standard OIP \
     clients (tritonclient over HTTP, binary and JSON, and gRPC) are tested in \
     `tests/tests/oip_clients.rs`; the protocol is in `docs/oip.md`.\n";

const WIRE_FRAGMENTS: [Fragment; 3] = [
    (
        "Cocktail-rs and Ray Serve side by side",
        "ray-serve.md",
        "`scripts/peer-ray.sh --runs 3 --out docs`",
    ),
    (
        "The master-to-worker hop: where a request's CPU goes",
        "wire.md",
        "`target/release/master-bench --runs 3 --out docs`",
    ),
    (
        "One worker against ONNX Runtime in-process",
        "worker.md",
        "`target/release/worker-bench --runs 3 --out docs`",
    ),
];

/// The figures measured on live processes by their own tools rather than simulated:
/// each writes a markdown fragment under `out/measured/`, included under `heading` as it
/// is.
fn measured(out: &Path, heading: &str, fragments: &[Fragment]) -> anyhow::Result<String> {
    let mut s = String::from(heading);
    for (title, file, tool) in fragments {
        let path = out.join("measured").join(file);
        let body = match std::fs::read_to_string(&path) {
            Ok(body) => body,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                format!("Not measured yet: run {tool}.\n")
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        s.push_str(&format!("\n### {title}\n\n{}\n", body.trim_end()));
    }
    Ok(s)
}

/// What the failures cost each scheme against the same run without them: with about one
/// model per request there is no ensemble to lose members from, so failover to the next
/// candidate is what keeps requests answered, for Cocktail as for InFaaS.
fn failure_cost(clean: &[SimResult], failed: &[SimResult]) -> String {
    let lines: Vec<String> = failed
        .iter()
        .filter_map(|f| {
            let c = by_scheme(clean, &f.scheme)?;
            Some(format!(
                "{} {:.1} points of accuracy met ({:.1} % against {:.1} %) and {} more failed \
                 requests, at {:.2} models per request",
                f.scheme,
                (c.accuracy_met - f.accuracy_met) * 100.0,
                f.accuracy_met * 100.0,
                c.accuracy_met * 100.0,
                f.failed.saturating_sub(c.failed),
                f.models_per_request,
            ))
        })
        .collect();
    format!(
        "Against the same run without failures (100x models above), the failures cost {}. \
         With about one model per request there is no ensemble to lose members from: a \
         request whose model lost its instances fails over to the next candidate, or fails \
         when none has a free slot, until the replacements serve, for Cocktail as for \
         InFaaS.\n",
        lines.join("; ")
    )
}

/// Table 4: each predictor's RMSE per trace, one rate per minute over a week, 10 steps
/// ahead (the controller's horizon).
fn predictor_rmse() -> Vec<(String, Vec<f64>)> {
    let period = 1440;
    Statistical::ALL
        .iter()
        .map(|kind| {
            let values = traces::NAMES
                .iter()
                .map(|trace| {
                    let rates = traces::generate(trace, 7 * period, PAPER_RATE, 60.0, SEED)
                        .unwrap_or_default();
                    predict::rmse(kind.build(period, 10).as_mut(), &rates, 10)
                })
                .collect();
            (kind.to_string(), values)
        })
        .collect()
}

struct PageInputs<'a> {
    strict: &'a [SimResult],
    relaxed: &'a [SimResult],
    twitter: &'a [SimResult],
    text: &'a [SimResult],
    big: &'a [SimResult],
    autoscaling: &'a str,
    weighted: &'a SimResult,
    unweighted: &'a SimResult,
    failures: &'a [SimResult],
    failure: Failure,
    types: &'a [crate::workload::ConstraintType],
    models: &'a [String],
    rmse: &'a [(String, Vec<f64>)],
    gains: &'a [ensemble_gain::Gain],
}

/// Cocktail against InFaaS and Clipper on one set of runs, as a sentence.
fn headline(results: &[SimResult]) -> String {
    let (Some(c), Some(i), Some(k)) = (
        by_scheme(results, "Cocktail"),
        by_scheme(results, "InFaaS"),
        by_scheme(results, "Clipper"),
    ) else {
        return String::new();
    };
    format!(
        "Cocktail costs ${:.4} against ${:.4} for InFaaS ({} lower) and ${:.4} for Clipper ({} lower); \
         it meets the target accuracy for {:.1} % of requests (InFaaS {:.1} %, Clipper {:.1} %) \
         with {:.2} models per request (Clipper {:.2}); its p99 latency is {:.2} ms (InFaaS {:.2} ms, Clipper {:.2} ms).",
        c.cost,
        i.cost,
        ratio(i.cost, c.cost),
        k.cost,
        ratio(k.cost, c.cost),
        c.accuracy_met * 100.0,
        i.accuracy_met * 100.0,
        k.accuracy_met * 100.0,
        c.models_per_request,
        k.models_per_request,
        c.latency_ms.p99,
        i.latency_ms.p99,
        k.latency_ms.p99,
    )
}

fn page(p: &PageInputs<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Results\n\n\
         Generated by `scripts/results.sh` (`cocktail results --out docs`). Every simulated number and plot \
         comes from that one command, in the simulator (`cocktail sim`), which runs the master's own selection, \
         O2, voting, autoscaling and procurement code on the zoo's recorded answers to the test sets, the \
         profiled latencies and the catalog's prices. Seed {SEED}. Do not edit by hand: CI regenerates the page \
         and fails on any difference (`tests/tests/results_page.rs`). The sections headed *measured live* are \
         not simulated: each part names the tool that measured it and wrote it under `docs/measured/`.\n\n\
         The simulator is checked against the live system by `tests/tests/sim_vs_live.rs`: the same trace \
         through real master and worker processes, driven by `cocktail loadgen`, and through the simulator.\n"
    );
    let _ = writeln!(
        s,
        "## Workload\n\n\
         Constraint types (cocktail.txt Fig. 6) are single models' <latency, accuracy>, five spread along the \
         fashion zoo's frontier; the Strict mix sends the accurate end most (weights 1..5), the Relaxed mix the \
         other end. Latency targets are end to end: the model's profiled inference time plus one {HOP_MS} ms \
         hop, so the model fits only while its calls do not queue. A request violates its SLO when its answer \
         comes after its target or a member missed it; members are left out of the vote at the target \
         (when none is predicted to fit, the request waits for their late answers, up to 1 s). \
         Cocktail's selection sees each model's predicted response time, its profiled latency plus the \
         90th percentile of the overhead its pool's recent calls measured (`policy::response`). `Cocktail-M` \
         is Cocktail with measured selection (`--selection measured`): greedy forward selection on each \
         constraint's buffer of labelled items with every candidate's answer, one request in 20 (the shadow \
         calls' load is not simulated).\n\n\
         | type | latency target (ms) | accuracy target | the model it stands for |\n|---|---:|---:|---|"
    );
    for t in p.types {
        let _ = writeln!(
            s,
            "| {} | {:.4} | {:.4} | {} |",
            t.name,
            t.constraint.latency_ms,
            t.constraint.accuracy,
            p.models.get(t.model).map_or("?", String::as_str)
        );
    }
    let _ = writeln!(
        s,
        "\n## Ensemble gain within each type's latency\n\n\
         Per fashion type: the best single model whose profiled latency fits, and the best plain-majority vote \
         of two to five such models (ties to the most accurate voter), both on the whole test set \
         (`benches/src/ensemble_gain.rs`; also in `models/README.md`). Selection can only gain what this \
         table shows.\n\n{}",
        ensemble_gain::table(p.gains)
    );
    let _ = writeln!(
        s,
        "\n## Headline: the paper's setting (one hour at 50 req/s)\n\n\
         Fashion-MNIST, Wikipedia-like trace, Strict mix.\n\n{}\n{}\n",
        report::markdown(p.strict),
        headline(p.strict)
    );
    let _ = writeln!(
        s,
        "Relaxed mix:\n\n{}\n{}\n\nTwitter-like (bursty) trace, Strict mix:\n\n{}\n{}\n\n\
         Sentiment (SST-2-like sentences), Strict mix:\n\n{}\n{}\n",
        report::markdown(p.relaxed),
        headline(p.relaxed),
        report::markdown(p.twitter),
        headline(p.twitter),
        report::markdown(p.text),
        headline(p.text),
    );
    let _ = writeln!(
        s,
        "![latency](plots/latency_paper.png)\n\n\
         ## Paper-sized models: 100x latencies, bursty trace at {SCALED_RATE} req/s for {} minutes\n\n\
         Our models answer in 5–200 µs, so at 50 req/s one instance serves any pool and latency is the network \
         hop. Multiplying every model's latency by {SCALE} puts them in the papers' 0.5–20 ms range, where \
         pools need several instances and the autoscalers differ.\n\n{}\n{}\n\n\
         ![latency per scheme](plots/latency.png)\n\n![cost per scheme](plots/cost.png)\n\n\
         ## Goals (issue 14)\n\nIn every comparison above, Cocktail (and Cocktail-M) against InFaaS and \
         Clipper. Why the accuracy goals are missed is under \"Why the figures differ from the paper's\" \
         at the end of the simulated part.\n\n{}\n\
         ## Models per constraint (Fig. 9a) and over time (Fig. 10)\n\n{}\n\
         ![models per constraint](plots/models_per_constraint.png)\n\n\
         ![models over time](plots/models_over_time.png)\n\n![accuracy over time](plots/accuracy_over_time.png)\n",
        SCALED_DURATION / 60,
        report::markdown(p.big),
        headline(p.big),
        goals::markdown(&[
            ("wiki, Strict", p.strict),
            ("wiki, Relaxed", p.relaxed),
            ("twitter, Strict", p.twitter),
            ("sentiment, Strict", p.text),
            ("100x, bursty", p.big),
        ]),
        report::types_markdown(p.strict),
    );
    let _ = writeln!(
        s,
        "{}\n### Importance weights (Fig. 12a)\n\nThe 100x models on the bursty trace for {} minutes: with \
         weights the pools averaged {:.1} instances (max {}) for ${:.4}; without, {:.1} (max {}) for ${:.4}.\n\n\
         ![VMs per pool](plots/vms.png)\n",
        p.autoscaling,
        SCALED_DURATION / 60,
        p.weighted.vms_mean,
        p.weighted.vms_max,
        p.weighted.cost,
        p.unweighted.vms_mean,
        p.unweighted.vms_max,
        p.unweighted.cost,
    );
    let _ = writeln!(
        s,
        "## Failures (Fig. 12b)\n\n{:.0} % of all instances fail at minute {:.0} (no notice). As live, a member \
         whose pool has no instance left is answered by the best unused candidate (failover), and the health \
         check launches a replacement for every failed instance at once (it serves after the launch delay).\n\n\
         {}\n![failures](plots/failures.png)\n\n{}",
        p.failure.fraction * 100.0,
        p.failure.at_s / 60.0,
        report::markdown(p.failures),
        failure_cost(p.big, p.failures),
    );
    let _ = writeln!(
        s,
        "## Load predictors (Table 4)\n\nRMSE (req/s) of the forecast 10 minutes ahead, one rate per minute over a \
         week of each trace at a mean of 50 req/s. The learned MLP predictor (issue 5) needs ONNX Runtime; \
         `predictor-bench` reports it.\n\n| predictor | {} |\n|---|{}",
        traces::NAMES.join(" | "),
        "---:|".repeat(traces::NAMES.len())
    );
    for (name, values) in p.rmse {
        let cells: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
        let _ = writeln!(s, "| {name} | {} |", cells.join(" | "));
    }
    let _ = writeln!(
        s,
        "\n![predictors](plots/predictors.png)\n\n{}",
        include_str!("results_gap.md")
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_sections_are_spliced_in_place_of_the_old_ones() {
        let out = std::env::temp_dir().join(format!("cocktail-splice-{}", std::process::id()));
        std::fs::create_dir_all(out.join("measured")).unwrap();
        std::fs::write(out.join("measured/soak.md"), "soak table\n").unwrap();
        std::fs::write(
            out.join("results.md"),
            format!("# Results\n\nsimulated\n\n{RELIABILITY}\nold fragments\n"),
        )
        .unwrap();
        splice_measured(&out).unwrap();
        let page = std::fs::read_to_string(out.join("results.md")).unwrap();
        assert!(page.starts_with("# Results\n\nsimulated\n\n"), "{page}");
        assert!(
            page.contains("soak table") && !page.contains("old fragments"),
            "{page}"
        );
        assert!(
            page.contains("Not measured yet: run `scripts/fuzz.sh`"),
            "{page}"
        );
        assert_eq!(page.matches(RELIABILITY).count(), 1, "{page}");
        // Splicing again changes nothing.
        splice_measured(&out).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("results.md")).unwrap(),
            page
        );
        // A page without the sections is an error, not a page cut short.
        std::fs::write(out.join("results.md"), "# Results\n").unwrap();
        assert!(splice_measured(&out).is_err());
        std::fs::remove_dir_all(&out).unwrap();
    }
}
