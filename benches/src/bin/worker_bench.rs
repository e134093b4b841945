//! Worker benchmark (issue 3): throughput and p50/p99 over HTTP at several concurrency
//! levels against the same model run in-process through ONNX Runtime with the same
//! threads, in one run, with ratios. Prints a markdown table; asserts nothing.
//!
//! `cargo build --release -p cocktail-worker -p cocktail-benches && target/release/worker-bench`
//! (`--runs 3 --out docs` measures three times and writes the median run's table to
//! `docs/measured/worker.md`, which the results page includes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use cocktail_benches::measured::{self, Figure, Goal};
use cocktail_benches::process::{metrics_text, png_base64, secrets, series_sum, start};
use cocktail_benches::stats::{Summary, micros, said, us};
use cocktail_common::{Input, ModelEntry, TestSet, Zoo};
use cocktail_worker::preprocess::Preprocessor;
use cocktail_worker::{Backend, OnnxBackend};
use indicatif::ProgressBar;
use serde_json::json;

#[derive(Debug, Parser)]
struct Args {
    /// Fashion model to serve (default: the mid-size CNN the targets name).
    #[arg(long, default_value = "cnn_med")]
    model: String,
    /// ONNX Runtime intra-op threads, for both the worker and the in-process run.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Concurrency levels.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    concurrency: Vec<usize>,
    /// Requests per level.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Also write the table to `OUT/measured/worker.md` (docs/results.md includes it).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Measure this many times, each with workers of its own, and write the median run's
    /// table (by the overhead p50 at one client, lone calls inline), its heading quoting
    /// every run's figures and each one's median against its goal.
    #[arg(long, default_value_t = 1)]
    runs: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let zoo = Zoo::load(Zoo::locate(None)?)?;
    let model = zoo.model(&args.model)?.clone();
    let test_set = TestSet::load(&zoo, &model.task)?;
    let pngs: Vec<String> = test_set.items[..256]
        .iter()
        .map(|item| match item {
            Input::Image(image) => png_base64(image),
            Input::Text(_) => Ok(String::new()),
        })
        .collect::<anyhow::Result<_>>()?;
    let pngs = Arc::new(pngs);

    let runs =
        measured::repeat(args.runs, || measure(&args, &zoo, &model, &test_set, &pngs)).await?;
    measured::report(runs, args.out.as_deref(), "worker.md")
}

/// Issue 35's goals: a lone call's overhead p50 ≤ 80 µs; at 32 clients ≥ 0.9 of in-process
/// ONNX Runtime's throughput. The table's goal column judges the run's rows by them, the
/// heading each figure's median of the runs.
const OVERHEAD_GOAL_US: Goal = Goal::AtMost(80.0);
const RATIO_GOAL: Goal = Goal::AtLeast(0.9);
const RATIO_GOAL_AT: usize = 32;

/// Every concurrency of `args` once, against two fresh workers: the table (printed as it
/// grows) and the figures of issue 35's goals.
async fn measure(
    args: &Args,
    zoo: &Zoo,
    model: &ModelEntry,
    test_set: &TestSet,
    pngs: &Arc<Vec<String>>,
) -> anyhow::Result<measured::Run> {
    let threads = args.threads.to_string();
    // Two workers of the model: a lone call runs on the thread that received it (the
    // default) or is always handed to the batch thread (`--no-inline`), measured side by
    // side in one run.
    let mut workers = Vec::new();
    for (calls, extra) in [
        ("inline when idle", None),
        ("always handed off", Some("--no-inline")),
    ] {
        let mut worker_args = vec!["--model", &model.name, "--port", "0", "--threads", &threads];
        worker_args.extend(extra);
        let (child, url) = start("cocktail-worker", &worker_args).await?;
        workers.push((calls, child, url));
    }

    let preprocessor = Preprocessor::for_model(zoo, model)?;
    let policy = cocktail_common::batching::tune(model.profile.as_ref(), args.threads, None);
    let mut backend = OnnxBackend::load(zoo, model, args.threads, None)?;
    // Issue 35's figures, of the default worker (lone calls inline): its overhead at one
    // client first, the one the median run is chosen by.
    let mut overhead_at_one = None;
    let mut ratio_at_top = None;
    // The table is printed as it grows and returned whole at the end.
    let mut table = String::new();
    let mut line = |row: String| {
        println!("{row}");
        table.push_str(&row);
        table.push('\n');
    };
    line(format!(
        "Model `{}` ({} params), {} intra-op thread(s), the worker batching up to {} item(s), \
         {} requests per row from one reqwest client, each a base64 PNG in JSON. In-process: \
         ONNX Runtime on the batches the worker would form, without HTTP or preprocessing. \
         The overhead at one client is the HTTP p50 less the in-process p50: the client, \
         loopback HTTP, decoding and preprocessing. Worker mean: a request's time inside the \
         worker's handler, from its metrics; run inline: the share of calls the worker ran on \
         the thread that received them.\n",
        model.name, model.params, args.threads, policy.max_items, args.requests
    ));
    line(
        "| concurrency | worker calls | in-process req/s | HTTP req/s | ratio | in-process p50 (µs) | HTTP p50 (µs) | HTTP p99 (µs) | overhead p50 (µs) | worker mean (µs) | run inline (%) | goal (issue 35) |".into(),
    );
    line("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|".into());
    // The worker was started with this run's cluster secret: it answers only callers
    // that present it, as the master does.
    let client = cocktail_service::net::client(&[], Some(&secrets()?.cluster))?.build()?;
    for &concurrency in &args.concurrency {
        // In-process: the batches the worker forms at this concurrency (its tuned policy
        // caps them), back to back, so the ratio measures HTTP and preprocessing alone.
        let batch_size = concurrency.min(policy.max_items);
        let inputs = &test_set.items[..batch_size];
        let batch = preprocessor.batch(inputs)?;
        let mut in_process = Vec::new();
        let started = Instant::now();
        let mut served = 0;
        while served < args.requests {
            let t = Instant::now();
            backend.infer(&batch)?;
            in_process.push(t.elapsed());
            served += batch_size;
        }
        let in_process_rps = served as f64 / started.elapsed().as_secs_f64();
        let in_process = Summary::of(&mut in_process);

        for (index, (calls, _, url)) in workers.iter().enumerate() {
            let infer_url = format!("{url}/v2/models/{}/infer", model.name);
            let before = counted(&client, url).await?;
            let (http_rps, mut latencies) =
                http_run(&client, &infer_url, pngs, concurrency, args.requests).await?;
            let after = counted(&client, url).await?;
            // Mean time a request spends inside the worker (handler start to response), so
            // the overhead splits into the worker's share and the client's plus the network's.
            let answered = (after.answered - before.answered).max(1.0);
            let worker_mean = (after.seconds - before.seconds) / answered;
            let inline_share = 100.0 * (after.inline - before.inline) / answered;
            let http = Summary::of(&mut latencies);
            let overhead = http.p50.saturating_sub(in_process.p50);
            let ratio = http_rps / in_process_rps;
            let goal = match concurrency {
                1 => format!(
                    "overhead p50 {OVERHEAD_GOAL_US} µs: {}",
                    said(OVERHEAD_GOAL_US.met(micros(overhead)))
                ),
                RATIO_GOAL_AT => format!("ratio {RATIO_GOAL}: {}", said(RATIO_GOAL.met(ratio))),
                _ => "-".to_owned(),
            };
            if index == 0 {
                if concurrency == 1 {
                    overhead_at_one = Some(overhead);
                }
                if ratio_at_top.is_none_or(|(top, _)| concurrency > top) {
                    ratio_at_top = Some((concurrency, ratio));
                }
            }
            line(format!(
                "| {concurrency} | {calls} | {in_process_rps:.0} | {http_rps:.0} | {ratio:.3} | {} | {} | {} | {} | {:.1} | {inline_share:.0} | {goal} |",
                us(in_process.p50),
                us(http.p50),
                us(http.p99),
                if concurrency == 1 {
                    us(overhead)
                } else {
                    "-".into()
                },
                worker_mean * 1e6
            ));
        }
    }
    // What the overhead at one client cannot go below on this machine: a round trip to a
    // handler that does nothing, from the same client over the same connection.
    let mut floor_p50 = None;
    if let Some((_, _, url)) = workers.first() {
        let floor = floor(&client, &format!("{url}/v2/health/live"), args.requests).await?;
        line(format!(
            "\nHTTP floor: a bare `GET /v2/health/live` at one client, p50 {} µs, p99 {} µs; the overhead at one client includes it.",
            us(floor.p50),
            us(floor.p99)
        ));
        floor_p50 = Some(floor.p50);
    }
    for (_, mut child, _) in workers {
        child.kill().await.ok();
    }
    let mut figures = Vec::new();
    if let Some(overhead) = overhead_at_one {
        figures.push(
            Figure::new(
                "overhead p50 at one client, lone calls inline (µs)",
                micros(overhead),
                1,
            )
            .goal(OVERHEAD_GOAL_US),
        );
    }
    if let Some((concurrency, ratio)) = ratio_at_top {
        let figure = Figure::new(
            format!(
                "ratio to in-process ONNX Runtime at {concurrency} client{}",
                if concurrency == 1 { "" } else { "s" }
            ),
            ratio,
            3,
        );
        figures.push(if concurrency == RATIO_GOAL_AT {
            figure.goal(RATIO_GOAL)
        } else {
            figure
        });
    }
    if let Some(floor) = floor_p50 {
        figures.push(Figure::new("HTTP floor p50 (µs)", micros(floor), 1));
    }
    Ok(measured::Run { table, figures })
}

/// One client's round trips to `url` (a GET), after a warm-up: their summary.
async fn floor(client: &reqwest::Client, url: &str, requests: usize) -> anyhow::Result<Summary> {
    let mut latencies = Vec::with_capacity(requests);
    for i in 0..requests + 100 {
        let t = Instant::now();
        client
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        if i >= 100 {
            latencies.push(t.elapsed());
        }
    }
    Ok(Summary::of(&mut latencies))
}

/// A worker's counters so far, from its `/metrics`.
struct Counted {
    /// Seconds its handlers took, summed.
    seconds: f64,
    /// Calls answered.
    answered: f64,
    /// Calls run on the thread that received them.
    inline: f64,
}

async fn counted(client: &reqwest::Client, url: &str) -> anyhow::Result<Counted> {
    let text = metrics_text(client, url).await?;
    Ok(Counted {
        seconds: series_sum(&text, "cocktail_worker_request_duration_seconds_sum"),
        answered: series_sum(&text, "cocktail_worker_request_duration_seconds_count"),
        inline: series_sum(&text, "cocktail_worker_inline_calls_total"),
    })
}

/// Closed-loop clients, `concurrency` at a time, each sending one base64 PNG per request.
async fn http_run(
    client: &reqwest::Client,
    url: &str,
    pngs: &Arc<Vec<String>>,
    concurrency: usize,
    requests: usize,
) -> anyhow::Result<(f64, Vec<Duration>)> {
    // Warm the connections and the model.
    for png in pngs.iter().take(concurrency.max(8)) {
        let body = json!({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": [png]}]});
        client
            .post(url)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
    }
    let bar = ProgressBar::new(requests as u64);
    let per_client = requests.div_ceil(concurrency);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let (client, url, pngs, bar) = (client.clone(), url.to_owned(), Arc::clone(pngs), bar.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let png = &pngs[(c * per_client + i) % pngs.len()];
                    let body = json!({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": [png]}]});
                    let t = Instant::now();
                    let response = client.post(&url).json(&body).send().await?;
                    let status = response.status();
                    response.bytes().await?;
                    if !status.is_success() {
                        anyhow::bail!("worker answered {status}");
                    }
                    latencies.push(t.elapsed());
                    bar.inc(1);
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(requests);
    for task in tasks {
        all.extend(task.await??);
    }
    bar.finish_and_clear();
    Ok((all.len() as f64 / started.elapsed().as_secs_f64(), all))
}
