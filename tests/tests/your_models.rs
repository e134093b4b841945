//! docs/your-models.md, run as written: from an empty folder whose `models/`, `docs/`,
//! `target/` and `.deps/` are this checkout's, every ```sh block runs through `bash -euo pipefail`, and
//! the ```text block after it must appear in what it printed (stdout and stderr, line by
//! line, in order). `cocktail ... up` runs in the background until its welcome shows,
//! and the blocks after it talk to it. Nothing is changed but the addresses: the
//! documented 127.0.0.1:8080 and :8001 become free ports (`up` gets them as `--port` and
//! `--grpc-port`). The tutorial's `.venv` is the tritonclient venv scripts/test.sh sets up.
//! Commands this test cannot run are listed in [`SKIPPED`] with the reason; the test fails
//! when the document no longer holds one of them.
//!
//! Then, on the zoo the tutorial built and still serving (issue 33's end-to-end check),
//! each sample photo that ships with the ImageNet models is sent with tritonclient, over
//! HTTP with binary data and over gRPC: pinned to each model, the served label is that
//! model's top-1 in the reference framework (models/imagenet/reference, PyTorch and
//! ONNX Runtime in Python); voted by all three, it is one of the photo's right classes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cocktail_tests::cluster::{binary, free_port};
use cocktail_tests::workspace_root;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const DOC: &str = "docs/your-models.md";

/// The documented commands this test does not run, and why.
const SKIPPED: &[(&str, &str)] = &[
    (
        r#"python3 -m venv .venv && .venv/bin/pip install "tritonclient[http,grpc]" numpy pillow"#,
        "installs the client: the test links the venv scripts/test.sh made with the same packages",
    ),
    (
        r#"paste models/imagenet/synsets.txt models/imagenet/labels.txt | while IFS=$'\t' read -r id name; do mv "val/$id" "val/$name"; done"#,
        "needs ImageNet's validation set, which does not ship here",
    ),
    (
        "cocktail --zoo my-zoo/zoo.toml zoo evaluate --task imagenet --data val",
        "as above",
    ),
];

/// A fenced ```sh block and the ```text block shown after it, if any.
#[derive(Debug)]
struct Step {
    /// Its logical lines (continuations joined), skipped ones removed.
    commands: Vec<String>,
    shown: Option<String>,
}

/// Joins `\`-continued lines.
fn logical_lines(block: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    lines
}

/// The document's steps and the skipped commands it holds.
fn steps(markdown: &str) -> (Vec<Step>, Vec<String>) {
    let mut steps: Vec<Step> = Vec::new();
    let mut skipped = Vec::new();
    let mut fence: Option<(String, String)> = None;
    for line in markdown.lines() {
        match &mut fence {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    fence = Some((info.trim().to_owned(), String::new()));
                }
            }
            Some((info, body)) if line.starts_with("```") => {
                match info.as_str() {
                    "sh" => {
                        let mut commands = Vec::new();
                        for command in logical_lines(body) {
                            let squeezed = command.split_whitespace().collect::<Vec<_>>().join(" ");
                            if SKIPPED.iter().any(|(c, _)| *c == squeezed) {
                                skipped.push(squeezed);
                            } else if !command.trim().is_empty() {
                                commands.push(command);
                            }
                        }
                        if !commands.is_empty() {
                            steps.push(Step {
                                commands,
                                shown: None,
                            });
                        }
                    }
                    "text" => {
                        let step = steps.last_mut().expect("a ```text block follows a command");
                        assert!(step.shown.is_none(), "two ```text blocks after {step:?}");
                        step.shown = Some(body.clone());
                    }
                    _ => {}
                }
                fence = None;
            }
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    (steps, skipped)
}

/// Whether every non-empty line of `shown` is a line of `printed`, in order.
fn missing_lines(shown: &str, printed: &str) -> Vec<String> {
    let mut printed = printed.lines().map(str::trim_end);
    shown
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .filter(|want| !printed.any(|got| got == *want))
        .map(str::to_owned)
        .collect()
}

/// The folder the tutorial runs in, and the addresses it swaps.
struct Place {
    dir: PathBuf,
    http: u16,
    grpc: u16,
    /// `target/debug` first, as the tutorial's `export PATH=...` sets it for the
    /// commands after it (each block runs in a shell of its own).
    path: String,
}

impl Place {
    /// `None` when the client's venv is missing and COCKTAIL_ALLOW_SKIP=1.
    fn new() -> Option<Self> {
        let venv = tritonclient_venv()?;
        let dir = std::env::temp_dir().join(format!("cocktail-your-models-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let root = workspace_root();
        let link = |from: &Path, to: &str| std::os::unix::fs::symlink(from, dir.join(to)).unwrap();
        link(&root.join("models"), "models");
        link(&root.join("docs"), "docs");
        // ONNX Runtime, which the binaries find in `.deps/` above their folder, as in a checkout.
        link(&root.join(".deps"), ".deps");
        // `target/debug/` holds the binaries this test runs, wherever cargo put them.
        let debug = binary("cocktail").parent().unwrap().to_path_buf();
        std::fs::create_dir_all(dir.join("target")).unwrap();
        std::os::unix::fs::symlink(&debug, dir.join("target/debug")).unwrap();
        link(&venv, ".venv");
        Some(Self {
            dir,
            http: free_port(),
            grpc: free_port(),
            path: format!(
                "{}:{}",
                debug.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        })
    }

    fn localize(&self, text: &str) -> String {
        text.replace("127.0.0.1:8080", &format!("127.0.0.1:{}", self.http))
            .replace("127.0.0.1:8001", &format!("127.0.0.1:{}", self.grpc))
    }

    fn bash(&self, script: &str) -> Command {
        let mut command = Command::new("bash");
        command
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            // As a newcomer's: `up` makes its secrets in `.cocktail/` here.
            .env_remove("COCKTAIL_ADMIN_TOKEN")
            .env_remove("COCKTAIL_CLUSTER_SECRET")
            .env_remove("COCKTAIL_SECRETS_DIR")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null());
        command
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The venv `scripts/test.sh` makes with tritonclient, numpy and Pillow.
fn tritonclient_venv() -> Option<PathBuf> {
    let python = std::env::var_os("COCKTAIL_TRITONCLIENT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/tritonclient/bin/python"));
    let venv = python.parent()?.parent()?.to_path_buf();
    cocktail_tests::required(
        python.is_file().then_some(venv),
        "tritonclient's venv",
        "scripts/test.sh (scripts/lib.sh setup_tritonclient)",
    )
}

/// `cocktail up`, in the background, stopped with SIGTERM (it stops its workers).
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        cocktail_process::stop_blocking(&mut self.0, Duration::from_secs(90));
    }
}

/// Starts the `up` command and waits until it printed every line `shown` holds.
async fn start_up(place: &Place, command: &str, shown: &str) -> Up {
    let script = format!(
        "exec {} --port {} --grpc-port {}",
        command, place.http, place.grpc
    );
    let mut child = place
        .bash(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let shown = place.localize(shown);
    let mut printed = String::new();
    let started = Instant::now();
    // `cocktail up` waits up to 300 s for its workers by default.
    let ready = tokio::time::timeout(Duration::from_secs(330), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push_str(&line);
            printed.push('\n');
            if missing_lines(&shown, &printed).is_empty() {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        ready == Ok(true),
        "`{command}` did not print what the tutorial shows; missing {:?}; printed:\n{printed}",
        missing_lines(&shown, &printed)
    );
    eprintln!(
        "`{command}` ready after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Keep reading its stdout so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Up(child)
}

/// Runs one step's commands as one script; returns what it printed.
async fn run(place: &Place, commands: &[String]) -> String {
    let script = place.localize(&commands.join("\n"));
    // stderr into stdout, so that their lines keep the order they were printed in.
    let output = place
        .bash(&format!("exec 2>&1\n{script}"))
        .output()
        .await
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the tutorial's\n{script}\nfailed ({}):\n{printed}",
        output.status
    );
    printed
}

/// `classify.py`'s answer over each protocol: `(protocol, label, models)`.
///
/// The latency target is 30 s: these calls check labels and voters, and a debug
/// worker on a CI machine busy with other tests once took over the tutorial's 1 s to
/// decode and resize the largest photo (DEADLINE_EXCEEDED from all three members).
async fn classify(place: &Place, image: &str, extra: &[&str]) -> Vec<(String, String, String)> {
    let script = format!(
        ".venv/bin/python docs/examples/classify.py imagenet {image} --http 127.0.0.1:{} --grpc 127.0.0.1:{} --latency-ms 30000 {}",
        place.http,
        place.grpc,
        extra.join(" ")
    );
    let printed = run(place, &[script]).await;
    printed
        .lines()
        .filter_map(|line| {
            let (protocol, rest) = line.split_once(": ")?;
            let (label, models) = rest.rsplit_once(" (")?;
            Some((
                protocol.to_owned(),
                label.to_owned(),
                models.trim_end_matches(')').to_owned(),
            ))
        })
        .collect()
}

/// Each sample photo: its file and the class ids accepted as right (models/imagenet/samples.tsv).
fn samples() -> Vec<(String, Vec<usize>)> {
    let text =
        std::fs::read_to_string(workspace_root().join("models/imagenet/samples.tsv")).unwrap();
    text.lines()
        .skip(1)
        .map(|row| {
            let fields: Vec<&str> = row.split('\t').collect();
            let accepted = fields[4].split(',').map(|c| c.parse().unwrap()).collect();
            (fields[0].to_owned(), accepted)
        })
        .collect()
}

/// The reference framework's int8 top-1 class for `model` on `sample`.
fn reference_top1(model: &str, sample: &str) -> usize {
    let stem = sample.trim_end_matches(".jpg");
    let path = workspace_root().join(format!("models/imagenet/reference/{model}__{stem}.json"));
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    reference["int8_top5"][0][0].as_u64().unwrap() as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tutorial_runs_as_written_and_serves_the_imagenet_zoo() {
    let markdown = std::fs::read_to_string(workspace_root().join(DOC)).unwrap();
    let (steps, skipped) = steps(&markdown);
    let listed: Vec<String> = SKIPPED.iter().map(|(c, _)| (*c).to_owned()).collect();
    assert_eq!(
        skipped, listed,
        "{DOC} no longer holds every command SKIPPED lists"
    );

    let Some(place) = Place::new() else {
        return;
    };
    let mut up = None;
    for step in &steps {
        let is_up = step
            .commands
            .iter()
            .any(|c| c.starts_with("cocktail ") && c.trim_end().ends_with(" up"));
        if is_up {
            assert_eq!(
                step.commands.len(),
                1,
                "`up` has a block of its own: {step:?}"
            );
            let shown = step
                .shown
                .as_deref()
                .expect("the tutorial shows what `up` prints");
            up = Some(start_up(&place, &step.commands[0], shown).await);
            continue;
        }
        let started = Instant::now();
        let printed = run(&place, &step.commands).await;
        eprintln!(
            "ran {:?} in {:.1} s",
            step.commands.first(),
            started.elapsed().as_secs_f64()
        );
        if let Some(shown) = &step.shown {
            let missing = missing_lines(&place.localize(shown), &printed);
            assert!(
                missing.is_empty(),
                "{:?} did not print, in order, {missing:?}; it printed:\n{printed}",
                step.commands
            );
        }
    }
    assert!(up.is_some(), "the tutorial starts `cocktail up`");

    // Every sample photo, pinned to each model and voted by all three.
    let labels: Vec<String> =
        std::fs::read_to_string(workspace_root().join("models/imagenet/labels.txt"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
    let models = [
        "efficientnet_lite0",
        "efficientnet_lite1",
        "efficientnet_lite2",
    ];
    let mut wrong = Vec::new();
    for (sample, accepted) in samples() {
        let image = format!("models/imagenet/samples/{sample}");
        for model in models {
            let want = &labels[reference_top1(model, &sample)];
            let answers = classify(&place, &image, &["--models", model]).await;
            assert_eq!(answers.len(), 2, "{answers:?}");
            for (protocol, label, voters) in answers {
                if &label != want || voters != model {
                    wrong.push(format!(
                        "{sample} pinned to {model} over {protocol}: {label} by {voters}, the reference says {want}"
                    ));
                }
            }
        }
        let answers = classify(&place, &image, &["--accuracy", "0.8"]).await;
        assert_eq!(answers.len(), 2, "{answers:?}");
        for (protocol, label, voters) in answers {
            let right = accepted.iter().any(|&c| labels[c] == label);
            eprintln!("{sample} over {protocol}: {label} by {voters}");
            if !right || voters.split(", ").count() != 3 {
                wrong.push(format!(
                    "{sample} at 80 % over {protocol}: {label} by {voters}; right would be one of {:?}",
                    accepted.iter().map(|&c| &labels[c]).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn steps_join_continuations_and_attach_shown_output() {
    let markdown = "x\n```sh\na \\\n  b\n\nc\n```\nprose\n```text\nout\n```\n```python\nno\n```\n";
    let (steps, skipped) = steps(markdown);
    assert!(skipped.is_empty());
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].commands, ["a   b", "c"]);
    assert_eq!(steps[0].shown.as_deref(), Some("out\n"));
    assert_eq!(missing_lines("a\n\nc\n", "a\nb\nc"), Vec::<String>::new());
    assert_eq!(missing_lines("c\na\n", "a\nb\nc"), ["a"]);
}
