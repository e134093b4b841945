//! Real processes for black-box tests: Redis, a master and workers that register with
//! it, each on a free port and killed when dropped.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test harness: it fails the test, with the reason, when a process misbehaves"
)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

pub use cocktail_process::Signal;
use cocktail_process::Started;

use crate::workspace_root;

/// A binary of this workspace, built by `cargo build --workspace --bins` (scripts/test.sh
/// does that before `cargo test`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The admin token and cluster secret of every master and worker the tests start (in
/// their environment, as `cocktail up` and the providers pass them).
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdef";
pub const CLUSTER_SECRET: &str = "test-cluster-secret-0123456789abcdef";

/// Master flags for tests that count the calls their requests make: no pseudo-labelling
/// calls. Deadlines are the defaults a user gets (no grace; a late answer rather than none).
pub const NO_PSEUDO_LABELS: &[&str] = &["--pseudo-label-every", "0"];

/// A client that presents the tests' admin token on every request.
pub fn admin_client() -> reqwest::Client {
    bearer_client(ADMIN_TOKEN)
}

/// A client that presents `token` as its bearer token on every request.
pub fn bearer_client(token: &str) -> reqwest::Client {
    let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
    reqwest::Client::builder()
        .default_headers(reqwest::header::HeaderMap::from_iter([(
            reqwest::header::AUTHORIZATION,
            value,
        )]))
        .build()
        .unwrap()
}

/// A running process; killed when dropped.
#[derive(Debug)]
pub struct Process {
    pub child: Child,
    /// The URL from the first line the process printed.
    pub url: String,
}

impl Process {
    /// Starts a Cocktail binary that prints `... http://ADDR` as its first stdout line,
    /// with the tests' admin token and cluster secret.
    pub async fn start(name: &str, args: &[String]) -> Self {
        Self::start_env(name, args, &[]).await
    }

    /// [`Process::start`] with environment variables set (`Some`) or removed (`None`)
    /// after the tests' secrets.
    pub async fn start_env(name: &str, args: &[String], env: &[(&str, Option<&str>)]) -> Self {
        let mut command = Command::new(binary(name));
        command
            .args(args)
            .current_dir(workspace_root())
            .env("COCKTAIL_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("COCKTAIL_CLUSTER_SECRET", CLUSTER_SECRET);
        for (key, value) in env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stderr(Stdio::inherit());
        let Started { child, url } =
            cocktail_process::start(name, command, Duration::from_secs(60))
                .await
                .unwrap();
        Self { child, url }
    }

    /// SIGKILL: a crash, no goodbye.
    pub async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }

    /// SIGTERM, then waits for the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        cocktail_process::signal(&self.child, Signal::SIGTERM).unwrap();
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("exits within 30 s of SIGTERM")
            .unwrap()
    }
}

impl Drop for Process {
    /// SIGTERM first, so a master stops the workers it launched itself; SIGKILL if it has
    /// not exited within 10 s.
    fn drop(&mut self) {
        cocktail_process::stop_blocking(&mut self.child, Duration::from_secs(10));
    }
}

/// Polls `check` every 50 ms until it holds; fails the test after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a test server (`binary args`, output discarded) and waits until it accepts
/// connections on `port`; it is killed when dropped.
pub async fn start_server(binary: &std::path::Path, args: &[String], port: u16) -> Child {
    let child = Command::new(binary)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/test.sh installs it)", binary.display()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "{} did not listen",
            binary.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child
}

/// The moto EC2 server (`moto[server,ec2]`, installed by scripts/test.sh) on a free
/// loopback port; killed when dropped.
#[derive(Debug)]
pub struct Moto {
    _child: Child,
    pub url: String,
}

impl Moto {
    /// The `moto_server` of `COCKTAIL_MOTO`, else of `.deps/moto/`.
    pub fn binary() -> PathBuf {
        std::env::var_os("COCKTAIL_MOTO")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".deps/moto/bin/moto_server"))
    }

    pub async fn start() -> Self {
        Self::start_at(&Self::binary()).await
    }

    /// The server of the moto venv at `binary`.
    pub async fn start_at(binary: &std::path::Path) -> Self {
        let port = free_port();
        let args = vec![
            "-H".to_owned(),
            "127.0.0.1".to_owned(),
            "-p".to_owned(),
            port.to_string(),
        ];
        Self {
            _child: start_server(binary, &args, port).await,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// The flags of a master that manages its pools on the local provider, as `cocktail up`
/// starts it (any port, no provisioning delay, one thread per worker), then `extra`.
pub fn managed_master_args(extra: &[&str]) -> Vec<String> {
    [
        "--port",
        "0",
        "--provider",
        "local",
        "--provisioning-delay-ms",
        "0",
        "--max-threads",
        "1",
    ]
    .iter()
    .chain(extra)
    .map(|s| (*s).to_owned())
    .collect()
}

/// A free TCP port on localhost (bound and released; fine for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Debian's `redis-server` on a free port, without persistence.
#[derive(Debug)]
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    pub async fn start() -> Self {
        Self::start_on(free_port()).await
    }

    /// Redis on `port` (to bring one back where it was).
    pub async fn start_on(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .current_dir(std::env::temp_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server is installed (scripts/test.sh installs it)");
        let redis = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while redis.ping().await.is_none() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one inline command and returns the raw reply, `None` when unreachable.
    pub async fn command(&self, line: &str) -> Option<String> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .ok()?;
        stream
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = vec![0_u8; 64 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    async fn ping(&self) -> Option<()> {
        self.command("PING")
            .await
            .filter(|r| r.starts_with("+PONG"))
            .map(|_| ())
    }

    pub async fn stop(&mut self) {
        self.child.kill().await.unwrap();
    }
}

/// A MongoDB-wire server (PyPI secantusdb) on `port`; scripts/test.sh installs it and
/// exports `COCKTAIL_MONGOD`.
#[derive(Debug)]
pub struct Mongo {
    child: Child,
    pub port: u16,
}

impl Mongo {
    /// In memory: its data goes with it.
    pub async fn start(port: u16) -> Self {
        Self::start_with(port, ":memory:", &[]).await
    }

    /// Kept in `dir`, committed to disk on every write, so it survives a SIGKILL.
    pub async fn start_durable(port: u16, dir: &std::path::Path) -> Self {
        Self::start_with(port, &dir.display().to_string(), &["--sync-on-commit"]).await
    }

    async fn start_with(port: u16, storage: &str, extra: &[&str]) -> Self {
        let binary = std::env::var_os("COCKTAIL_MONGOD")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".deps/secantusdb/bin/secantusd-py"));
        let port_arg = port.to_string();
        let args: Vec<String> = [
            "--host",
            "127.0.0.1",
            "--port",
            &port_arg,
            "--storage-path",
            storage,
        ]
        .iter()
        .chain(extra)
        .map(|s| (*s).to_owned())
        .collect();
        let child = start_server(&binary, &args, port).await;
        Self { child, port }
    }

    /// SIGKILL: the server is gone at once.
    pub async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }

    pub fn url(&self) -> String {
        format!("mongodb://127.0.0.1:{}", self.port)
    }
}

/// A master with workers registered through the control plane.
#[derive(Debug)]
pub struct Cluster {
    pub master: Process,
    pub workers: Vec<(String, Process)>,
    pub client: reqwest::Client,
}

impl Cluster {
    /// Starts a master with `master_args` and one worker per model, and waits until the
    /// master lists every worker.
    pub async fn start(master_args: &[&str], models: &[&str]) -> Self {
        let mut args: Vec<String> = vec![
            "--port".into(),
            "0".into(),
            "--heartbeat-ms".into(),
            "200".into(),
        ];
        args.extend(master_args.iter().map(|s| (*s).to_owned()));
        let master = Process::start("cocktail-master", &args).await;
        let mut cluster = Self {
            master,
            workers: Vec::new(),
            client: admin_client(),
        };
        for model in models {
            cluster.add_worker(model).await;
        }
        cluster
    }

    /// Starts a worker for `model` and waits until the master lists it.
    pub async fn add_worker(&mut self, model: &str) {
        self.add_worker_at(model, 0, None).await;
    }

    /// Starts a worker for `model` listening on `port` (0: any) and registering
    /// `advertise` as its URL (None: the one it listens on), and waits until the master
    /// lists it.
    pub async fn add_worker_at(&mut self, model: &str, port: u16, advertise: Option<&str>) {
        let port = port.to_string();
        let mut args: Vec<&str> = vec![
            "--model",
            model,
            "--port",
            &port,
            "--master",
            &self.master.url,
            "--heartbeat-ms",
            "200",
        ];
        if let Some(url) = advertise {
            args.extend(["--advertise-url", url]);
        }
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let worker = Process::start("cocktail-worker", &args).await;
        let url = advertise.map_or_else(|| worker.url.clone(), str::to_owned);
        self.workers.push((model.to_owned(), worker));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let listed = self.get("/v1/workers").await["workers"]
                .as_array()
                .is_some_and(|ws| {
                    ws.iter()
                        .any(|w| w["url"] == url.as_str() && w["down"] == false)
                });
            if listed {
                return;
            }
            assert!(Instant::now() < deadline, "worker {model} never registered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.master.url)
    }

    pub async fn get(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The sum of the master's Prometheus samples whose line starts with
    /// `name_and_labels` (`GET /metrics`); 0 when there is none.
    pub async fn metric(&self, name_and_labels: &str) -> f64 {
        let text = self
            .client
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with(name_and_labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |sum, v| sum + v)
    }

    /// POSTs JSON, as a worker to the control plane (`/v1/workers/...`: the cluster
    /// secret) and as an operator elsewhere; returns the status and the JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let mut request = self.client.post(self.url(path)).json(body);
        if path.starts_with("/v1/workers/") {
            request = request.bearer_auth(CLUSTER_SECRET);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// The current ensemble of the constraint key `key`.
    pub async fn members(&self, key: &str) -> Vec<String> {
        let all = self.get("/v1/ensembles").await;
        all["ensembles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == key)
            .map(|e| {
                e["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Sends `signal` (e.g. `SIGKILL`, `SIGSTOP`, `SIGCONT`) to `pid`.
pub fn signal(pid: i32, signal: Signal) {
    cocktail_process::signal_pid(pid, signal).unwrap();
}

/// The workers a master lists: `(id, model)` of each that can take work.
pub async fn serving_workers(client: &reqwest::Client, master_url: &str) -> Vec<(String, String)> {
    let request = client
        .get(format!("{master_url}/v1/workers"))
        .bearer_auth(ADMIN_TOKEN);
    let Ok(response) = request.send().await else {
        return Vec::new();
    };
    let listed: Value = response.json().await.unwrap_or_default();
    listed["workers"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .filter(|w| {
                    w["down"] == false
                        && w["draining"] == false
                        && w["unanswered"].as_u64() < Some(3)
                })
                .map(|w| {
                    (
                        w["id"].as_str().unwrap_or_default().to_owned(),
                        w["model"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON answer to a GET of `url` with the admin token.
pub async fn admin_get(url: &str) -> Value {
    admin_client()
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The newest 1,000 decisions of the master at `master_url`'s resource controller.
pub async fn decisions(master_url: &str) -> Vec<Value> {
    let all = admin_get(&format!("{master_url}/v1/decisions?limit=1000")).await;
    all["decisions"].as_array().cloned().unwrap()
}

/// Waits until the master at `url` has a worker for every one of `models` that can take
/// work.
pub async fn wait_for_models(
    client: &reqwest::Client,
    url: &str,
    models: &[&str],
    limit: Duration,
) {
    eventually("every model has a worker", limit, || async {
        let serving = serving_workers(client, url).await;
        models
            .iter()
            .all(|m| serving.iter().any(|(_, model)| model == m))
    })
    .await;
}

/// Encodes a grey image as PNG, base64 (what a client sends as a BYTES `image`).
pub fn png_base64(width: u32, height: u32, pixels: &[u8]) -> String {
    let image = image::GrayImage::from_raw(width, height, pixels.to_vec()).unwrap();
    let mut png = Vec::new();
    image
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(png)
}

/// An OIP infer body of BYTES images with the constraint parameters.
pub fn image_request(images: &[String], parameters: Value) -> Value {
    json!({
        "inputs": [{ "name": "image", "shape": [images.len()], "datatype": "BYTES", "data": images }],
        "parameters": parameters,
    })
}

/// `task`'s models as `GET /v2/models` lists them (name, predicted response time,
/// measured overhead, ...).
pub async fn task_models(cluster: &Cluster, task: &str) -> Vec<Value> {
    cluster.get("/v2/models").await["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == task)
        .flat_map(|t| t["models"].as_array().unwrap().clone())
        .collect()
}
