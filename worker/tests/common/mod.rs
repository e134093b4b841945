//! Starting the real `cocktail-worker` binary on port 0 for black-box tests.

#![allow(
    dead_code,
    reason = "each test crate uses only some of the shared helpers"
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use cocktail_common::{ModelEntry, Zoo};
use tokio::process::{Child, Command};

/// The zoo under test: `COCKTAIL_ZOO` when set (the worker reads it too), else the checkout's.
pub fn zoo() -> Zoo {
    let manifest = std::env::var_os("COCKTAIL_ZOO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/zoo.toml"));
    Zoo::load(manifest).unwrap()
}

/// The task's models ordered by single-item latency (fastest first).
pub fn by_latency<'a>(zoo: &'a Zoo, task: &'a str) -> Vec<&'a ModelEntry> {
    let mut models: Vec<_> = zoo.models_for(task).collect();
    let latency = |m: &ModelEntry| {
        m.profile
            .as_ref()
            .and_then(|p| p.latency_us(1, 1))
            .unwrap_or(f64::MAX)
    };
    models.sort_by(|a, b| latency(a).total_cmp(&latency(b)));
    models
}

/// The task's model with the most parameters (the slowest to run).
pub fn largest<'a>(zoo: &'a Zoo, task: &'a str) -> &'a ModelEntry {
    zoo.models_for(task).max_by_key(|m| m.params).unwrap()
}

/// A running worker process; killed when dropped.
pub struct WorkerProcess {
    pub child: Child,
    pub url: String,
}

impl WorkerProcess {
    pub async fn start(model: &str, extra: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cocktail-worker"));
        command
            .args(["--model", model, "--port", "0"])
            .args(extra)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("RUST_LOG", "warn")
            .stderr(Stdio::inherit());
        let started = cocktail_process::start(model, command, Duration::from_secs(120))
            .await
            .unwrap();
        Self {
            child: started.child,
            url: started.url,
        }
    }

    pub fn infer_url(&self, model: &str) -> String {
        format!("{}/v2/models/{model}/infer", self.url)
    }

    /// Its Prometheus exposition (`GET /metrics`).
    pub async fn metrics(&self, client: &reqwest::Client) -> String {
        client
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}
