//! The compose project the tests bring up, and the docker commands they read it with.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

use cocktail_tests::cluster::{binary, free_port};
use cocktail_tests::workspace_root;

/// The port a worker container listens on (the docker provider's).
pub(crate) const WORKER_PORT: u16 = 9000;

/// The images docker/compose.ci.yml runs besides the project's.
const SERVICE_IMAGES: [&str; 3] = [
    "cocktail/redis:ci",
    "cocktail/mongo-wire:ci",
    "cocktail/prometheus:ci",
];

/// The project's image: `COCKTAIL_IMAGE` (as scripts/docker-images.sh and the compose files
/// read it), else `cocktail-rs:ci`.
fn project_image() -> String {
    std::env::var("COCKTAIL_IMAGE").unwrap_or_else(|_| "cocktail-rs:ci".to_owned())
}

pub(crate) fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// The command's stdout; fails the test, with its stderr, when it fails.
pub(crate) fn checked(command: &mut Command) -> String {
    let output = run(command);
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn docker(args: &[&str]) -> Command {
    let mut command = Command::new("docker");
    command.args(args);
    command
}

/// Lines of `docker ARGS` output that are not empty.
pub(crate) fn docker_lines(args: &[&str]) -> Vec<String> {
    checked(&mut docker(args))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A compose project on the offline images; `down -v` when dropped (also after a failure).
pub(crate) struct Project {
    pub(crate) name: String,
    pub(crate) port: u16,
    /// The host port of the master's gRPC endpoint.
    grpc_port: u16,
    /// The host port of Prometheus' UI and HTTP API.
    prometheus_port: u16,
    /// `docker compose` (the plugin) or `docker-compose` (v1).
    compose: Vec<&'static str>,
    /// One more compose file, layered last (a test's own settings).
    overrides: Option<PathBuf>,
    down: bool,
    /// Whether [`Project::down`] left the project's network to Docker's stale endpoint
    /// count (moby/moby#42119), every container gone.
    pub(crate) network_stuck: bool,
}

impl Project {
    pub(crate) fn new(port: u16, test: &str) -> Self {
        let plugin = run(&mut docker(&["compose", "version"])).status.success();
        Self {
            name: format!("cocktail-{test}-{}", std::process::id()),
            port,
            grpc_port: free_port(),
            prometheus_port: free_port(),
            compose: if plugin {
                vec!["docker", "compose"]
            } else {
                vec!["docker-compose"]
            },
            overrides: None,
            down: false,
            network_stuck: false,
        }
    }

    /// Layers `yaml` over the project's compose files.
    pub(crate) fn with_overrides(mut self, yaml: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{}.compose.yml", self.name));
        std::fs::write(&path, yaml).unwrap();
        self.overrides = Some(path);
        self
    }

    /// The worker containers the master launched (by their cluster label), with their
    /// pool: `(name, model)`, stopped ones included.
    pub(crate) fn workers(&self) -> Vec<(String, String)> {
        self.listed(true)
    }

    /// The worker containers running now.
    pub(crate) fn running_workers(&self) -> Vec<(String, String)> {
        self.listed(false)
    }

    /// The `docker ps` filter for the worker containers this project's master launched.
    fn cluster_filter(&self) -> String {
        format!("label=io.cocktail.cluster={}", self.name)
    }

    fn listed(&self, all: bool) -> Vec<(String, String)> {
        let label = self.cluster_filter();
        let format = "{{.Names}} {{.Label \"io.cocktail.pool\"}}";
        let mut args = vec!["ps", "--filter", &label, "--format", format];
        if all {
            args.push("--all");
        }
        docker_lines(&args)
            .into_iter()
            .filter_map(|line| {
                let (name, model) = line.split_once(' ')?;
                Some((name.to_owned(), model.to_owned()))
            })
            .collect()
    }

    fn command(&self, args: &[&str]) -> Command {
        let root = workspace_root();
        let mut command = Command::new(self.compose[0]);
        command
            .args(&self.compose[1..])
            .arg("--project-name")
            .arg(&self.name)
            .arg("--file")
            .arg(root.join("docker-compose.yml"))
            .arg("--file")
            .arg(root.join("docker/compose.ci.yml"));
        if let Some(overrides) = &self.overrides {
            command.arg("--file").arg(overrides);
        }
        command
            .args(args)
            .current_dir(&root)
            .env("COCKTAIL_PORT", self.port.to_string())
            .env("COCKTAIL_GRPC_PORT", self.grpc_port.to_string())
            .env("COCKTAIL_PROMETHEUS_PORT", self.prometheus_port.to_string())
            // The project's network, and the label of the containers its master launches.
            .env("COCKTAIL_NETWORK", &self.name)
            .env("COCKTAIL_IMAGE", project_image())
            // The master's admin token, which the harness presents (else it makes one in
            // its secrets volume).
            .env("COCKTAIL_ADMIN_TOKEN", cocktail_tests::cluster::ADMIN_TOKEN)
            .env_remove("COCKTAIL_BIND");
        command
    }

    pub(crate) fn compose(&self, args: &[&str]) -> String {
        checked(&mut self.command(args))
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Prometheus' HTTP API, published on loopback.
    pub(crate) fn prometheus(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/api/v1{path}", self.prometheus_port)
    }

    /// The worker containers as Prometheus would scrape them (`name:port`).
    pub(crate) fn worker_targets(&self) -> BTreeSet<String> {
        self.workers()
            .into_iter()
            .map(|(name, _)| format!("{name}:{WORKER_PORT}"))
            .collect()
    }

    /// `down -v`; when it fails, the failure names the containers still on the project's
    /// network and the master's worker containers with their states, and the drop
    /// cleans up. When nothing is left but the network itself, Docker still counting an
    /// endpoint on it after every container was removed ("has active endpoints": seen in
    /// three runs of the compose test), the network is removed here instead. If Docker
    /// still refuses after 10 s, the test says so and goes on: every container is gone,
    /// which is what `down` must leave, and the network's name is this process's own.
    /// Once that count stayed wrong for good, with no endpoint left to force off
    /// (`docker network disconnect --force` of each container the network had: "endpoint
    /// not found"), as in moby/moby#42119, where only a restart of the daemon clears it.
    pub(crate) fn down(&mut self) {
        let mut command =
            self.command(&["down", "--volumes", "--remove-orphans", "--timeout", "40"]);
        let output = run(&mut command);
        if !output.status.success() {
            // What is left, read without failing (the network may be gone by now).
            let listed = |args: &[&str]| {
                String::from_utf8_lossy(&run(&mut docker(args)).stdout).into_owned()
            };
            let on_network = listed(&[
                "network",
                "inspect",
                &self.name,
                "--format",
                "{{range .Containers}}{{.Name}} {{end}}",
            ]);
            let label = self.cluster_filter();
            let workers = listed(&[
                "ps",
                "--all",
                "--filter",
                &label,
                "--format",
                "{{.Names}} {{.Status}}",
            ]);
            let only_the_network = on_network.trim().is_empty() && workers.trim().is_empty();
            if !only_the_network {
                panic!(
                    "{command:?} failed ({}):\n{}\nstill on the network: {on_network:?}\n\
                     worker containers: {workers:?}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            self.network_stuck = !self.remove_network();
            if self.network_stuck {
                eprintln!(
                    "Docker counts an endpoint on {} with no container left on it \
                     (moby/moby#42119); the network stays until the daemon restarts",
                    self.name
                );
            }
        }
        self.down = true;
    }

    /// Removes the project's network, trying for 10 s; `true` once it is gone.
    fn remove_network(&self) -> bool {
        for _ in 0..20 {
            if run(&mut docker(&["network", "rm", &self.name]))
                .status
                .success()
            {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        false
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A failed check says what the master was doing before the containers go: its
            // last lines show the controller's steps and the docker provider's calls.
            let logs = self
                .command(&["logs", "--no-color", "--tail", "80", "master"])
                .output();
            match logs {
                Ok(out) => eprintln!(
                    "the master's last log lines:\n{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) => eprintln!("the master's logs could not be read: {e}"),
            }
        }
        if !self.down {
            let _ = self
                .command(&["down", "--volumes", "--remove-orphans", "--timeout", "10"])
                .output();
            // Worker containers a failed master did not stop; they kept the network, so
            // it (and the volumes) go after them.
            let workers = self.workers();
            for (name, _) in &workers {
                let _ = run(&mut docker(&["rm", "--force", name]));
            }
            if !workers.is_empty() {
                let _ = self
                    .command(&["down", "--volumes", "--remove-orphans", "--timeout", "10"])
                    .output();
            }
        }
        if let Some(overrides) = &self.overrides {
            let _ = std::fs::remove_file(overrides);
        }
    }
}

/// Builds the offline images with scripts/docker-images.sh unless all exist already.
pub(crate) fn ensure_images() {
    let project = project_image();
    let missing: Vec<&str> = SERVICE_IMAGES
        .into_iter()
        .chain([project.as_str()])
        .filter(|image| {
            !run(&mut docker(&["image", "inspect", image]))
                .status
                .success()
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    eprintln!("building the missing images {missing:?} with scripts/docker-images.sh");
    let bin_dir: PathBuf = binary("cocktail-master")
        .parent()
        .map(PathBuf::from)
        .unwrap();
    checked(
        Command::new("bash")
            .arg(workspace_root().join("scripts/docker-images.sh"))
            .arg(bin_dir),
    );
}

/// Docker and docker-compose, or the test fails naming the install step.
pub(crate) fn docker_installed() -> bool {
    let runs = |cmd: &str| {
        Command::new(cmd)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    cocktail_tests::required(
        (runs("docker") && runs("docker-compose")).then_some(()),
        "Docker Engine with docker-compose",
        "apt-get install docker.io docker-compose (and a running dockerd)",
    )
    .is_some()
}
