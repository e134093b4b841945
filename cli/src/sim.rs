//! `cocktail sim`: the schemes on one trace in the discrete-event simulator.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use cocktail_benches::sim::drift::DriftWorld;
use cocktail_benches::sim::{self, Autoscaler, Failure, Scheme, SimConfig, World};
use cocktail_benches::traces::{self, FileFormat};
use cocktail_benches::workload::Mix;
use cocktail_benches::workload::drift;
use cocktail_benches::{drift_report, drift_rules, report};
use cocktail_common::Zoo;
use cocktail_policy::predict::Statistical;
use cocktail_policy::selection::Rule;
use cocktail_policy::tracking::Knobs;
use indicatif::{ProgressBar, ProgressStyle};

/// The load both `sim` and `loadgen` replay.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The generated trace; ignored with --trace-file.
    #[arg(
        long,
        default_value = "wiki",
        value_parser = clap::builder::PossibleValuesParser::new(traces::NAMES.iter().copied())
    )]
    pub trace: String,
    /// A trace file instead: one rate per second, or arrival timestamps (--trace-format).
    #[arg(long)]
    pub trace_file: Option<PathBuf>,
    /// What the trace file lists: a rate per second or arrival timestamps.
    #[arg(long, value_enum, default_value_t = FileFormat::Rates)]
    pub trace_format: FileFormat,
    /// Mean requests per second the trace is scaled to.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// Seconds of load.
    #[arg(long, default_value_t = 3600)]
    pub duration: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The constraint mix.
    #[arg(long, value_enum, default_value_t = Mix::Strict)]
    pub mix: Mix,
    /// fashion or sentiment.
    #[arg(long, default_value = "fashion")]
    pub task: String,
    /// Models this many times slower than profiled, and the constraint types with them:
    /// a master whose workers emulate their types `--emulate-scale` times slower.
    #[arg(long, default_value_t = 1.0)]
    pub latency_scale: f64,
}

impl TraceArgs {
    /// `--latency-scale`, checked.
    pub fn latency_scale(&self) -> anyhow::Result<f64> {
        if !(self.latency_scale >= 1.0 && self.latency_scale.is_finite()) {
            anyhow::bail!("`--latency-scale` must be a number of at least 1");
        }
        Ok(self.latency_scale)
    }

    /// One rate per second, scaled to `--rate`.
    pub fn rates(&self) -> anyhow::Result<Vec<f64>> {
        if !(self.rate > 0.0 && self.rate.is_finite()) {
            anyhow::bail!("`--rate` must be a positive number of requests per second");
        }
        if self.duration == 0 {
            anyhow::bail!("`--duration` must be at least 1 second");
        }
        let mut rates = match &self.trace_file {
            Some(path) => {
                let mut rates = traces::load(path, self.trace_format)?;
                rates.truncate(self.duration as usize);
                rates
            }
            None => traces::generate(
                &self.trace,
                self.duration as usize,
                self.rate,
                1.0,
                self.seed,
            )
            .with_context(|| format!("`--trace`: no generator `{}`", self.trace))?,
        };
        traces::scale_to(&mut rates, self.rate);
        Ok(rates)
    }
}

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Schemes to compare, comma-separated (any case).
    #[arg(
        long,
        value_enum,
        ignore_case = true,
        value_delimiter = ',',
        default_value = "InFaaS,Clipper,Clipper-X,Cocktail"
    )]
    pub schemes: Vec<Scheme>,
    /// Override every scheme's autoscaler.
    #[arg(long, value_enum)]
    pub autoscaler: Option<Autoscaler>,
    /// The load predictor of the predictive autoscalers (the learned one needs the
    /// master's ONNX Runtime).
    #[arg(long, value_enum, default_value_t = Statistical::Auto)]
    pub predictor: Statistical,
    /// Size every pool as if it got every request (no importance weights).
    #[arg(long)]
    pub no_weights: bool,
    /// Fail this share of the instances at --failure-at seconds.
    #[arg(long)]
    pub failure_fraction: Option<f64>,
    #[arg(long, default_value_t = 1800.0)]
    pub failure_at: f64,
    /// O2's interval in requests per constraint (as the master's --interval-requests)
    /// instead of its default 30 seconds.
    #[arg(long)]
    pub interval_requests: Option<u64>,
    /// How Cocktail chooses ensembles, as the master's `--selection`.
    #[arg(long, value_enum, default_value_t = Rule::Cocktail)]
    pub selection: Rule,
    /// Under `--selection tracking`, pace mixes of two choices, as the master's `--pace`.
    #[arg(long)]
    pub pace: bool,
    /// Under `--selection tracking`, the margin in standard errors, as the master's
    /// `--tracking-margin`.
    #[arg(long, default_value_t = Knobs::default().margin_z)]
    pub tracking_margin: f64,
    /// Under `--selection tracking`, no shift check, as the master's `--no-shift-check`.
    #[arg(long)]
    pub no_shift_check: bool,
    /// Under `--selection tracking`, the price of a millisecond of inference, as the
    /// master's `--tracking-price`.
    #[arg(long)]
    pub tracking_price: Option<f64>,
    /// Write results.json, results.csv and results.md here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replay a drift schedule instead of a trace: every selection scheme (InFaaS,
    /// always-best, Clipper, Cocktail's O1/O2, measured selection, plain re-selection,
    /// Cocktail's tracking by majority and soft vote, paced, and on `sentiment-domains`
    /// tuned on the held-out half, the oracle) under every label
    /// setting, on the schedule's task (the trace flags other than --seed are ignored).
    #[arg(
        long,
        value_parser = clap::builder::PossibleValuesParser::new(drift::ALL.map(|s| s.name))
    )]
    pub drift: Option<String>,
}

pub fn configs(args: &SimArgs, rates: &[f64]) -> anyhow::Result<Vec<SimConfig>> {
    let failure = args
        .failure_fraction
        .map(|fraction| {
            if (0.0..=1.0).contains(&fraction) {
                Ok(Failure {
                    at_s: args.failure_at,
                    fraction,
                })
            } else {
                Err(anyhow::anyhow!(
                    "`--failure-fraction` must be between 0 and 1"
                ))
            }
        })
        .transpose()?;
    let knobs = Knobs::new(args.tracking_margin, !args.no_shift_check, args.pace)?
        .priced(args.tracking_price)?;
    Ok(args
        .schemes
        .iter()
        .map(|&scheme| {
            let mut config =
                SimConfig::new(scheme, args.trace.mix, rates.to_vec(), args.trace.seed);
            if let Some(a) = args.autoscaler {
                config.autoscaler = a;
            }
            config.predictor = args.predictor;
            config.importance_weights = !args.no_weights;
            config.failure = failure;
            config.o2_interval_requests = args.interval_requests;
            config.selection.rule = args.selection;
            config.knobs = knobs;
            config
        })
        .collect())
}

pub fn run(zoo_path: Option<&Path>, args: &SimArgs) -> anyhow::Result<()> {
    let zoo = Zoo::load(Zoo::locate(zoo_path)?)?;
    if let Some(name) = &args.drift {
        return run_drift(&zoo, name, args);
    }
    let world =
        World::load(&zoo, &args.trace.task)?.with_latency_scale(args.trace.latency_scale()?);
    let rates = args.trace.rates()?;
    let configs = configs(args, &rates)?;
    let mut results = Vec::new();
    for config in &configs {
        let bar = ProgressBar::new(rates.len() as u64).with_style(
            ProgressStyle::with_template(
                "{msg:>10} [{bar:40}] {pos}/{len} simulated s ({elapsed})",
            )?
            .progress_chars("=> "),
        );
        bar.set_message(config.scheme.name());
        let result = sim::run(&world, config, Some(&bar));
        bar.finish_and_clear();
        eprintln!(
            "{}: {} requests simulated in {:.2} s",
            result.scheme, result.requests, result.elapsed_s
        );
        results.push(result);
    }
    let table = format!(
        "{}\n{}",
        report::markdown(&results),
        report::types_markdown(&results)
    );
    println!("{table}");
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        std::fs::write(out.join("results.md"), &table)?;
        std::fs::write(out.join("results.csv"), report::csv(&results)?)?;
        std::fs::write(
            out.join("results.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
    }
    Ok(())
}

/// `--drift`: the drift comparison of one schedule, as the results page shows it.
fn run_drift(zoo: &Zoo, name: &str, args: &SimArgs) -> anyhow::Result<()> {
    let schedule =
        drift::named(name).with_context(|| format!("`--drift`: no schedule `{name}`"))?;
    let world = World::load(zoo, schedule.task)?;
    let bound = DriftWorld::new(zoo, &world, schedule)?;
    let bar = ProgressBar::new(sim::drift::runs(schedule)).with_style(
        ProgressStyle::with_template("{msg:>40} [{bar:40}] {pos}/{len} runs ({elapsed})")?
            .progress_chars("=> "),
    );
    let results = sim::drift::compare(&bound, args.trace.seed, Some(&bar));
    bar.finish_and_clear();
    let mut table = drift_report::section(&bound, &results, args.trace.seed);
    if drift_rules::applies(&bound) {
        table.push_str(&drift_rules::Sweep::run(&bound, args.trace.seed).section(&results));
    }
    println!("{table}");
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        std::fs::write(out.join("results.md"), &table)?;
        std::fs::write(
            out.join("results.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
    }
    Ok(())
}
