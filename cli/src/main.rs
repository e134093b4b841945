//! `cocktail`: the project's command line. Each subcommand is a thin wrapper over library
//! code; `up` runs the system on this machine, `profile` measures the zoo.

mod keys;
mod loadgen;
mod profile;
mod sim;
mod table;
mod up;
mod zoo;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc, as the master and the workers use it: the
/// simulator behind `cocktail results` and `cocktail sim` allocates small buffers for
/// every simulated request, and perf of `cocktail results` put glibc's malloc, calloc and
/// free at about 14 % of its CPU. With it the release build writes the same page, bit for
/// bit, in 5 min 40 s against 6 min 2 s and 6 min 12 s (2026-12-01, one run against two).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "cocktail",
    version,
    about = "Cocktail-rs: cost-aware ensemble model serving"
)]
struct Cli {
    /// The zoo manifest (default: models/zoo.toml in this folder or a parent).
    #[arg(long, env = "COCKTAIL_ZOO", global = true)]
    zoo: Option<PathBuf>,
    /// The ONNX Runtime shared library (default: ORT_DYLIB_PATH, then .deps/ from scripts/setup.sh).
    #[arg(long, env = "COCKTAIL_ORT_LIB", global = true)]
    ort_lib: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the master and one worker per zoo model on this machine, wait until all are
    /// ready, print the URL and example requests; Ctrl-C stops everything cleanly.
    Up(up::UpArgs),
    /// Measure every model's latency per batch size and thread count with ONNX Runtime on
    /// this machine, derive its packing factor, and rewrite the profile part of the
    /// manifest and the table in models/README.md.
    Profile(profile::ProfileArgs),
    /// Send open-loop load from a trace to a running master: real test items with a mix of
    /// constraints and their labels; prints latency, SLO, accuracy-met and cost figures.
    Loadgen(loadgen::LoadgenArgs),
    /// Run the serving schemes on a trace in the discrete-event simulator (the master's
    /// own policies, the zoo's recorded answers) and print the comparison.
    Sim(sim::SimArgs),
    /// Build and check a zoo: `init` a task from a labels file, `add` ONNX models,
    /// `check` the manifest and its files.
    Zoo(zoo::ZooArgs),
    /// Client API keys for a master with `--api-keys`.
    Keys(keys::KeysArgs),
    /// Run every comparison of docs/results.md in the simulator and write the page, its
    /// tables and its plots.
    Results {
        /// Where results.md, results/ and plots/ go.
        #[arg(long, default_value = "docs")]
        out: PathBuf,
        /// Regenerate one section only, spliced into the existing results.md:
        /// `drift` (issue 34's drift schedules), or `measured` (the live-measured
        /// sections, read again from `OUT/measured/` after a tool rewrote one).
        #[arg(long, value_parser = ["drift", "measured"])]
        only: Option<String>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Profile(args) => profile::run(cli.zoo.as_deref(), cli.ort_lib.as_deref(), &args),
        Command::Loadgen(args) => loadgen::run(cli.zoo.as_deref(), &args),
        Command::Sim(args) => sim::run(cli.zoo.as_deref(), &args),
        Command::Results { out, only } => cocktail_common::Zoo::locate(cli.zoo.as_deref())
            .and_then(cocktail_common::Zoo::load)
            .map_err(anyhow::Error::from)
            .and_then(|zoo| match only.as_deref() {
                Some("measured") => cocktail_benches::results::splice_measured(&out),
                Some(_) => cocktail_benches::results::generate_drift(&zoo, &out),
                None => cocktail_benches::results::generate(&zoo, &out),
            }),
        Command::Keys(args) => keys::run(&args),
        Command::Zoo(args) => zoo::run(cli.zoo.as_deref(), cli.ort_lib.as_deref(), &args),
        Command::Up(args) => up::run(cli.zoo.as_deref(), cli.ort_lib.as_deref(), &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line, the whole cause chain: what failed and why.
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use cocktail_benches::sim::{Autoscaler, Scheme};
    use cocktail_benches::traces::FileFormat;
    use cocktail_benches::workload::Mix;
    use cocktail_policy::predict::Statistical;

    use super::*;

    fn sim(flags: &[&str]) -> Result<sim::SimArgs, clap::Error> {
        let cli = Cli::try_parse_from(["cocktail", "sim"].iter().chain(flags).copied())?;
        match cli.command {
            Command::Sim(args) => Ok(args),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_flags_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sim_takes_todays_spellings() {
        let defaults = sim(&[]).unwrap();
        assert_eq!(defaults.schemes, Scheme::ALL);
        assert_eq!(defaults.autoscaler, None);
        assert_eq!(defaults.predictor, Statistical::Auto);
        assert_eq!(defaults.trace.mix, Mix::Strict);
        assert_eq!(defaults.trace.trace_format, FileFormat::Rates);
        let args = sim(&[
            "--schemes",
            "clipper-x,COCKTAIL,InFaaS",
            "--autoscaler",
            "target-2x",
            "--predictor",
            "holt-winters",
            "--mix",
            "relaxed",
            "--trace",
            "mmpp",
            "--trace-format",
            "timestamps",
        ])
        .unwrap();
        assert_eq!(
            args.schemes,
            [Scheme::ClipperX, Scheme::Cocktail, Scheme::Infaas]
        );
        assert_eq!(args.autoscaler, Some(Autoscaler::TargetTracking));
        assert_eq!(args.predictor, Statistical::HoltWinters);
        assert_eq!(args.trace.mix, Mix::Relaxed);
        assert_eq!(args.trace.trace, "mmpp");
        assert_eq!(args.trace.trace_format, FileFormat::Timestamps);
        let configs = sim::configs(&args, &[1.0]).unwrap();
        assert!(configs.iter().all(|c| {
            c.autoscaler == Autoscaler::TargetTracking
                && c.predictor == Statistical::HoltWinters
                && c.mix == Mix::Relaxed
        }));
    }

    #[test]
    fn bad_choices_are_clap_errors_that_list_the_values() {
        for (flag, value, listed) in [
            ("--schemes", "Clipper,Nope", "Clipper-X"),
            ("--autoscaler", "target", "target-2x"),
            ("--predictor", "learned", "holt-winters"),
            ("--mix", "lax", "relaxed"),
            ("--trace", "azure", "poisson"),
            ("--trace-format", "csv", "timestamps"),
        ] {
            let error = sim(&[flag, value]).unwrap_err();
            assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue, "{flag}");
            assert!(error.to_string().contains(listed), "{flag}: {error}");
        }
    }
}
