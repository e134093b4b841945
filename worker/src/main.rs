//! `cocktail-worker --model NAME --port P`: serves one zoo model over OIP v2.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cocktail_worker::server::{Worker, WorkerConfig};
use tracing_subscriber::EnvFilter;

/// Serve one model of the zoo over the Open Inference Protocol v2.
#[derive(Debug, Parser)]
#[command(name = "cocktail-worker", version)]
struct Args {
    /// The zoo model to serve.
    #[arg(long, env = "COCKTAIL_MODEL")]
    model: String,
    /// Address to bind.
    #[arg(long, env = "COCKTAIL_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to bind; 0 picks a free one (printed at start).
    #[arg(long, env = "COCKTAIL_PORT", default_value_t = 0)]
    port: u16,
    /// The zoo manifest (default: models/zoo.toml in this folder or a parent).
    #[arg(long, env = "COCKTAIL_ZOO")]
    zoo: Option<PathBuf>,
    /// The ONNX Runtime shared library (default: ORT_DYLIB_PATH, then .deps/).
    #[arg(long, env = "COCKTAIL_ORT_LIB")]
    ort_lib: Option<PathBuf>,
    /// ONNX Runtime intra-op threads (emulates the instance size).
    #[arg(long, env = "COCKTAIL_THREADS", default_value_t = 1)]
    threads: usize,
    /// Largest batch, overriding the value tuned from the profile.
    #[arg(long, env = "COCKTAIL_MAX_BATCH")]
    max_batch: Option<usize>,
    /// Batch wait window in microseconds, overriding the tuned value.
    #[arg(long, env = "COCKTAIL_BATCH_WAIT_US")]
    batch_wait_us: Option<u64>,
    /// Response-time target in milliseconds the batching is tuned for.
    #[arg(long, env = "COCKTAIL_RT_MAX_MS")]
    rt_max_ms: Option<f64>,
    /// Items that may queue beyond those in service before requests get 429.
    #[arg(long, env = "COCKTAIL_QUEUE_ITEMS", default_value_t = 64)]
    queue_items: usize,
    /// HTTP worker threads.
    #[arg(long, env = "COCKTAIL_HTTP_WORKERS", default_value_t = 2)]
    http_workers: usize,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    if args
        .rt_max_ms
        .is_some_and(|ms| !(ms > 0.0 && ms.is_finite()))
    {
        anyhow::bail!("`--rt-max-ms` must be a positive number of milliseconds");
    }
    let config = WorkerConfig {
        model: args.model,
        zoo: args.zoo,
        ort_lib: args.ort_lib,
        threads: args.threads.max(1),
        max_batch: args.max_batch,
        batch_wait: args.batch_wait_us.map(Duration::from_micros),
        rt_max: args.rt_max_ms.map(|ms| Duration::from_secs_f64(ms / 1e3)),
        queue_items: args.queue_items,
        http_workers: args.http_workers,
    };
    let prometheus = cocktail_worker::metrics::install(&config.model)?;
    let worker = Worker::load(&config, Some(prometheus))?;
    let listener = TcpListener::bind((args.host.as_str(), args.port))?;
    let address = listener.local_addr()?;
    // The first stdout line tells scripts and tests where the worker listens.
    println!(
        "cocktail-worker serving `{}` on http://{address}",
        config.model
    );
    actix_web::rt::System::new().block_on(worker.serve(listener))?;
    Ok(())
}
