//! `cocktail-worker --model NAME --port P`: serves one zoo model over OIP v2.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cocktail_common::control::Registration;
use cocktail_service::net::NetArgs;
use cocktail_worker::control::ControlConfig;
use cocktail_worker::server::{Worker, WorkerConfig};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc, as in the master (docs/design.md, "What a member
/// call costs"): the worker's own CPU outside inference, per request, fell 3-12 % with it,
/// for about 20 MiB more memory (PSS at 8 clients: 42-46 MiB against 23-25).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    #[arg(long, env = "COCKTAIL_THREADS", default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    threads: usize,
    /// Largest batch, overriding the value tuned from the profile.
    #[arg(long, env = "COCKTAIL_MAX_BATCH")]
    max_batch: Option<usize>,
    /// Batch wait window in microseconds, overriding the tuned value.
    #[arg(long, env = "COCKTAIL_BATCH_WAIT_US")]
    batch_wait_us: Option<u64>,
    /// Microseconds the idle batch thread spins for the next request before it sleeps:
    /// saves a thread wake-up (tens of µs on a VM) per request at low load, at the price
    /// of a core. Worth it only when the worker has cores to spare; 0 sleeps at once.
    #[arg(long, env = "COCKTAIL_IDLE_POLL_US", default_value_t = 0)]
    idle_poll_us: u64,
    /// Hand every call to the batch thread, even a lone call of a quick model (which by
    /// default runs on the thread that received it): for benchmarks that compare the two.
    #[arg(long, env = "COCKTAIL_NO_INLINE")]
    no_inline: bool,
    /// Response-time target in milliseconds the batching is tuned for.
    #[arg(long, env = "COCKTAIL_RT_MAX_MS")]
    rt_max_ms: Option<f64>,
    /// Items that may queue beyond those in service before requests get 429.
    #[arg(long, env = "COCKTAIL_QUEUE_ITEMS", default_value_t = 64)]
    queue_items: usize,
    /// HTTP worker threads.
    #[arg(long, env = "COCKTAIL_HTTP_WORKERS", default_value_t = 2, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    http_workers: usize,
    /// The master to register with, e.g. http://10.0.0.1:8080; without it the worker
    /// serves on its own.
    #[arg(long, env = "COCKTAIL_MASTER")]
    master: Option<String>,
    /// The URL the master reaches this worker at (default: http://HOST:PORT as bound,
    /// with 127.0.0.1 for a wildcard host).
    #[arg(long, env = "COCKTAIL_ADVERTISE_URL")]
    advertise_url: Option<String>,
    /// This worker's id at the master (default: MODEL@ADVERTISE_URL).
    #[arg(long, env = "COCKTAIL_WORKER_ID")]
    id: Option<String>,
    /// Register as a burst instance: the master sends it only what its pool's regular
    /// instances cannot take at once (MArk's Lambda).
    #[arg(long, env = "COCKTAIL_BURST")]
    burst: bool,
    /// The instance type this worker runs on (a catalog name), told to the master.
    #[arg(long, env = "COCKTAIL_INSTANCE_TYPE")]
    instance_type: Option<String>,
    /// Answer each request no sooner than `--instance-type` would (its items' latency from
    /// the model's profile and the catalog), requests side by side as on an instance's
    /// slots (the local provider's emulated heterogeneous pools).
    #[arg(long, env = "COCKTAIL_EMULATE_TYPE")]
    emulate_type: bool,
    /// With `--emulate-type`: take this many times the type's modelled latency.
    #[arg(long, env = "COCKTAIL_EMULATE_SCALE", default_value_t = 1.0)]
    emulate_scale: f64,
    /// Heartbeat period in milliseconds until the master says otherwise.
    #[arg(long, env = "COCKTAIL_HEARTBEAT_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    heartbeat_ms: u64,
    /// Base URL of the EC2 instance metadata service to poll for spot interruption
    /// notices, e.g. http://169.254.169.254 (off by default).
    #[arg(long, env = "COCKTAIL_IMDS_URL")]
    imds_url: Option<String>,
    /// How often to poll the spot notice, in milliseconds.
    #[arg(long, env = "COCKTAIL_IMDS_POLL_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..))]
    imds_poll_ms: u64,
    /// Serve HTTPS with a certificate from the master (the cluster's CA), asked for at
    /// start for the host of the advertised URL. Needs `--master` and the CA to trust
    /// (`COCKTAIL_CLUSTER_CA` or `--tls-ca`); the master's providers start their workers
    /// so.
    #[arg(long, env = "COCKTAIL_CLUSTER_TLS", conflicts_with = "tls_cert")]
    cluster_tls: bool,
    #[command(flatten)]
    net: NetArgs,
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
    if !(args.emulate_scale >= 1.0 && args.emulate_scale.is_finite()) {
        anyhow::bail!("`--emulate-scale` must be a number of at least 1");
    }
    if args
        .rt_max_ms
        .is_some_and(|ms| !(ms > 0.0 && ms.is_finite()))
    {
        anyhow::bail!("`--rt-max-ms` must be a positive number of milliseconds");
    }
    // The effective configuration; the cluster secret comes from the environment or a
    // file and is not part of it.
    tracing::info!(config = ?args, "starting");
    let mut net = args.net.load()?;
    if args.cluster_tls && (args.master.is_none() || net.roots.is_empty()) {
        anyhow::bail!(
            "`--cluster-tls` needs `--master` and the cluster's CA (`COCKTAIL_CLUSTER_CA` or `--tls-ca`)"
        );
    }
    let config = WorkerConfig {
        model: args.model,
        zoo: args.zoo,
        ort_lib: args.ort_lib,
        threads: args.threads,
        max_batch: args.max_batch,
        batch_wait: args.batch_wait_us.map(Duration::from_micros),
        rt_max: args.rt_max_ms.map(|ms| Duration::from_secs_f64(ms / 1e3)),
        idle_poll: Duration::from_micros(args.idle_poll_us),
        inline: !args.no_inline,
        queue_items: args.queue_items,
        http_workers: args.http_workers,
        instance_type: args.instance_type,
        emulate_type: args.emulate_type,
        emulate_scale: args.emulate_scale,
    };
    let prometheus = cocktail_worker::metrics::install(&config.model)?;
    let worker = Worker::load(&config, Some(prometheus))?;
    let listener = TcpListener::bind((args.host.as_str(), args.port))?;
    let address = listener.local_addr()?;
    // The first stdout line tells scripts and tests where the worker listens.
    let scheme = if args.cluster_tls {
        "https"
    } else {
        net.scheme()
    };
    println!(
        "cocktail-worker serving `{}` on {scheme}://{address}",
        config.model
    );
    let control = args.master.map(|master| {
        let mut reachable = address;
        if reachable.ip().is_unspecified() {
            reachable.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let url = args
            .advertise_url
            .unwrap_or_else(|| format!("{scheme}://{reachable}"));
        let id = args.id.unwrap_or_else(|| format!("{}@{url}", config.model));
        ControlConfig {
            master,
            registration: Registration {
                burst: args.burst,
                ..worker.registration(id, url)
            },
            heartbeat: Duration::from_millis(args.heartbeat_ms),
            imds: args.imds_url,
            imds_poll: Duration::from_millis(args.imds_poll_ms),
        }
    });
    actix_web::rt::System::new().block_on(async move {
        // Inside the runtime: the token's signal watch is a task.
        let shutdown = cocktail_service::shutdown_token();
        if args.cluster_tls
            && let Some(control) = &control
        {
            let tls = cocktail_worker::control::certificate(control, &net).await?;
            net.tls = Some(std::sync::Arc::new(tls));
        }
        worker.serve(listener, control, net, shutdown).await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn the_flags_are_consistent_and_bad_values_are_errors() {
        Args::command().debug_assert();
        for flags in [
            ["--threads", "0"],
            ["--http-workers", "0"],
            ["--heartbeat-ms", "9"],
            ["--imds-poll-ms", "0"],
        ] {
            let error = Args::try_parse_from(
                ["cocktail-worker", "--model", "lenet"]
                    .into_iter()
                    .chain(flags),
            )
            .unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{flags:?}"
            );
        }
    }
}
