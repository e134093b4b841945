//! Peer benchmark (issue 19, point 5): one closed-loop run against Cocktail or another
//! serving system that takes the same OIP v2 request (`benches/peers/ray/` is Ray
//! Serve's), printing one markdown row: throughput, latency, CPU time per request and
//! memory of the system's processes. `scripts/peer-ray.sh` runs it for each system and
//! concurrency and adds the ratios. Asserts nothing.
//!
//! Each of `--concurrency` tasks sends its next request when its last answer arrived,
//! base64 PNGs of the fashion test set as master-bench sends them, first `--warmup`
//! requests, then `--requests` measured ones. Every answer must be a 200 whose `class`
//! output is present (and, with `--expect-models`, whose `parameters.models` names that
//! many members); anything else counts as an error and is left out of the latencies.
//!
//! The system's processes are read from `/proc`: Cocktail's master and workers (started
//! here), or the processes of a Unix session (`--session`, e.g. the one `setsid ray
//! start` opened: everything Ray runs, GCS, raylet, agents, controller, proxy, HAProxy,
//! replicas) and of given PIDs, with all their descendants. CPU per request is the
//! increase of utime + stime over the measured requests, summed over those processes,
//! divided by the successful requests; memory is the sum of their PSS (and RSS) at the end.
//!
//! `cargo build --release --workspace --bins && target/release/peer-bench cocktail --header`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use cocktail_benches::process::{MASTER_FLAGS, admin_client, png_base64, start, wait_for_workers};
use cocktail_benches::procfs::{ProcessSet, cpu_between};
use cocktail_benches::stats::Summary;
use cocktail_common::{Input, TestSet, Zoo};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
struct Args {
    #[command(subcommand)]
    target: Target,
}

#[derive(Debug, Subcommand)]
enum Target {
    /// Cocktail: a master plus one worker per model on loopback, started here as
    /// master-bench starts them, and stopped at the end.
    Cocktail {
        /// One worker per model.
        #[arg(long, value_delimiter = ',', default_value = "cnn_med,mlp_med,lenet")]
        models: Vec<String>,
        #[command(flatten)]
        load: Load,
    },
    /// A system already answering at `--url`, whose processes are given.
    Url {
        /// The inference URL, e.g. http://127.0.0.1:28000/v2/models/fashion/infer.
        #[arg(long)]
        url: String,
        /// Its name in the table.
        #[arg(long)]
        system: String,
        /// Count every process of this Unix session (and their descendants).
        #[arg(long)]
        session: Option<i32>,
        /// Count these processes (and their descendants).
        #[arg(long, value_delimiter = ',')]
        pids: Vec<i32>,
        #[command(flatten)]
        load: Load,
    },
}

#[derive(Debug, clap::Args)]
struct Load {
    /// Closed-loop clients.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Measured requests.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Requests before the measured ones (connections, caches, lazy initialisation).
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Count an answer as an error unless `parameters.models` names this many members.
    #[arg(long)]
    expect_models: Option<usize>,
    /// The request `parameters` (JSON); the default is a latency target all three models
    /// meet and a majority vote. Cocktail's requests also name its workers' models in
    /// `models` (pinned) unless these parameters name them.
    #[arg(
        long,
        default_value = r#"{"latency_ms": 100, "accuracy": 0.95, "scheme": "majority"}"#
    )]
    parameters: String,
    /// Print the table's header first.
    #[arg(long)]
    header: bool,
}

/// The URL and processes of the system under test; whatever it started stops on drop.
struct System {
    name: String,
    url: String,
    client: reqwest::Client,
    processes: ProcessSet,
    _children: Vec<tokio::process::Child>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Cocktail's ensemble is pinned to its workers' models (the request parameter
    // `models`), as the peers' static ensembles are: selection alone would serve the
    // request with the one model that meets it.
    let mut pinned = None;
    let (system, load) = match args.target {
        Target::Cocktail { models, load } => {
            pinned = Some(models.join(","));
            (start_cocktail(&models).await?, load)
        }
        Target::Url {
            url,
            system,
            session,
            pids,
            load,
        } => {
            if session.is_none() && pids.is_empty() {
                bail!("give the system's processes: --session SID or --pids PID,...");
            }
            let system = System {
                name: system,
                url,
                client: reqwest::Client::builder().build()?,
                processes: ProcessSet { session, pids },
                _children: Vec::new(),
            };
            (system, load)
        }
    };
    anyhow::ensure!(load.concurrency > 0, "--concurrency must be at least 1");
    let mut parameters: Value =
        serde_json::from_str(&load.parameters).context("--parameters is not JSON")?;
    if let (Some(models), Some(object)) = (pinned, parameters.as_object_mut()) {
        object.entry("models").or_insert(Value::String(models));
    }
    let requests = Arc::new(requests(&parameters)?);

    let warm = drive(&system, &requests, &load, load.warmup, "warm-up").await;
    if warm.ok == 0 && load.warmup > 0 {
        bail!(
            "{}: no warm-up request succeeded: {}",
            system.name,
            warm.first_error.as_deref().unwrap_or("no answer")
        );
    }
    if load.header {
        println!(
            "| system | concurrency | requests | errors | req/s | p50 (ms) | p99 (ms) | CPU ms/req | PSS (MiB) | RSS (MiB) | processes | accuracy |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    }
    let before = system.processes.cpu_ticks();
    let run = drive(&system, &requests, &load, load.requests, "measured").await;
    let after = system.processes.cpu_ticks();
    let memory = system.processes.memory();

    let cpu_ms = cpu_between(&before, &after).as_secs_f64() * 1e3;
    let vanished = before.keys().filter(|p| !after.contains_key(p)).count();
    if vanished > 0 {
        eprintln!("{vanished} process(es) ended during the run; their CPU time is not counted");
    }
    if let Some(error) = &run.first_error {
        eprintln!(
            "{}: {} error(s), the first: {error}",
            system.name, run.errors
        );
    }
    let mut latencies = run.latencies;
    let summary = Summary::of(&mut latencies);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {} | {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {} | {:.3} |",
        system.name,
        load.concurrency,
        run.ok + run.errors,
        run.errors,
        run.ok as f64 / run.elapsed.as_secs_f64(),
        ms(summary.p50),
        ms(summary.p99),
        cpu_ms / run.ok.max(1) as f64,
        memory.pss_kib as f64 / 1024.0,
        memory.rss_kib as f64 / 1024.0,
        memory.processes,
        run.correct as f64 / run.ok.max(1) as f64,
    );
    Ok(())
}

/// A master and one worker per model, as master-bench starts them.
async fn start_cocktail(models: &[String]) -> anyhow::Result<System> {
    let (master, url) = start("cocktail-master", MASTER_FLAGS).await?;
    let mut children = vec![master];
    for model in models {
        let (worker, _) = start(
            "cocktail-worker",
            &[
                "--model",
                model,
                "--port",
                "0",
                "--threads",
                "1",
                "--master",
                &url,
            ],
        )
        .await?;
        children.push(worker);
    }
    let client = admin_client()?;
    wait_for_workers(&client, &url, models.len()).await?;
    let pids = children
        .iter()
        .filter_map(|c| c.id())
        .filter_map(|id| i32::try_from(id).ok())
        .collect();
    Ok(System {
        name: "Cocktail".into(),
        url: format!("{url}/v2/models/fashion/infer"),
        client,
        processes: ProcessSet {
            session: None,
            pids,
        },
        _children: children,
    })
}

/// One request body per test image with its label, serialised once.
fn requests(parameters: &Value) -> anyhow::Result<Vec<(Vec<u8>, usize)>> {
    let zoo = Zoo::load(Zoo::locate(None)?)?;
    let test_set = TestSet::load(&zoo, "fashion")?;
    test_set
        .items
        .iter()
        .zip(&test_set.labels)
        .take(256)
        .filter_map(|(item, &label)| match item {
            Input::Image(image) => Some((image, label)),
            Input::Text(_) => None,
        })
        .map(|(image, label)| {
            let body = json!({
                "inputs": [{ "name": "image", "shape": [1], "datatype": "BYTES", "data": [png_base64(image)?] }],
                "parameters": parameters,
            });
            Ok((serde_json::to_vec(&body)?, label))
        })
        .collect()
}

/// What one phase of closed-loop load measured.
#[derive(Debug, Default)]
struct Run {
    ok: usize,
    errors: usize,
    /// Answers whose class is the image's label.
    correct: usize,
    first_error: Option<String>,
    latencies: Vec<Duration>,
    elapsed: Duration,
}

/// Sends `total` requests from `load.concurrency` closed-loop clients.
async fn drive(
    system: &System,
    requests: &Arc<Vec<(Vec<u8>, usize)>>,
    load: &Load,
    total: usize,
    phase: &'static str,
) -> Run {
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{msg:>24} [{bar:30}] {pos}/{len} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{} c={} {phase}", system.name, load.concurrency));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..load.concurrency)
        .map(|_| {
            let (client, url, requests, next, bar) = (
                system.client.clone(),
                system.url.clone(),
                Arc::clone(requests),
                Arc::clone(&next),
                bar.clone(),
            );
            let expect_models = load.expect_models;
            tokio::spawn(async move {
                let mut run = Run::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let (body, label) = &requests[i % requests.len()];
                    let sent = Instant::now();
                    match call(&client, &url, body.clone(), expect_models).await {
                        Ok(class) => {
                            run.latencies.push(sent.elapsed());
                            run.ok += 1;
                            run.correct += usize::from(class == *label);
                        }
                        Err(e) => {
                            run.errors += 1;
                            run.first_error.get_or_insert_with(|| format!("{e:#}"));
                        }
                    }
                    bar.inc(1);
                }
                run
            })
        })
        .collect();
    let mut all = Run::default();
    for task in tasks {
        match task.await {
            Ok(run) => {
                all.ok += run.ok;
                all.errors += run.errors;
                all.correct += run.correct;
                all.latencies.extend(run.latencies);
                if all.first_error.is_none() {
                    all.first_error = run.first_error;
                }
            }
            Err(e) => {
                all.first_error
                    .get_or_insert_with(|| format!("client task: {e}"));
            }
        }
    }
    all.elapsed = started.elapsed();
    bar.finish_and_clear();
    all
}

/// One request; the answered class, or why the answer does not count.
async fn call(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    expect_models: Option<usize>,
) -> anyhow::Result<usize> {
    let response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await?;
    let status = response.status();
    let bytes = response.bytes().await?;
    if status != reqwest::StatusCode::OK {
        bail!("{status}: {}", String::from_utf8_lossy(&bytes));
    }
    let answer: Value = serde_json::from_slice(&bytes).context("answer is not JSON")?;
    if let Some(expected) = expect_models {
        let members = answer["parameters"]["models"]
            .as_array()
            .map_or(0, Vec::len);
        anyhow::ensure!(
            members == expected,
            "the answer names {members} members in parameters.models, not {expected}"
        );
    }
    let class = answer["outputs"]
        .as_array()
        .and_then(|outputs| outputs.iter().find(|o| o["name"] == "class"))
        .and_then(|o| o["data"][0].as_u64())
        .context("no `class` output")?;
    Ok(usize::try_from(class)?)
}
