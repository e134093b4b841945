//! Soak benchmark (issue 15): `cocktail up` on its defaults under steady open-loop load
//! (both tasks) for a while, sampling the resident memory and open file descriptors of
//! the master and of every worker. Prints a markdown table with each process's figures
//! after the warm-up and at the end, and their growth; asserts nothing. Goal: RSS growth
//! under 10 %, no fd growth. `--out DIR` also writes the table to `DIR/measured/soak.md`,
//! which `cocktail results` puts into `docs/results.md`.
//!
//! `cargo build --release --workspace --bins && target/release/soak-bench --minutes 10 --out docs`

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use cocktail_benches::loadgen::{self, LoadReport, LoadgenConfig};
use cocktail_benches::measured;
use cocktail_benches::process::{admin_client, command_lines, flag, parent_of, secrets, sibling};
use cocktail_benches::workload::Mix;
use cocktail_common::Zoo;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::process::Command;

#[derive(Debug, Parser)]
struct Args {
    /// Minutes of load measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Seconds of load before the first sample (allocators and caches settle).
    #[arg(long, default_value_t = 60)]
    warmup_s: u64,
    /// Requests per second of the fashion task; the sentiment task gets a quarter of it.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// The master's port.
    #[arg(long, default_value_t = 18080)]
    port: u16,
    /// Also write the table to `OUT/measured/soak.md`.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One process's memory and descriptors at one moment.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rss_kib: u64,
    fds: usize,
}

/// The master's open descriptors by kind (`socket`, `pipe`, files, ...).
fn fd_kinds(pid: i32) -> std::collections::BTreeMap<String, usize> {
    let mut kinds = std::collections::BTreeMap::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return kinds;
    };
    for fd in fds.flatten() {
        let target = std::fs::read_link(fd.path())
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        let kind = match target.split_once(':') {
            Some((kind, _)) if !target.starts_with('/') => kind.to_owned(),
            _ => "file".to_owned(),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// Reads `/proc/PID`: resident memory (VmRSS) and open descriptors.
fn sample(pid: i32) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(Sample { rss_kib, fds })
}

/// `(name, pid)` of the master listening on `port` (by its command line) and of its
/// workers (its children).
fn processes(port: u16) -> Vec<(String, i32)> {
    let port = port.to_string();
    let lines = command_lines();
    let masters: Vec<i32> = lines
        .iter()
        .filter(|(_, args)| {
            args.first().is_some_and(|p| p.ends_with("cocktail-master"))
                && flag(args, "--port") == Some(&port)
        })
        .map(|(pid, _)| *pid)
        .collect();
    let mut found: Vec<(String, i32)> = lines
        .iter()
        .filter_map(|(pid, args)| {
            let program = args.first()?;
            if masters.contains(pid) {
                Some(("master".to_owned(), *pid))
            } else if program.ends_with("cocktail-worker")
                && parent_of(*pid).is_some_and(|p| masters.contains(&p))
            {
                Some((format!("worker {}", flag(args, "--model")?), *pid))
            } else {
                None
            }
        })
        .collect();
    found.sort();
    found
}

async fn wait_ready(url: &str, models: usize, limit: Duration) -> anyhow::Result<()> {
    let client = admin_client()?;
    let deadline = Instant::now() + limit;
    loop {
        let listed: serde_json::Value = match client.get(format!("{url}/v1/workers")).send().await {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        let ready = listed["workers"]
            .as_array()
            .map_or(0, |ws| ws.iter().filter(|w| w["down"] == false).count());
        if ready >= models {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {ready} of {models} workers registered within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn load(url: &str, task: &str, rate: f64, seconds: usize) -> anyhow::Result<LoadReport> {
    let zoo = Zoo::load(Zoo::locate(None)?)?;
    loadgen::run_zoo(
        &zoo,
        &LoadgenConfig {
            admin_token: Some(secrets()?.admin.clone()),
            ..LoadgenConfig::steady(url, task, rate, seconds, Mix::Strict, 1)
        },
    )
    .await
}

fn growth(start: u64, end: u64) -> f64 {
    (end as f64 - start as f64) / (start as f64).max(1.0) * 100.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let zoo = Zoo::load(Zoo::locate(None)?)?;
    let models = zoo.models().len();
    let url = format!("http://127.0.0.1:{}", args.port);
    eprintln!(
        "starting `cocktail up --port {}` ({models} workers)",
        args.port
    );
    let mut up = Command::new(sibling("cocktail")?)
        .args(["up", "--port", &args.port.to_string()])
        .envs(secrets()?.env())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting cocktail up")?;
    wait_ready(&url, models, Duration::from_secs(300)).await?;
    let measured = (args.minutes * 60.0).round() as usize;
    let seconds = args.warmup_s as usize + measured;
    let fashion = tokio::spawn({
        let url = url.clone();
        async move { load(&url, "fashion", args.rate, seconds).await }
    });
    let sentiment = tokio::spawn({
        let url = url.clone();
        async move { load(&url, "sentiment", args.rate / 4.0, seconds).await }
    });
    let bar = ProgressBar::new(seconds as u64).with_style(
        ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} s ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message("warm-up");
    let started = Instant::now();
    let tick = |bar: &ProgressBar| bar.set_position(started.elapsed().as_secs());
    while started.elapsed() < Duration::from_secs(args.warmup_s) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        tick(&bar);
    }
    let procs = processes(args.port);
    if procs.is_empty() {
        bail!("found no master or worker of port {}", args.port);
    }
    let first: Vec<Option<Sample>> = procs.iter().map(|(_, pid)| sample(*pid)).collect();
    let master_pid = procs
        .iter()
        .find(|(name, _)| name == "master")
        .map(|(_, pid)| *pid)
        .context("the master's process")?;
    bar.set_message("soak");
    // The master every minute: whether its memory and descriptors level off.
    let mut series: Vec<(u64, Sample)> = Vec::new();
    let mut next_sample = Duration::from_secs(args.warmup_s);
    while started.elapsed() < Duration::from_secs(seconds as u64) {
        if started.elapsed() >= next_sample {
            if let Some(s) = sample(master_pid) {
                series.push((started.elapsed().as_secs(), s));
            }
            next_sample += Duration::from_secs(60);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        tick(&bar);
    }
    let kinds = fd_kinds(master_pid);
    let last: Vec<Option<Sample>> = procs.iter().map(|(_, pid)| sample(*pid)).collect();
    bar.finish_with_message("done");
    let fashion = fashion.await??;
    let sentiment = sentiment.await??;

    let mut table = format!(
        "`cocktail up` on its defaults ({models} workers), {:.0} min of open-loop load after a \
         {} s warm-up: fashion {:.0} req/s and sentiment {:.0} req/s (Strict mix). Resident \
         memory (VmRSS) and open file descriptors after the warm-up and at the end \
         (`target/release/soak-bench --minutes {} --out docs`).\n\n\
         | process | RSS start (MiB) | RSS end (MiB) | growth | fds start | fds end |\n\
         |---|---:|---:|---:|---:|---:|\n",
        args.minutes,
        args.warmup_s,
        args.rate,
        args.rate / 4.0,
        args.minutes
    );
    let (mut worst, mut fd_growth, mut worker_start, mut worker_end) = (f64::MIN, 0_i64, 0, 0);
    for ((name, _), (a, b)) in procs.iter().zip(first.iter().zip(&last)) {
        let (Some(a), Some(b)) = (a, b) else {
            writeln!(table, "| {name} | gone | | | | |")?;
            continue;
        };
        let g = growth(a.rss_kib, b.rss_kib);
        worst = worst.max(g);
        fd_growth = fd_growth.max(b.fds as i64 - a.fds as i64);
        if name.starts_with("worker") {
            worker_start += a.rss_kib;
            worker_end += b.rss_kib;
        }
        writeln!(
            table,
            "| {name} | {:.1} | {:.1} | {g:+.1} % | {} | {} |",
            a.rss_kib as f64 / 1024.0,
            b.rss_kib as f64 / 1024.0,
            a.fds,
            b.fds
        )?;
    }
    writeln!(
        table,
        "| all workers | {:.1} | {:.1} | {:+.1} % | | |",
        worker_start as f64 / 1024.0,
        worker_end as f64 / 1024.0,
        growth(worker_start, worker_end)
    )?;
    let failed = |r: &LoadReport| r.errors.values().sum::<u64>() + r.dropped;
    writeln!(
        table,
        "\nLargest RSS growth of one process {worst:+.1} % (goal < 10 %), largest fd growth \
         {fd_growth:+} (goal 0). Requests: fashion {} sent, {} failed {:?}; sentiment {} sent, \
         {} failed {:?} (status: count).\n\nThe master minute by minute (s: RSS MiB / fds): {}. \
         Its descriptors at the end by kind: {kinds:?}.",
        fashion.sent,
        failed(&fashion),
        fashion.errors,
        sentiment.sent,
        failed(&sentiment),
        sentiment.errors,
        series
            .iter()
            .map(|(t, s)| format!("{t}: {:.1} / {}", s.rss_kib as f64 / 1024.0, s.fds))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    println!("{table}");
    if let Some(out) = &args.out {
        let path = measured::write(out, "soak.md", "", &table)?;
        eprintln!("wrote {}", path.display());
    }
    // `cocktail up` stops its master, which stops the workers.
    cocktail_process::stop(&mut up, Duration::from_secs(60)).await?;
    Ok(())
}
