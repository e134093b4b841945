//! Predictor accuracy (issue 5; Cocktail Table 4): each load predictor's RMSE, forecasting
//! the request rate 10 intervals (10 minutes at Ts = 1 min) ahead, on each trace. Prints
//! a markdown table; asserts nothing. `learned` is the ONNX MLP of
//! models/predictors/, trained on other seeds of the same generators.
//!
//! `cargo run --release -p cocktail-benches --bin predictor-bench`

use clap::{Parser, ValueEnum as _};
use cocktail_benches::traces;
use cocktail_policy::predict::{self, PredictorKind, rmse};

#[derive(Debug, Parser)]
struct Args {
    /// Intervals per trace (one week of minutes by default).
    #[arg(long, default_value_t = 7 * 1440)]
    len: usize,
    /// Mean rate, requests per second.
    #[arg(long, default_value_t = 50.0)]
    mean: f64,
    /// Interval length in seconds (Ts).
    #[arg(long, default_value_t = 60.0)]
    interval_s: f64,
    /// Forecast horizon in intervals (Tp / Ts).
    #[arg(long, default_value_t = 10)]
    horizon: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Instead of scoring, write training traces (seeds 11-15) as CSV into this folder,
    /// for models/train/predictor.py.
    #[arg(long)]
    dump: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir)?;
        for name in traces::NAMES {
            for seed in 11..=15 {
                let trace = traces::generate(name, args.len, args.mean, args.interval_s, seed)
                    .ok_or_else(|| anyhow::anyhow!("unknown trace {name}"))?;
                let text: String = trace.iter().map(|r| format!("{r}\n")).collect();
                std::fs::write(dir.join(format!("{name}-{seed}.csv")), text)?;
            }
        }
        println!(
            "wrote {} training traces to {}",
            traces::NAMES.len() * 5,
            dir.display()
        );
        return Ok(());
    }
    let season = (86_400.0 / args.interval_s).round().max(1.0) as usize;
    let kinds = PredictorKind::value_variants();
    let names: Vec<String> = kinds.iter().map(ToString::to_string).collect();
    let zoo = cocktail_common::Zoo::load(cocktail_common::Zoo::locate(None)?)?;
    let learned_model = zoo
        .root()
        .join(cocktail_master::resources::learned::MODEL_FILE);
    println!(
        "RMSE (req/s) of forecasts {} intervals ahead; {} intervals of {} s per trace, mean {} req/s\n",
        args.horizon, args.len, args.interval_s, args.mean
    );
    println!("| trace | {} |", names.join(" | "));
    println!(
        "|---|{}|",
        names.iter().map(|_| "---:").collect::<Vec<_>>().join("|")
    );
    for trace_name in traces::NAMES {
        let trace = traces::generate(trace_name, args.len, args.mean, args.interval_s, args.seed)
            .ok_or_else(|| anyhow::anyhow!("unknown trace {trace_name}"))?;
        let row: Vec<String> = kinds
            .iter()
            .map(|&kind| {
                let predictor: Option<Box<dyn predict::Predictor>> =
                    predict::build(kind, season, args.horizon).or_else(|| {
                        cocktail_master::resources::learned::Learned::load(&learned_model, None)
                            .ok()
                            .map(|p| Box::new(p) as Box<dyn predict::Predictor>)
                    });
                predictor.map_or_else(
                    || "-".into(),
                    |mut p| format!("{:.2}", rmse(p.as_mut(), &trace, args.horizon)),
                )
            })
            .collect();
        println!("| {trace_name} | {} |", row.join(" | "));
    }
    Ok(())
}
