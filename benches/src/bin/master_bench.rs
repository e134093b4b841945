//! Master benchmark (issue 4): the master's own cost per request — parse, select, cache,
//! dispatch, vote, encode — with real workers, their time subtracted. The master reports
//! it per request in `Server-Timing: master;dur=…, wait;dur=…` (handler time minus the
//! wait for the members). Also the CPU time master and workers spend per request, once
//! per member wire (`--member-wire binary`: Triton's binary tensor extension; `json`:
//! base64 PNG in OIP JSON), so the two hops compare in one run, and once per transport of
//! the master→worker hop (`--hops plain`: HTTP, as static workers and `--no-cluster-tls`;
//! `tls`: HTTPS with a certificate from a cluster CA, as provider-launched workers by
//! default), and on the binary wire once per `--joins` value (the master's
//! `--join-calls-us`: 0 sends every member call alone). The CPU splits into the master's, the workers' outside inference, and the
//! inference itself (the CPU time of the thread that ran each batch, from each worker's
//! `cocktail_worker_inference_cpu_seconds`). Prints a markdown table with issue 35's
//! goals; asserts nothing.
//!
//! `cargo build --release --workspace --bins && target/release/master-bench`
//! (`--runs 3 --out docs` measures three times and writes the median run's table to
//! `docs/measured/wire.md`, which the results page includes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum as _};
use cocktail_benches::measured::{self, Figure, Goal};
use cocktail_benches::process::{
    MASTER_FLAGS, admin_client, metrics_text, png_base64, secrets, series_sum, start,
    wait_for_workers,
};
use cocktail_benches::procfs::{ProcessSet, cpu_between};
use cocktail_benches::stats::{Summary, micros, said, us};
use cocktail_common::{Input, TestSet, Zoo};
use cocktail_master::serving::request::MemberWire;
use indicatif::ProgressBar;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
struct Args {
    /// Fashion models to run workers for (the fast ones, so the workers are not the
    /// bottleneck of the 2-core machine).
    #[arg(long, value_delimiter = ',', default_value = "mlp_med,dwsep,cnn_small")]
    models: Vec<String>,
    /// Concurrency levels.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    concurrency: Vec<usize>,
    /// Requests per row.
    #[arg(long, default_value_t = 3000)]
    requests: usize,
    /// Member wires to compare, each with a master and workers of its own.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "binary,json")]
    wires: Vec<MemberWire>,
    /// Transports of the master→worker hop to compare, each with a master and workers of
    /// its own.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "plain,tls")]
    hops: Vec<Hop>,
    /// The master's `--join-calls-us` values to compare on the binary wire (0: every
    /// member call goes alone), each with a master and workers of its own. The JSON wire
    /// joins no calls.
    #[arg(long, value_delimiter = ',', default_value = "0,1000")]
    joins: Vec<u64>,
    /// Also write the table to `OUT/measured/wire.md` (docs/results.md includes it).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Measure this many times and write the median run's table (by the 3-model
    /// ensemble's req/s at the highest concurrency, on the first wire and hop with the
    /// most joins), its heading quoting every run's figures and each one's median against
    /// its goal.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Extra flags for every worker, e.g. `--worker-arg=--idle-poll-us=200`.
    #[arg(long = "worker-arg", allow_hyphen_values = true)]
    worker_args: Vec<String>,
}

/// How the master reaches its workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Hop {
    /// Plain HTTP.
    Plain,
    /// HTTPS, the workers' certificates signed by a throwaway cluster CA the master trusts.
    Tls,
}

impl Hop {
    fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Tls => "tls",
        }
    }
}

/// One row of the table: a constraint that makes the master serve `members` models.
struct Scenario {
    name: &'static str,
    parameters: Value,
    /// Whether issue 35's goals are about this row's constraint.
    ensemble: bool,
}

/// Issue 35's goals for the 3-model ensemble: at 8 clients, CPU per request ≤ 400 µs over
/// master and workers, and the master's own time p50 ≤ 30 µs, p99 ≤ 150 µs; at 1 client,
/// a client p50 ≤ 400 µs. The table's goal column judges the run's rows by them, the
/// heading each figure's median of the runs.
const CPU_GOAL_US: Goal = Goal::AtMost(400.0);
const MASTER_P50_GOAL_US: Goal = Goal::AtMost(30.0);
const MASTER_P99_GOAL_US: Goal = Goal::AtMost(150.0);
const CLIENT_P50_GOAL_US: Goal = Goal::AtMost(400.0);

/// The goal column of a row ([`CPU_GOAL_US`] and the others).
fn goals(
    scenario: &Scenario,
    concurrency: usize,
    cpu_us: f64,
    client: &Summary,
    own: &Summary,
) -> String {
    match (scenario.ensemble, concurrency) {
        (true, 8) => format!(
            "CPU {CPU_GOAL_US} µs: {}; master p50 {MASTER_P50_GOAL_US}, p99 {MASTER_P99_GOAL_US} µs: {}",
            said(CPU_GOAL_US.met(cpu_us)),
            said(
                MASTER_P50_GOAL_US.met(micros(own.p50)) && MASTER_P99_GOAL_US.met(micros(own.p99))
            ),
        ),
        (true, 1) => format!(
            "client p50 {CLIENT_P50_GOAL_US} µs: {}",
            said(CLIENT_P50_GOAL_US.met(micros(client.p50)))
        ),
        _ => "-".to_owned(),
    }
}

/// The member calls the master at `url` has sent joined with others so far.
async fn joined_calls(client: &reqwest::Client, url: &str) -> anyhow::Result<f64> {
    let text = metrics_text(client, url).await?;
    Ok(series_sum(
        &text,
        "cocktail_master_member_calls_joined_total",
    ))
}

/// The inference CPU time (seconds) the workers at `urls` have spent so far.
async fn inference_cpu(client: &reqwest::Client, urls: &[&str]) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for url in urls {
        let text = metrics_text(client, url).await?;
        total += series_sum(&text, "cocktail_worker_inference_cpu_seconds_sum");
    }
    Ok(total)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let zoo = Zoo::load(Zoo::locate(None)?)?;
    let test_set = TestSet::load(&zoo, "fashion")?;
    let pngs: Vec<String> = test_set.items[..256]
        .iter()
        .filter_map(|item| match item {
            Input::Image(image) => Some(png_base64(image)),
            Input::Text(_) => None,
        })
        .collect::<anyhow::Result<_>>()?;
    let pngs = Arc::new(pngs);

    let runs = measured::repeat(args.runs, || measure(&args, &pngs)).await?;
    measured::report(runs, args.out.as_deref(), "wire.md")
}

/// Every wire, hop and join of `args` once: the table (printed as it grows) and the
/// figures of issue 35's row.
async fn measure(args: &Args, pngs: &Arc<Vec<String>>) -> anyhow::Result<measured::Run> {
    let mut table = format!(
        "{} worker(s) ({}), {} requests per row, one base64 PNG per request from a JSON \
         client. CPU per request is the master's and the workers' (from `/proc`, warm-up \
         requests included), split into the master's, the workers' outside inference, and \
         inference (the CPU time of the thread that ran each batch, in each worker). Issue 35's goals are about the \
         3-model ensemble (`target/release/master-bench --runs 3 --out docs`).\n\n\
         | member wire | hop | joined calls wait (µs) | constraint | concurrency | members | member calls joined (%) | req/s | CPU per request (µs) | master CPU (µs) | workers' CPU outside inference (µs) | inference CPU (µs) | client p50 (µs) | wait p50 (µs) | master p50 (µs) | master p99 (µs) | goals (issue 35) |\n\
         |---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        args.models.len(),
        args.models.join(", "),
        args.requests
    );
    print!("{table}");
    let mut rows = Vec::new();
    for wire in &args.wires {
        let joins: &[u64] = if *wire == MemberWire::Binary {
            &args.joins
        } else {
            &[0]
        };
        for &hop in &args.hops {
            for &join_us in joins {
                for row in bench_wire(args, *wire, hop, join_us, pngs).await? {
                    let line = row.markdown();
                    println!("{line}");
                    table.push_str(&line);
                    table.push('\n');
                    rows.push(row);
                }
            }
        }
    }
    Ok(measured::Run {
        table,
        figures: figures(args, &rows),
    })
}

/// The figures a run's heading quotes: issue 35's row (the 3-model ensemble on the first
/// wire and hop with the most joins) at the highest concurrency, and its client p50 at
/// one client.
fn figures(args: &Args, rows: &[Row]) -> Vec<measured::Figure> {
    let (Some(&wire), Some(&hop)) = (args.wires.first(), args.hops.first()) else {
        return Vec::new();
    };
    let join_us = if wire == MemberWire::Binary {
        args.joins.iter().copied().max().unwrap_or(0)
    } else {
        0
    };
    let top = args.concurrency.iter().copied().max().unwrap_or(1);
    let row = |concurrency: usize| {
        rows.iter().find(|r| {
            r.ensemble
                && r.wire == wire
                && r.hop == hop
                && r.join_us == join_us
                && r.concurrency == concurrency
        })
    };
    let mut figures = Vec::new();
    if let Some(r) = row(top) {
        let at = format!(
            "at {top} clients ({}, {}, joins {join_us} µs)",
            wire_name(wire),
            hop.name()
        );
        figures.extend([
            Figure::new(format!("the 3-model ensemble's req/s {at}"), r.rps, 0),
            Figure::new("its CPU per request (µs)", r.cpu_us, 1).goal(CPU_GOAL_US),
            Figure::new("its master p50 (µs)", micros(r.own.p50), 1).goal(MASTER_P50_GOAL_US),
            Figure::new("its master p99 (µs)", micros(r.own.p99), 1).goal(MASTER_P99_GOAL_US),
        ]);
    }
    if top != 1
        && let Some(r) = row(1)
    {
        figures.push(
            Figure::new("its client p50 at 1 client (µs)", micros(r.client.p50), 1)
                .goal(CLIENT_P50_GOAL_US),
        );
    }
    figures
}

/// The master's flag's name for `wire` (clap's).
fn wire_name(wire: MemberWire) -> String {
    wire.to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// One row of the table.
struct Row {
    wire: MemberWire,
    hop: Hop,
    join_us: u64,
    scenario: &'static str,
    ensemble: bool,
    concurrency: usize,
    members: usize,
    joined_share: f64,
    rps: f64,
    cpu_us: f64,
    master_us: f64,
    inference_us: f64,
    client: Summary,
    wait: Summary,
    own: Summary,
    goals: String,
}

impl Row {
    fn markdown(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
            wire_name(self.wire),
            self.hop.name(),
            self.join_us,
            self.scenario,
            self.concurrency,
            self.members,
            self.joined_share,
            self.rps,
            self.cpu_us,
            self.master_us,
            self.cpu_us - self.master_us - self.inference_us,
            self.inference_us,
            us(self.client.p50),
            us(self.wait.p50),
            us(self.own.p50),
            us(self.own.p99),
            self.goals,
        )
    }
}

/// One master with `--member-wire wire` and `--join-calls-us join_us`, and its workers,
/// reached over `hop`: the table's rows.
async fn bench_wire(
    args: &Args,
    wire: MemberWire,
    hop: Hop,
    join_us: u64,
    pngs: &Arc<Vec<String>>,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let tls = match hop {
        Hop::Plain => None,
        Hop::Tls => Some(throwaway_tls()?),
    };
    let mut master_args: Vec<String> = MASTER_FLAGS.iter().map(|s| (*s).to_owned()).collect();
    master_args.extend([
        "--member-wire".to_owned(),
        wire_name(wire),
        "--join-calls-us".to_owned(),
        join_us.to_string(),
    ]);
    if let Some(tls) = &tls {
        master_args.extend(["--tls-ca".to_owned(), tls.ca.display().to_string()]);
    }
    let master_args: Vec<&str> = master_args.iter().map(String::as_str).collect();
    let (master, url) = start("cocktail-master", &master_args).await?;
    let tls_flags: Vec<String> = match &tls {
        Some(tls) => vec![
            "--tls-cert".to_owned(),
            tls.cert.display().to_string(),
            "--tls-key".to_owned(),
            tls.key.display().to_string(),
        ],
        None => Vec::new(),
    };
    let mut workers = Vec::new();
    for model in &args.models {
        let mut worker_args = vec!["--model", model, "--port", "0", "--master", &url];
        worker_args.extend(tls_flags.iter().map(String::as_str));
        worker_args.extend(args.worker_args.iter().map(String::as_str));
        workers.push(start("cocktail-worker", &worker_args).await?);
    }
    let pid = |child: &tokio::process::Child| child.id().and_then(|p| i32::try_from(p).ok());
    let master_pid = pid(&master).context("the master has exited")?;
    let processes = ProcessSet {
        session: None,
        pids: std::iter::once(&master)
            .chain(workers.iter().map(|(child, _)| child))
            .filter_map(pid)
            .collect(),
    };
    let client = admin_client()?;
    // The workers' /metrics answer the cluster's callers only, over the hop's transport.
    let cas = match &tls {
        Some(tls) => cocktail_service::net::read_certificates(&tls.ca)?,
        None => Vec::new(),
    };
    let cluster = cocktail_service::net::client(&cas, Some(&secrets()?.cluster))?.build()?;
    let worker_urls: Vec<&str> = workers.iter().map(|(_, url)| url.as_str()).collect();
    wait_for_workers(&client, &url, args.models.len()).await?;

    let scenarios = [
        Scenario {
            name: "single model",
            parameters: json!({ "latency_ms": 0.043, "accuracy": 0.5, "objective": "latency" }),
            ensemble: false,
        },
        Scenario {
            name: "3-model ensemble",
            // Pinned: selection counts correlated errors and would serve one model.
            // The target is one every member meets, so that all three vote.
            parameters: json!({ "latency_ms": 100, "accuracy": 0.95, "models": args.models.join(",") }),
            ensemble: true,
        },
    ];
    let infer_url = format!("{url}/v2/models/fashion/infer");
    for scenario in &scenarios {
        for &concurrency in &args.concurrency {
            let cpu_before = processes.cpu_ticks();
            let inference_before = inference_cpu(&cluster, &worker_urls).await?;
            let joined_before = joined_calls(&client, &url).await?;
            let run = run(
                &client,
                &infer_url,
                pngs,
                &scenario.parameters,
                concurrency,
                args.requests,
            )
            .await?;
            let cpu_after = processes.cpu_ticks();
            let inference = inference_cpu(&cluster, &worker_urls).await? - inference_before;
            let joined = joined_calls(&client, &url).await? - joined_before;
            let only_master = |ticks: &std::collections::BTreeMap<i32, u64>| {
                ticks
                    .iter()
                    .filter(|(p, _)| **p == master_pid)
                    .map(|(p, t)| (*p, *t))
                    .collect()
            };
            let cpu = cpu_between(&cpu_before, &cpu_after);
            let master_cpu = cpu_between(&only_master(&cpu_before), &only_master(&cpu_after));
            let (mut client_t, mut wait, mut own) = (run.client, run.wait, run.own);
            let requests = (client_t.len() + WARM_UP) as f64;
            let per_request = |d: Duration| d.as_secs_f64() * 1e6 / requests;
            let cpu_us = per_request(cpu);
            let master_us = per_request(master_cpu);
            let inference_us = inference * 1e6 / requests;
            let (c, w, o) = (
                Summary::of(&mut client_t),
                Summary::of(&mut wait),
                Summary::of(&mut own),
            );
            rows.push(Row {
                wire,
                hop,
                join_us,
                scenario: scenario.name,
                ensemble: scenario.ensemble,
                concurrency,
                members: run.members,
                joined_share: 100.0 * joined / (requests * run.members as f64),
                rps: run.rps,
                cpu_us,
                master_us,
                inference_us,
                goals: goals(scenario, concurrency, cpu_us, &c, &o),
                client: c,
                wait: w,
                own: o,
            });
        }
    }
    drop(workers);
    drop(master);
    Ok(rows)
}

/// A throwaway cluster CA (the master's own kind) and a certificate for 127.0.0.1, as
/// PEM files in a fresh temporary folder.
struct Tls {
    ca: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

fn throwaway_tls() -> anyhow::Result<Tls> {
    use cocktail_master::access::ca::{CA_FILE, ClusterCa};
    let dir = std::env::temp_dir().join(format!("master-bench-tls-{}", std::process::id()));
    // A CA left by an earlier run of this process id is as good as a new one.
    let ca = ClusterCa::read_or_create(&dir)?;
    let issued = ca.issue(&["127.0.0.1".to_owned()])?;
    let (cert, key) = (dir.join("worker.pem"), dir.join("worker-key.pem"));
    std::fs::write(&cert, issued.cert_pem)?;
    std::fs::write(&key, issued.key_pem)?;
    Ok(Tls {
        ca: dir.join(CA_FILE),
        cert,
        key,
    })
}

/// Requests sent before the measured ones in each row (their CPU time is counted too).
const WARM_UP: usize = 64;

struct Run {
    rps: f64,
    members: usize,
    client: Vec<Duration>,
    wait: Vec<Duration>,
    own: Vec<Duration>,
}

/// `master;dur=X, wait;dur=Y` in milliseconds.
fn server_timing(header: Option<&reqwest::header::HeaderValue>) -> Option<(Duration, Duration)> {
    let text = header?.to_str().ok()?;
    let mut own = None;
    let mut wait = None;
    for part in text.split(',') {
        let (name, dur) = part.trim().split_once(";dur=")?;
        let value = Duration::from_secs_f64(dur.parse::<f64>().ok()? / 1e3);
        match name {
            "master" => own = Some(value),
            "wait" => wait = Some(value),
            _ => {}
        }
    }
    Some((own?, wait?))
}

/// Closed-loop clients, `concurrency` at a time.
async fn run(
    client: &reqwest::Client,
    url: &str,
    pngs: &Arc<Vec<String>>,
    parameters: &Value,
    concurrency: usize,
    requests: usize,
) -> anyhow::Result<Run> {
    let body = |png: &str| json!({ "inputs": [{ "name": "image", "shape": [1], "datatype": "BYTES", "data": [png] }], "parameters": parameters });
    // Warm up: connections, the cache entry, the workers.
    let mut members = 0;
    for png in pngs.iter().take(WARM_UP) {
        let answer: Value = client
            .post(url)
            .json(&body(png))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        members = answer["parameters"]["models"]
            .as_array()
            .map_or(0, Vec::len);
    }
    let bar = ProgressBar::new(requests as u64);
    let per_client = requests.div_ceil(concurrency);
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let (client, url, pngs, bar) = (
                client.clone(),
                url.to_owned(),
                Arc::clone(pngs),
                bar.clone(),
            );
            let bodies: Vec<Value> = (0..per_client)
                .map(|i| body(&pngs[(c * per_client + i) % pngs.len()]))
                .collect();
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(per_client);
                for body in bodies {
                    let t = Instant::now();
                    let response = client.post(&url).json(&body).send().await?;
                    let status = response.status();
                    let timing = server_timing(response.headers().get("server-timing"));
                    response.bytes().await?;
                    let elapsed = t.elapsed();
                    anyhow::ensure!(status.is_success(), "master answered {status}");
                    let (own, wait) = timing.context("no Server-Timing header")?;
                    samples.push((elapsed, wait, own));
                    bar.inc(1);
                }
                Ok(samples)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(requests);
    for task in tasks {
        all.extend(task.await??);
    }
    bar.finish_and_clear();
    Ok(Run {
        rps: all.len() as f64 / started.elapsed().as_secs_f64(),
        members,
        client: all.iter().map(|s| s.0).collect(),
        wait: all.iter().map(|s| s.1).collect(),
        own: all.iter().map(|s| s.2).collect(),
    })
}
