//! `cocktail-master --port P`: serves constraint-aware ensembles over OIP v2; workers
//! register with it (`cocktail-worker --master URL`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cocktail_master::selection::SelectionConfig;
use cocktail_master::voting::Scheme;
use cocktail_master::{Interval, MasterConfig};
use tracing_subscriber::EnvFilter;

/// Serve ensembles of the zoo's models under latency and accuracy constraints.
#[derive(Debug, Parser)]
#[command(name = "cocktail-master", version)]
struct Args {
    /// Address to bind.
    #[arg(long, env = "COCKTAIL_HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to bind; 0 picks a free one (printed at start).
    #[arg(long, env = "COCKTAIL_PORT", default_value_t = 8080)]
    port: u16,
    /// The zoo manifest (default: models/zoo.toml in this folder or a parent).
    #[arg(long, env = "COCKTAIL_ZOO")]
    zoo: Option<PathBuf>,
    /// Redis for the shared model cache, e.g. redis://127.0.0.1:6379; without it the
    /// cache lives in this process.
    #[arg(long, env = "COCKTAIL_REDIS_URL")]
    redis_url: Option<String>,
    /// Seconds a cached selection lives without use.
    #[arg(long, env = "COCKTAIL_CACHE_TTL_S", default_value_t = 3600)]
    cache_ttl_s: u64,
    /// Milliseconds a Redis call may take before it counts as a miss.
    #[arg(long, env = "COCKTAIL_REDIS_TIMEOUT_MS", default_value_t = 20)]
    redis_timeout_ms: u64,
    /// O2 interval in seconds.
    #[arg(long, env = "COCKTAIL_INTERVAL_S", default_value_t = 30.0)]
    interval_s: f64,
    /// O2 interval in requests per constraint instead of seconds.
    #[arg(long, env = "COCKTAIL_INTERVAL_REQUESTS")]
    interval_requests: Option<u64>,
    /// Milliseconds added to the profiled latency when choosing candidates.
    #[arg(long, env = "COCKTAIL_LATENCY_MARGIN_MS", default_value_t = 5.0)]
    latency_margin_ms: f64,
    /// How far above the target window accuracy must be before O2 prunes.
    #[arg(long, env = "COCKTAIL_ACCURACY_MARGIN", default_value_t = 0.002)]
    accuracy_margin: f64,
    /// Voting scheme: weighted (Cocktail), majority, or average (Clipper).
    #[arg(long, env = "COCKTAIL_SCHEME", default_value = "weighted")]
    scheme: String,
    /// Milliseconds added to the latency target to form each member's deadline.
    #[arg(long, env = "COCKTAIL_DEADLINE_GRACE_MS", default_value_t = 20)]
    deadline_grace_ms: u64,
    /// Expected worker heartbeat period in milliseconds.
    #[arg(long, env = "COCKTAIL_HEARTBEAT_MS", default_value_t = 1000)]
    heartbeat_ms: u64,
    /// Every n-th unlabelled request is pseudo-labelled by all candidates (0: never).
    #[arg(long, env = "COCKTAIL_PSEUDO_LABEL_EVERY", default_value_t = 10)]
    pseudo_label_every: u64,
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
    let scheme = match args.scheme.as_str() {
        "weighted" => Scheme::Weighted,
        "majority" => Scheme::Majority,
        "average" => Scheme::Average,
        other => anyhow::bail!("`--scheme` must be weighted, majority or average; given `{other}`"),
    };
    if !(args.interval_s > 0.0 && args.interval_s.is_finite()) {
        anyhow::bail!("`--interval-s` must be a positive number of seconds");
    }
    if !(args.latency_margin_ms >= 0.0 && args.accuracy_margin >= 0.0) {
        anyhow::bail!("`--latency-margin-ms` and `--accuracy-margin` must not be negative");
    }
    let config = MasterConfig {
        zoo: args.zoo,
        redis_url: args.redis_url,
        cache_ttl: Duration::from_secs(args.cache_ttl_s.max(1)),
        redis_timeout: Duration::from_millis(args.redis_timeout_ms.max(1)),
        interval: match args.interval_requests {
            Some(n) => Interval::Requests(n.max(1)),
            None => Interval::Every(Duration::from_secs_f64(args.interval_s)),
        },
        selection: SelectionConfig {
            latency_margin_ms: args.latency_margin_ms,
            accuracy_margin: args.accuracy_margin,
        },
        scheme,
        deadline_grace: Duration::from_millis(args.deadline_grace_ms),
        heartbeat: Duration::from_millis(args.heartbeat_ms.max(10)),
        http_workers: args.http_workers,
        pseudo_label_every: args.pseudo_label_every,
        ..MasterConfig::default()
    };
    let prometheus = cocktail_master::metrics::install()?;
    let listener = TcpListener::bind((args.host.as_str(), args.port))?;
    let address = listener.local_addr()?;
    // The first stdout line tells scripts and tests where the master listens.
    println!("cocktail-master listening on http://{address}");
    actix_web::rt::System::new().block_on(cocktail_master::server::serve(
        config,
        listener,
        Some(prometheus),
    ))?;
    Ok(())
}
