//! `cocktail up`: the whole system on this machine on embedded defaults. It starts the
//! master with its resource controller on the local provider, which launches one worker
//! process per zoo model (each registers with the master); it waits until every worker
//! is ready, prints the URL and example requests, and on Ctrl-C (or SIGTERM) stops the
//! master, which terminates its workers (they drain and deregister).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::bail;
use cocktail_common::Zoo;
use cocktail_common::auth::{self, ADMIN_TOKEN_FILE, DEFAULT_SECRETS_DIR};
use cocktail_process::Signal;
use cocktail_service::shutdown_signal;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::process::{Child, Command};

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Port of the master.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Port of the master's OIP gRPC endpoint.
    #[arg(long, default_value_t = 8001)]
    grpc_port: u16,
    /// Address the master and workers bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Only these models (comma-separated); default: every model of the zoo.
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// ONNX Runtime intra-op threads per worker, at most.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    threads: usize,
    /// Extra flags for the master, e.g. `--master-arg=--predictor=holt-winters`.
    #[arg(long = "master-arg", allow_hyphen_values = true)]
    master_args: Vec<String>,
    /// Share the model cache through this Redis (default: in the master's memory).
    #[arg(long)]
    redis_url: Option<String>,
    /// Seconds to wait for every worker to be ready.
    #[arg(long, default_value_t = 300)]
    ready_timeout_s: u64,
}

pub fn run(zoo_path: Option<&Path>, ort_lib: Option<&Path>, args: &UpArgs) -> anyhow::Result<()> {
    let zoo_path = Zoo::locate(zoo_path)?;
    let zoo = Zoo::load(&zoo_path)?;
    // The same file check as `cocktail zoo check`, before any process starts.
    zoo.check_files()?;
    let models: Vec<String> = if args.models.is_empty() {
        zoo.models().iter().map(|m| m.name.clone()).collect()
    } else {
        for m in &args.models {
            zoo.model(m)?;
        }
        args.models.clone()
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(up(&zoo_path, ort_lib, &zoo, &models, args))
}

/// A child process; killed if still running when dropped (after an error).
struct Running {
    name: String,
    child: Child,
}

impl Running {
    async fn start(
        name: &str,
        mut command: Command,
        args: &[String],
    ) -> anyhow::Result<(Self, String)> {
        if std::env::var_os("RUST_LOG").is_none() {
            // Twenty-odd processes share this terminal: only what needs attention.
            command.env("RUST_LOG", "warn");
        }
        command.args(args).stderr(Stdio::inherit());
        let started = cocktail_process::start(name, command, Duration::from_secs(120)).await?;
        Ok((
            Self {
                name: name.to_owned(),
                child: started.child,
            },
            started.url,
        ))
    }

    fn terminate(&self) {
        // An error means it has exited already.
        let _ = cocktail_process::signal(&self.child, Signal::SIGTERM);
    }

    async fn wait(&mut self, limit: Duration) {
        if let Ok(None) = cocktail_process::wait_or_kill(&mut self.child, limit).await {
            tracing::warn!(process = %self.name, "did not stop in time; killed it");
        }
    }
}

/// The `cocktail-master` and `cocktail-worker` binaries next to this one.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --workspace --bins`",
            path.display()
        );
    }
    Ok(path)
}

async fn up(
    zoo_path: &Path,
    ort_lib: Option<&Path>,
    zoo: &Zoo,
    models: &[String],
    args: &UpArgs,
) -> anyhow::Result<()> {
    let mut master_args = vec![
        "--host".into(),
        args.host.clone(),
        "--port".into(),
        args.port.to_string(),
        "--grpc-port".into(),
        args.grpc_port.to_string(),
        "--zoo".into(),
        zoo_path.display().to_string(),
        "--provider".into(),
        "local".into(),
        "--provisioning-delay-ms".into(),
        "0".into(),
        "--max-threads".into(),
        args.threads.to_string(),
        "--models".into(),
        models.join(","),
        "--worker-bin".into(),
        sibling("cocktail-worker")?.display().to_string(),
    ];
    if let Some(url) = &args.redis_url {
        master_args.extend(["--redis-url".into(), url.clone()]);
    }
    master_args.extend(args.master_args.iter().cloned());
    let mut command = Command::new(sibling("cocktail-master")?);
    if let Some(lib) = ort_lib {
        // The workers the master launches find ONNX Runtime through the environment.
        command.env("ORT_DYLIB_PATH", lib);
    }
    let (mut master, url) = Running::start("cocktail-master", command, &master_args).await?;
    let bar = ProgressBar::new(models.len() as u64).with_style(
        ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} workers ready ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message("launching");
    wait_until_registered(
        &url,
        models,
        &bar,
        Duration::from_secs(args.ready_timeout_s),
    )
    .await?;
    bar.finish_with_message("ready");
    print_welcome(&url, &format!("{}:{}", args.host, args.grpc_port), zoo);

    tokio::select! {
        _ = shutdown_signal() => {
            eprintln!("stopping: the master drains and terminates its workers");
            master.terminate();
            master.wait(Duration::from_secs(60)).await;
        }
        status = master.child.wait() => {
            eprintln!("the master exited ({status:?})");
        }
    }
    eprintln!("stopped");
    Ok(())
}

async fn wait_until_registered(
    url: &str,
    models: &[String],
    bar: &ProgressBar,
    limit: Duration,
) -> anyhow::Result<()> {
    // The master made its admin token at start (or took COCKTAIL_ADMIN_TOKEN's).
    let client = reqwest::Client::new();
    let token = auth::admin_token_for_tools();
    let deadline = Instant::now() + limit;
    loop {
        let mut request = client.get(format!("{url}/v1/workers"));
        if let Some(token) = &token {
            request = request.bearer_auth(token.expose());
        }
        let listed: serde_json::Value = match request.send().await {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        let ready = models
            .iter()
            .filter(|m| {
                listed["workers"].as_array().is_some_and(|ws| {
                    ws.iter()
                        .any(|w| w["model"] == m.as_str() && w["down"] == false)
                })
            })
            .count();
        bar.set_position(ready as u64);
        if ready == models.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "only {ready} of {} workers registered within {limit:?}",
                models.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn print_welcome(url: &str, grpc: &str, zoo: &Zoo) {
    let sample = zoo.root().join("samples/fashion/0000_ankle-boot.png");
    println!(
        "\nCocktail-rs is serving on {url} (Ctrl-C stops everything).\n\n\
         Classify an image within 2 ms end to end at 93 % accuracy (an ensemble: no single model is that accurate):\n\n  \
         curl -s -F task=fashion -F latency_ms=2 -F accuracy=0.93 -F image=@{} {url}/v1/classify\n\n\
         A sentence, over the Open Inference Protocol v2:\n\n  \
         curl -s {url}/v2/models/sentiment/infer -H 'content-type: application/json' \\\n    \
         -d '{{\"inputs\":[{{\"name\":\"text\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"A wonderful film.\"]}}],\"parameters\":{{\"latency_ms\":2,\"accuracy\":0.85}}}}'\n\n\
         Standard OIP clients (tritonclient, KServe) work on their defaults: HTTP at {url},\n\
         gRPC at {grpc} (docs/oip.md).\n\n\
         More: {url}/v2/models, {url}/v1/ensembles, {url}/openapi.json, {url}/metrics\n\n\
         The admin API (/v1/workers, /v1/instances, /v1/decisions, /v1/cost, /v1/pools) wants the admin\n\
         token the master keeps in {secrets}/{ADMIN_TOKEN_FILE} (the workers' cluster secret is next to it):\n\n  \
         curl -s -H \"Authorization: Bearer $(cat {secrets}/{ADMIN_TOKEN_FILE})\" {url}/v1/workers\n",
        sample.display(),
        secrets = DEFAULT_SECRETS_DIR,
    );
}
