//! `docker compose up` gives the system `cocktail up` gives, plus Redis and MongoDB: the
//! README's example requests, unchanged, answer through the published port, the master's
//! container turns healthy, the selection cache lands in Redis and the controller's
//! decisions in MongoDB; `docker compose down -v` leaves no container, network or volume.
//!
//! It runs the offline images of `docker/compose.ci.yml` (scripts/test.sh builds them with
//! scripts/docker-images.sh; this test builds them itself when one is missing). It is
//! skipped, saying so, only where the `docker` command does not exist.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cocktail_common::Zoo;
use cocktail_tests::cluster::{binary, eventually, free_port, wait_for_models};
use cocktail_tests::{workspace_root, zoo_manifest};
use serde_json::{Value, json};

/// The images docker/compose.ci.yml runs besides the project's.
const SERVICE_IMAGES: [&str; 2] = ["cocktail/redis:ci", "cocktail/mongo-wire:ci"];

/// The project's image: `COCKTAIL_IMAGE` (as scripts/docker-images.sh and the compose files
/// read it), else `cocktail-rs:ci`.
fn project_image() -> String {
    std::env::var("COCKTAIL_IMAGE").unwrap_or_else(|_| "cocktail-rs:ci".to_owned())
}

fn run(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// The command's stdout; fails the test, with its stderr, when it fails.
fn checked(command: &mut Command) -> String {
    let output = run(command);
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn docker(args: &[&str]) -> Command {
    let mut command = Command::new("docker");
    command.args(args);
    command
}

/// Lines of `docker ARGS` output that are not empty.
fn docker_lines(args: &[&str]) -> Vec<String> {
    checked(&mut docker(args))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A compose project on the offline images; `down -v` when dropped (also after a failure).
struct Project {
    name: String,
    port: u16,
    /// `docker compose` (the plugin) or `docker-compose` (v1).
    compose: Vec<&'static str>,
    down: bool,
}

impl Project {
    fn new(port: u16) -> Self {
        let plugin = run(&mut docker(&["compose", "version"])).status.success();
        Self {
            name: format!("cocktail-compose-test-{}", std::process::id()),
            port,
            compose: if plugin {
                vec!["docker", "compose"]
            } else {
                vec!["docker-compose"]
            },
            down: false,
        }
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
            .arg(root.join("docker/compose.ci.yml"))
            .args(args)
            .current_dir(&root)
            .env("COCKTAIL_PORT", self.port.to_string())
            .env("COCKTAIL_IMAGE", project_image())
            .env_remove("COCKTAIL_BIND");
        command
    }

    fn compose(&self, args: &[&str]) -> String {
        checked(&mut self.command(args))
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn down(&mut self) {
        self.down = true;
        self.compose(&["down", "--volumes", "--remove-orphans", "--timeout", "40"]);
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        if !self.down {
            let _ = self
                .command(&["down", "--volumes", "--remove-orphans", "--timeout", "10"])
                .output();
        }
    }
}

/// Builds the offline images with scripts/docker-images.sh unless all exist already.
fn ensure_images() {
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

/// The JSON of the first `200` answer to `request`. Right after start, on a busy host, a
/// request with a sub-millisecond target can fail while the workers' first inferences are
/// slow (502, every member missed its deadline), as it can under `cocktail up`; it is sent
/// again for up to a minute.
async fn answer(what: &str, request: impl Fn() -> reqwest::RequestBuilder) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let response = request().send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        if status == 200 {
            if attempts > 1 {
                eprintln!("{what}: answered on attempt {attempts}");
            }
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {status} after {attempts} attempts: {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_up_serves_the_readme_examples_and_down_leaves_nothing() {
    if Command::new("docker").arg("--version").output().is_err() {
        eprintln!("skipped: the `docker` command is not installed");
        return;
    }
    ensure_images();
    let mut project = Project::new(free_port());
    let client = reqwest::Client::new();

    let started = Instant::now();
    project.compose(&["up", "--detach", "--no-build"]);
    let up = started.elapsed();
    eventually("the master is ready", Duration::from_secs(180), || async {
        client
            .get(project.url("/v2/health/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    let ready = started.elapsed();
    // As `cocktail up`: a worker for every model of the zoo.
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let models: Vec<&str> = zoo.models().iter().map(|m| m.name.as_str()).collect();
    wait_for_models(&client, &project.url(""), &models, Duration::from_secs(180)).await;
    eprintln!(
        "compose up: {:.1} s, master ready: {:.1} s, all {} workers: {:.1} s",
        up.as_secs_f64(),
        ready.as_secs_f64(),
        models.len(),
        started.elapsed().as_secs_f64()
    );

    // The image's HEALTHCHECK (OIP readiness over bash's /dev/tcp) passes.
    let master = project
        .compose(&["ps", "--quiet", "master"])
        .trim()
        .to_owned();
    assert!(!master.is_empty(), "no master container");
    let health_deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = checked(&mut docker(&[
            "inspect",
            "--format",
            "{{.State.Health.Status}}",
            &master,
        ]));
        if status.trim() == "healthy" {
            break;
        }
        assert!(
            Instant::now() < health_deadline,
            "the master's container is `{}`, not healthy",
            status.trim()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The README's image example: multipart upload, 0.05 ms of inference, 93 % accuracy.
    let png =
        std::fs::read(workspace_root().join("models/samples/fashion/0000_ankle-boot.png")).unwrap();
    let image = answer("the image", || {
        let form = reqwest::multipart::Form::new()
            .text("task", "fashion")
            .text("latency_ms", "0.05")
            .text("accuracy", "0.93")
            .part(
                "image",
                reqwest::multipart::Part::bytes(png.clone()).file_name("0000_ankle-boot.png"),
            );
        client.post(project.url("/v1/classify")).multipart(form)
    })
    .await;
    assert_eq!(image["label"], "Ankle boot", "{image}");
    assert!(
        image["models"].as_array().is_some_and(|m| !m.is_empty()),
        "{image}"
    );

    // The README's sentence over OIP v2.
    let sentence = answer("the sentence", || {
        client
            .post(project.url("/v2/models/sentiment/infer"))
            .json(&json!({
                "inputs": [{"name": "text", "shape": [1], "datatype": "BYTES",
                            "data": ["A wonderful film."]}],
                "parameters": {"latency_ms": 0.2, "accuracy": 0.85}
            }))
    })
    .await;
    let label = sentence["outputs"]
        .as_array()
        .and_then(|outputs| outputs.iter().find(|o| o["name"] == "label"))
        .map(|o| o["data"][0].clone());
    assert_eq!(label, Some(json!("positive")), "{sentence}");

    // Redis holds the selections and MongoDB the controller's decisions.
    let keys = project.compose(&["exec", "-T", "redis", "redis-cli", "dbsize"]);
    assert!(
        keys.trim().parse::<u64>().is_ok_and(|n| n > 0),
        "Redis holds no selection: `{keys}`"
    );
    let decisions = project.compose(&[
        "exec",
        "-T",
        "mongo",
        "/opt/secantus/bin/python",
        "-c",
        "import pymongo; print(pymongo.MongoClient('mongodb://127.0.0.1:27017/?directConnection=true')\
         .cocktail.decisions.count_documents({}))",
    ]);
    assert!(
        decisions.trim().parse::<u64>().is_ok_and(|n| n > 0),
        "MongoDB holds no decision: `{decisions}`"
    );

    // Down with volumes leaves nothing of the project behind.
    let label = format!("label=com.docker.compose.project={}", project.name);
    let volumes: Vec<String> = docker_lines(&["ps", "--all", "--quiet", "--filter", &label])
        .iter()
        .flat_map(|id| {
            docker_lines(&[
                "inspect",
                "--format",
                "{{range .Mounts}}{{if .Name}}{{println .Name}}{{end}}{{end}}",
                id,
            ])
        })
        .collect();
    let stopping = Instant::now();
    project.down();
    eprintln!("compose down: {:.1} s", stopping.elapsed().as_secs_f64());
    assert_eq!(
        docker_lines(&["ps", "--all", "--quiet", "--filter", &label]),
        Vec::<String>::new(),
        "containers left"
    );
    assert_eq!(
        docker_lines(&["network", "ls", "--quiet", "--filter", &label]),
        Vec::<String>::new(),
        "networks left"
    );
    let network = format!("name=^{}_default$", project.name);
    assert_eq!(
        docker_lines(&["network", "ls", "--quiet", "--filter", &network]),
        Vec::<String>::new(),
        "the default network is left"
    );
    assert_eq!(
        docker_lines(&["volume", "ls", "--quiet", "--filter", &label]),
        Vec::<String>::new(),
        "volumes left"
    );
    let all_volumes = docker_lines(&["volume", "ls", "--quiet"]);
    for volume in volumes {
        assert!(!all_volumes.contains(&volume), "volume {volume} left");
    }
}
