//! The simulator's speed (issue 6): one hour at 50 req/s for all four schemes (target
//! ≤ 10 s) and 10 million requests (target ≤ 2 minutes), in wall-clock seconds; and a
//! run with thousands of instances. Run the
//! release build: `cargo run --release -p cocktail-benches --bin sim-bench`.

use std::time::Instant;

use clap::Parser;
use cocktail_benches::sim::{self, Scheme, SimConfig, World};
use cocktail_benches::workload::Mix;
use cocktail_benches::{stats, traces};
use cocktail_common::Zoo;

#[derive(Debug, Parser)]
struct Args {
    /// Repetitions of the one-hour case (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    repeat: usize,
    /// Requests of the large case.
    #[arg(long, default_value_t = 10_000_000)]
    requests: u64,
    #[arg(long, default_value = "fashion")]
    task: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let zoo = Zoo::load(Zoo::locate(None)?)?;
    let world = World::load(&zoo, &args.task)?;
    let hour = traces::generate("wiki", 3600, 50.0, 1.0, 1).unwrap_or_default();
    let mut totals = Vec::new();
    let mut requests = 0;
    for _ in 0..args.repeat {
        let started = Instant::now();
        requests = 0;
        for scheme in Scheme::ALL {
            let result = sim::run(
                &world,
                &SimConfig::new(scheme, Mix::Strict, hour.clone(), 1),
                None,
            );
            requests += result.requests;
        }
        totals.push(started.elapsed().as_secs_f64());
    }
    let hour_s = stats::median(&mut totals);
    let rate = args.requests as f64 / 3600.0;
    let big = traces::generate("wiki", 3600, rate, 1.0, 1).unwrap_or_default();
    let started = Instant::now();
    let result = sim::run(
        &world,
        &SimConfig::new(Scheme::Cocktail, Mix::Strict, big, 1),
        None,
    );
    let big_s = started.elapsed().as_secs_f64();
    // Thousands of instances: models 1000x slower (200 ms for resnet), 50,000 req/s,
    // 4-vCPU instances only.
    let heavy = world.with_latency_scale(1000.0);
    let started = Instant::now();
    let mut crowd = SimConfig::new(Scheme::Cocktail, Mix::Strict, vec![50_000.0; 300], 1);
    crowd.instance_types = vec!["c5a.xlarge".into()]; // the smallest type: the most instances
    let crowded = sim::run(&heavy, &crowd, None);
    let crowd_s = started.elapsed().as_secs_f64();
    println!(
        "| case | requests | wall s (median) | target s | share of target | requests/s simulated |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| 1 h at 50 req/s, 4 schemes | {requests} | {hour_s:.2} | 10 | {:.3} | {:.0} |",
        hour_s / 10.0,
        requests as f64 / hour_s
    );
    println!(
        "| 1 h at {rate:.0} req/s, Cocktail | {} | {big_s:.2} | 120 | {:.3} | {:.0} |",
        result.requests,
        big_s / 120.0,
        result.requests as f64 / big_s
    );
    println!(
        "| 5 min at 50000 req/s, 1000x models, c5a.xlarge only, Cocktail ({} instances at most, {} launched) | {} | {crowd_s:.2} | - | - | {:.0} |",
        crowded.vms_max,
        crowded.launches,
        crowded.requests,
        crowded.requests as f64 / crowd_s
    );
    Ok(())
}
