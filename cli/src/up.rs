//! `cocktail up`: the whole system on this machine on embedded defaults. It starts the
//! master with its resource controller on the local provider, which launches one worker
//! process per zoo model (each registers with the master); it waits until every worker
//! is ready, prints the URL and example requests, and on Ctrl-C (or SIGTERM) stops the
//! master, which terminates its workers (they drain and deregister).
//!
//! With `--config FILE` the master reads the file (docs/configuration.md): `up`'s flags
//! override it when given, and `up`'s own defaults apply only where it is silent.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::bail;
use cocktail_common::Zoo;
use cocktail_common::auth::{self, ADMIN_TOKEN_FILE, DEFAULT_SECRETS_DIR};
use cocktail_process::Signal;
use cocktail_service::config_file::ConfigFile;
use cocktail_service::shutdown_signal;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::process::{Child, Command};

// The settings below without a clap default are optional so that a `--config` file's
// value applies unless the flag is given; their defaults are these.
const DEFAULT_PORT: u16 = 8080;
const DEFAULT_GRPC_PORT: u16 = 8001;
const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_THREADS: usize = 1;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Port of the master (default 8080).
    #[arg(long)]
    port: Option<u16>,
    /// Port of the master's OIP gRPC endpoint (default 8001).
    #[arg(long)]
    grpc_port: Option<u16>,
    /// Address the master and workers bind (default 127.0.0.1).
    #[arg(long)]
    host: Option<String>,
    /// Only these models (comma-separated); default: every model of the zoo.
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// ONNX Runtime intra-op threads per worker, at most (default 1).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    threads: Option<usize>,
    /// Extra flags for the master, e.g. `--master-arg=--predictor=holt-winters`.
    #[arg(long = "master-arg", allow_hyphen_values = true)]
    master_args: Vec<String>,
    /// Share the model cache through this Redis (default: in the master's memory).
    #[arg(long)]
    redis_url: Option<String>,
    /// Seconds to wait for every worker to be ready.
    #[arg(long, default_value_t = 300)]
    ready_timeout_s: u64,
    /// A configuration file for the master (docs/configuration.md): the flags above
    /// override it when given; `cocktail up`'s defaults (the local provider, one thread
    /// per worker, every model, …) apply where it is silent.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the master's effective configuration (TOML) and exit without starting
    /// anything: saved to a file, `cocktail-master --config FILE` starts the same master.
    #[arg(long)]
    print_config: bool,
}

pub fn run(zoo_path: Option<&Path>, ort_lib: Option<&Path>, args: &UpArgs) -> anyhow::Result<()> {
    let file = args.config.as_deref().map(ConfigFile::load).transpose()?;
    let file = file.as_ref();
    let file_zoo = setting(file, "zoo").and_then(toml::Value::as_str);
    let zoo_given = zoo_path.is_some();
    let zoo_path = Zoo::locate(zoo_path.or(file_zoo.map(Path::new)))?;
    let zoo = Zoo::load(&zoo_path)?;
    // The same file check as `cocktail zoo check`, before any process starts.
    zoo.check_files()?;
    let chosen = if args.models.is_empty() {
        file_list(file, "models")
    } else {
        args.models.clone()
    };
    let models: Vec<String> = if chosen.is_empty() {
        zoo.models().iter().map(|m| m.name.clone()).collect()
    } else {
        for m in &chosen {
            zoo.model(m)?;
        }
        chosen
    };
    let up_settings = UpSettings {
        zoo: (zoo_path.display().to_string(), zoo_given),
        models: models.join(","),
        worker_bin: sibling("cocktail-worker")?.display().to_string(),
    };
    let master_args = master_args(args, &up_settings, file);
    if args.print_config {
        let status = std::process::Command::new(sibling("cocktail-master")?)
            .args(&master_args)
            .arg("--print-config")
            .status()?;
        if !status.success() {
            bail!("cocktail-master --print-config failed ({status})");
        }
        return Ok(());
    }
    let host = args
        .host
        .clone()
        .or_else(|| {
            setting(file, "host")
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| DEFAULT_HOST.to_owned());
    let grpc_port = args
        .grpc_port
        .or_else(|| {
            setting(file, "grpc-port")
                .and_then(toml::Value::as_integer)
                .and_then(|p| u16::try_from(p).ok())
        })
        .unwrap_or(DEFAULT_GRPC_PORT);
    let grpc = format!("{host}:{grpc_port}");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(up(ort_lib, &zoo, &models, &master_args, &grpc, args))
}

/// What `up` works out before it starts the master: the zoo (and whether `--zoo` or
/// COCKTAIL_ZOO named it), the models to serve and the worker binary.
struct UpSettings {
    zoo: (String, bool),
    models: String,
    worker_bin: String,
}

/// The value `key` has in the configuration file, if any.
fn setting<'f>(file: Option<&'f ConfigFile>, key: &str) -> Option<&'f toml::Value> {
    file.and_then(|f| f.get(key))
}

/// A list setting of the file: an array of strings or a comma-separated string.
fn file_list(file: Option<&ConfigFile>, key: &str) -> Vec<String> {
    match setting(file, key) {
        Some(toml::Value::Array(items)) => items
            .iter()
            .filter_map(toml::Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(toml::Value::String(list)) => list
            .split(',')
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The master's flags: `--config FILE`, then each of `up`'s settings that its flag gives
/// or the file leaves unset (the master reads the others from the file), then
/// `--master-arg`s.
fn master_args(args: &UpArgs, up: &UpSettings, file: Option<&ConfigFile>) -> Vec<String> {
    let settings = [
        ("host", args.host.clone(), DEFAULT_HOST.to_owned()),
        (
            "port",
            args.port.map(|p| p.to_string()),
            DEFAULT_PORT.to_string(),
        ),
        (
            "grpc-port",
            args.grpc_port.map(|p| p.to_string()),
            DEFAULT_GRPC_PORT.to_string(),
        ),
        ("zoo", up.zoo.1.then(|| up.zoo.0.clone()), up.zoo.0.clone()),
        ("provider", None, "local".to_owned()),
        ("provisioning-delay-ms", None, "0".to_owned()),
        (
            "max-threads",
            args.threads.map(|t| t.to_string()),
            DEFAULT_THREADS.to_string(),
        ),
        (
            "models",
            (!args.models.is_empty()).then(|| up.models.clone()),
            up.models.clone(),
        ),
        ("worker-bin", None, up.worker_bin.clone()),
    ];
    let mut master_args = Vec::new();
    if let Some(file) = file {
        master_args.extend(["--config".to_owned(), file.path().display().to_string()]);
    }
    for (key, given, default) in settings {
        let value = match given {
            Some(value) => value,
            None if setting(file, key).is_none() => default,
            None => continue,
        };
        master_args.extend([format!("--{key}"), value]);
    }
    if let Some(url) = &args.redis_url {
        master_args.extend(["--redis-url".into(), url.clone()]);
    }
    master_args.extend(args.master_args.iter().cloned());
    master_args
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
    ort_lib: Option<&Path>,
    zoo: &Zoo,
    models: &[String],
    master_args: &[String],
    grpc: &str,
    args: &UpArgs,
) -> anyhow::Result<()> {
    let mut command = Command::new(sibling("cocktail-master")?);
    if let Some(lib) = ort_lib {
        // The workers the master launches find ONNX Runtime through the environment.
        command.env("ORT_DYLIB_PATH", lib);
    }
    let (mut master, url) = Running::start("cocktail-master", command, master_args).await?;
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
    print_welcome(&url, grpc, zoo);

    // A closed terminal (SIGHUP) stops everything too: to the master alone SIGHUP means
    // "re-read the zoo", so without this it would outlive `cocktail up`.
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let stop = async {
        tokio::select! {
            _ = shutdown_signal() => "stopping",
            _ = hangup.recv() => "hang-up",
        }
    };
    tokio::select! {
        why = stop => {
            eprintln!("{why}: the master drains and terminates its workers");
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
    let sample = zoo.root().join(BUNDLED_SAMPLE);
    let examples = if sample.is_file() {
        format!(
            "Classify an image within 50 ms end to end at 90 % accuracy (several fashion models meet it;\n\
             the bundled zoo's best single model reaches 92.8 % and no vote of it a point more: README.md):\n\n  \
             curl -s -F task=fashion -F latency_ms=50 -F accuracy=0.9 -F image=@{} {url}/v1/classify\n\n\
             A sentence, over the Open Inference Protocol v2:\n\n  \
             curl -s {url}/v2/models/sentiment/infer -H 'content-type: application/json' \\\n    \
             -d '{{\"inputs\":[{{\"name\":\"text\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"A wonderful film.\"]}}],\"parameters\":{{\"latency_ms\":50,\"accuracy\":0.8}}}}'\n",
            sample.display()
        )
    } else {
        let all: String = zoo
            .tasks()
            .keys()
            .map(|task| task_example(url, zoo, task))
            .collect();
        format!("{}\n", all.trim_end())
    };
    println!(
        "\nCocktail-rs is serving on {url} (Ctrl-C stops everything).\n\n{examples}\n\
         Standard OIP clients (tritonclient, KServe) work on their defaults: HTTP at {url},\n\
         gRPC at {grpc} (docs/oip.md).\n\n\
         More: {url}/v2/models, {url}/v1/ensembles, {url}/openapi.json, {url}/metrics\n\n\
         The admin API (/v1/workers, /v1/instances, /v1/decisions, /v1/cost, /v1/pools) wants the admin\n\
         token the master keeps in {secrets}/{ADMIN_TOKEN_FILE} (the workers' cluster secret is next to it):\n\n  \
         curl -s -H \"Authorization: Bearer $(cat {secrets}/{ADMIN_TOKEN_FILE})\" {url}/v1/workers\n",
        secrets = DEFAULT_SECRETS_DIR,
    );
}

/// The bundled zoo's sample image, which its welcome's examples send.
const BUNDLED_SAMPLE: &str = "samples/fashion/0000_ankle-boot.png";

/// A request for `task` of any other zoo: at the accuracy of its best model (rounded
/// down to a point), within a second, with a placeholder input.
fn task_example(url: &str, zoo: &Zoo, task: &str) -> String {
    let best = zoo
        .models_for(task)
        .map(|m| m.accuracy)
        .fold(0.0_f64, f64::max);
    let accuracy = (best * 100.0).floor() / 100.0;
    let Some(model) = zoo.models_for(task).next() else {
        return String::new();
    };
    match model.preprocess {
        cocktail_common::Preprocess::Image(_) => format!(
            "Classify an image of `{task}` (JPEG, PNG, WebP or GIF) within 1 s at {:.0} % accuracy:\n\n  \
             curl -s -F task={task} -F latency_ms=1000 -F accuracy={accuracy} -F image=@YOUR_IMAGE.jpg {url}/v1/classify\n\n",
            accuracy * 100.0
        ),
        cocktail_common::Preprocess::Text { .. } => format!(
            "Classify a sentence of `{task}` within 1 s at {:.0} % accuracy, over the Open Inference Protocol v2:\n\n  \
             curl -s {url}/v2/models/{task}/infer -H 'content-type: application/json' \\\n    \
             -d '{{\"inputs\":[{{\"name\":\"text\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"YOUR SENTENCE\"]}}],\"parameters\":{{\"latency_ms\":1000,\"accuracy\":{accuracy}}}}}'\n\n",
            accuracy * 100.0
        ),
        cocktail_common::Preprocess::Tensor => format!(
            "`{task}` takes its model's input tensors as they are: {url}/v2/models/{task} lists them, and docs/oip.md shows a request.\n\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Up {
        #[command(flatten)]
        up: UpArgs,
    }

    fn flags(given: &[&str]) -> UpArgs {
        Up::try_parse_from(std::iter::once("up").chain(given.iter().copied()))
            .unwrap()
            .up
    }

    fn settings() -> UpSettings {
        UpSettings {
            zoo: ("/zoo/zoo.toml".into(), false),
            models: "cnn,gru".into(),
            worker_bin: "/bin/cocktail-worker".into(),
        }
    }

    #[test]
    fn up_s_defaults_apply_where_the_file_is_silent_and_its_flags_override_it() {
        let text = "port = 9000\nmodels = [\"cnn\"]\n[testing]\nprovisioning-delay-ms = 50";
        let file = ConfigFile::parse(Path::new("c.toml"), text).unwrap();
        let args = master_args(&flags(&[]), &settings(), Some(&file));
        assert_eq!(args[..2], ["--config", "c.toml"]);
        for flag in ["--port", "--models", "--provisioning-delay-ms"] {
            assert!(!args.iter().any(|a| a == flag), "{flag} in {args:?}");
        }
        for pair in [
            ["--provider", "local"],
            ["--zoo", "/zoo/zoo.toml"],
            ["--max-threads", "1"],
            ["--grpc-port", "8001"],
            ["--worker-bin", "/bin/cocktail-worker"],
        ] {
            assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
        }
        let given = flags(&[
            "--port",
            "1",
            "--models",
            "cnn,gru",
            "--master-arg=--seed=3",
        ]);
        let args = master_args(&given, &settings(), Some(&file));
        assert!(args.windows(2).any(|w| w == ["--port", "1"]), "{args:?}");
        assert!(
            args.windows(2).any(|w| w == ["--models", "cnn,gru"]),
            "{args:?}"
        );
        assert_eq!(args.last().map(String::as_str), Some("--seed=3"));
        // Without a file, every setting of `up` is a flag, as before.
        let args = master_args(&flags(&[]), &settings(), None);
        assert_eq!(args.len(), 18, "{args:?}");
        assert_eq!(file_list(Some(&file), "models"), ["cnn"]);
    }
}
