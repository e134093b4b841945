//! `cocktail loadgen`: open-loop load from a trace against a running master.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use cocktail_benches::loadgen::{self, LoadgenConfig};
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
    /// Requests in flight at most; arrivals beyond are dropped and counted.
    #[arg(long, default_value_t = 1024)]
    pub max_in_flight: usize,
    /// Client timeout per request (ms).
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(zoo_path: Option<&Path>, args: &LoadgenArgs) -> anyhow::Result<()> {
    let zoo = Zoo::load(Zoo::locate(zoo_path)?)?;
    let config = LoadgenConfig {
        url: args.url.trim_end_matches('/').to_owned(),
        task: args.trace.task.clone(),
        rates: args.trace.rates()?,
        mix: args.trace.mix,
        seed: args.trace.seed,
        grace_ms: args.grace_ms,
        max_in_flight: args.max_in_flight,
        timeout: Duration::from_millis(args.timeout_ms),
        admin_token: auth::admin_token_for_tools(),
        api_key: auth::from_env_or_file(API_KEY_ENV, None)?,
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
            let types =
                loadgen::types_from_master(&zoo, &config, args.trace.latency_scale()?).await?;
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
