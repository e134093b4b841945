//! `cocktail loadgen`: open-loop load from a trace against a running master.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use cocktail_benches::loadgen::{self, DriftLoad, LoadgenConfig};
use cocktail_benches::sim::World;
use cocktail_benches::sim::drift::DriftWorld;
use cocktail_benches::workload::drift;
use cocktail_common::Zoo;
use cocktail_common::auth::{self, API_KEY_ENV};
use indicatif::{ProgressBar, ProgressStyle};

use crate::sim::TraceArgs;

#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// The master's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    #[command(flatten)]
    pub trace: TraceArgs,
    /// A request slower than its latency target plus this (ms) is an SLO violation; 0,
    /// the default, judges against `latency_ms` itself, end to end as the client sees it.
    #[arg(long, default_value_t = 0.0)]
    pub grace_ms: f64,
    /// Requests in flight at most; arrivals beyond are dropped and counted (with
    /// --drift they wait for a slot: 1 sends the schedule one request at a time).
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// Client timeout per request (ms).
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Send a request refused with `Retry-After` (429 overloaded, 503 no worker yet)
    /// again after that long, within --timeout-ms, as a client honouring the header
    /// does; the report counts the retries. Without it a refusal is an error.
    #[arg(long)]
    pub retry_refused: bool,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Send a drift schedule's requests instead of the trace's (issue 34): the items
    /// `cocktail sim --drift` replays for the same --seed, at the schedule's rate, under
    /// its one accuracy target (with --drift-latency-ms), on its task (--task, --rate and
    /// the mix are ignored). Schedules that draw corrupted copies are replayed only.
    #[arg(
        long,
        value_parser = clap::builder::PossibleValuesParser::new(drift::ALL.map(|s| s.name))
    )]
    pub drift: Option<String>,
    /// With --drift: the share of requests whose label comes back (0 to 1).
    #[arg(long, default_value_t = 1.0)]
    pub labels: f64,
    /// With --drift: seconds from an answer to its label, sent to `/v1/feedback` (0: in
    /// the request, as without --drift).
    #[arg(long, default_value_t = 0.0)]
    pub label_delay_s: f64,
    /// With --drift: the requests' latency target (ms); the schedules ask for accuracy
    /// at any latency, so it is generous.
    #[arg(long, default_value_t = 10_000.0)]
    pub drift_latency_ms: f64,
}

/// `--drift`'s requests, their task and their rates.
fn drift_load(
    zoo: &Zoo,
    name: &str,
    args: &LoadgenArgs,
) -> anyhow::Result<(DriftLoad, String, Vec<f64>)> {
    let schedule =
        drift::named(name).with_context(|| format!("`--drift`: no schedule `{name}`"))?;
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.labels),
        "`--labels` must be between 0 and 1, not {}",
        args.labels
    );
    let delay = Duration::try_from_secs_f64(args.label_delay_s).map_err(|_| {
        anyhow::anyhow!(
            "`--label-delay-s` must be a number of seconds of at least 0, not {}",
            args.label_delay_s
        )
    })?;
    anyhow::ensure!(
        args.drift_latency_ms > 0.0 && args.drift_latency_ms.is_finite(),
        "`--drift-latency-ms` must be above 0, not {}",
        args.drift_latency_ms
    );
    anyhow::ensure!(
        !matches!(schedule.group_by, drift::GroupBy::Shifted(_)),
        "`--drift {name}` draws corrupted copies of the test set, which the live load generator does not send; `cocktail sim --drift {name}` replays it"
    );
    let world = World::load(zoo, schedule.task)?;
    let bound = DriftWorld::new(zoo, &world, schedule)?;
    let (items, labelled) = bound.requests(args.trace.seed, args.labels);
    let seconds = (items.len() as f64 / schedule.rate).ceil() as usize + 1;
    let load = DriftLoad {
        name: schedule.name.to_owned(),
        items,
        labelled,
        latency_ms: args.drift_latency_ms,
        accuracy: schedule.target,
        objective: bound.constraint().objective,
        delay,
    };
    Ok((load, schedule.task.to_owned(), vec![schedule.rate; seconds]))
}

pub fn run(zoo_path: Option<&Path>, args: &LoadgenArgs) -> anyhow::Result<()> {
    let zoo = Zoo::load(Zoo::locate(zoo_path)?)?;
    let (drift, task, rates) = match &args.drift {
        Some(name) => {
            let (load, task, rates) = drift_load(&zoo, name, args)?;
            (Some(Arc::new(load)), task, rates)
        }
        None => (None, args.trace.task.clone(), args.trace.rates()?),
    };
    let config = LoadgenConfig {
        url: args.url.trim_end_matches('/').to_owned(),
        task,
        rates,
        mix: args.trace.mix,
        seed: args.trace.seed,
        grace_ms: args.grace_ms,
        max_in_flight: args.max_in_flight,
        timeout: Duration::from_millis(args.timeout_ms),
        admin_token: auth::admin_token_for_tools(),
        api_key: auth::from_env_or_file(API_KEY_ENV, None)?,
        drift,
        retry_refused: args.retry_refused,
    };
    let (inputs, labels) = loadgen::inputs(&zoo, &config.task)?;
    let bar = ProgressBar::new(config.rates.len() as u64).with_style(
        ProgressStyle::with_template("loadgen [{bar:40}] {pos}/{len} s ({elapsed})")?
            .progress_chars("=> "),
    );
    let report = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            let types = match &config.drift {
                Some(d) => d.types(),
                None => {
                    loadgen::types_from_master(&zoo, &config, args.trace.latency_scale()?).await?
                }
            };
            loadgen::run(
                &config,
                &types,
                Arc::new(inputs),
                Arc::new(labels),
                Some(&bar),
            )
            .await
        })?;
    bar.finish_and_clear();
    println!("{}", loadgen::markdown(&report));
    let json = serde_json::to_string_pretty(&report)?;
    println!("{json}");
    if let Some(path) = &args.json {
        std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
