//! Every command of README.md and docs/getting-started.md, and every example request that
//! `cocktail up` prints when it is ready, is run as written on a freshly started `cocktail
//! up` and answers as the documents show, on its first try.
//!
//! The commands are read from the documents' fenced ```sh blocks (and the README's inline
//! `curl ...` spans); the banner's from `cocktail up`'s stdout. A `curl` command is a
//! request: it runs through `bash -c` exactly as printed, only the documented address
//! (127.0.0.1:8080) swapped for this test's port and a shown answer's id for the live
//! answer's (the feedback example names the image answer's id), from a folder where
//! `models/` is this checkout's and `.cocktail/` the master's (as in a checkout). It must
//! answer 200 at once (no retry), with the fields the documents name, the same keys as
//! the JSON they show and the same label (each answer's time and `latency_met` are
//! printed). Any other command is a setup
//! command this test does not run; they are listed in [`SKIPPED`] with the reason, and a
//! command that is neither a request nor listed there fails the test.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cocktail_tests::cluster::{binary, free_port};
use cocktail_tests::workspace_root;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The documents whose commands this test runs.
const DOCS: [&str; 2] = ["README.md", "docs/getting-started.md"];

/// The address the documents send their requests to (`cocktail up`'s default).
const DOC_URL: &str = "http://127.0.0.1:8080";

/// The documented commands this test does not run: `(document, command without its
/// comment, why)`. The test fails when the documents hold another command that is not a
/// request, or no longer hold one of these.
const SKIPPED: &[(&str, &str, &str)] = &[
    (
        "README.md",
        "scripts/up.sh",
        "builds the workspace and starts `cocktail up`: this test starts `cocktail up` itself, \
         from the binaries scripts/test.sh builds",
    ),
    (
        "README.md",
        "scripts/test.sh",
        "runs every check, this test among them",
    ),
    (
        "docs/getting-started.md",
        "scripts/up.sh",
        "as in README.md",
    ),
    (
        "docs/getting-started.md",
        "scripts/test.sh",
        "as in README.md",
    ),
    (
        "docs/getting-started.md",
        "docker compose up -d",
        "tests/tests/compose/ runs `docker compose up --detach` on the offline images of \
         docker/compose.ci.yml (the documented first `up` builds the image from source)",
    ),
    (
        "docs/getting-started.md",
        "docker compose ps",
        "tests/tests/compose/ runs `docker compose ps` for the master's container and waits \
         for its health to turn `healthy`",
    ),
];

/// What each documented endpoint's answer must hold (JSON pointers), whether or not the
/// documents show the answer. A request to a path not listed fails the test.
const FIELDS: &[(&str, &[&str])] = &[
    ("/v1/classify", &["/label", "/models/0", "/latency_met"]),
    (
        "/v2/models/sentiment/infer",
        &[
            "/outputs",
            "/parameters/models/0",
            "/parameters/latency_met",
        ],
    ),
    (
        "/v2/models",
        &[
            "/models/0/models/0/accuracy",
            "/models/0/models/0/predicted_ms",
        ],
    ),
    ("/v1/ensembles", &["/ensembles/0/members/0"]),
    ("/v1/feedback", &["/id", "/items"]),
    ("/v1/workers", &["/workers/0/model"]),
];

/// A command as a document prints it.
#[derive(Debug, Clone)]
struct DocCommand {
    /// Where it is: a document, or `cocktail up`.
    source: String,
    /// As printed, comments and line breaks included.
    text: String,
    /// Without comments, on one line: what it is matched by.
    bare: String,
    /// The answer the document shows right after it.
    shown: Option<Value>,
}

/// Scans shell `text` as bash would split it into words: the text without its comments
/// (one line, whitespace collapsed), and whether the command is complete (no quote left
/// open, no trailing line continuation). Hand-written: the documents' commands need only
/// quotes, backslashes and `#` comments, which no shell-words crate reports both of.
fn scan(text: &str) -> (String, bool) {
    let mut bare = String::new();
    let (mut single, mut double, mut comment, mut escaped) = (false, false, false, false);
    let mut previous = ' ';
    for c in text.chars() {
        if comment {
            if c == '\n' {
                comment = false;
                bare.push(c);
            }
            previous = c;
            continue;
        }
        if escaped {
            escaped = false;
            // A line continuation joins the lines.
            bare.push(if c == '\n' { ' ' } else { c });
            previous = c;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => {
                comment = true;
                previous = c;
                continue;
            }
            _ => {}
        }
        if !escaped {
            bare.push(c);
        }
        previous = c;
    }
    let complete = !single && !double && !escaped;
    (
        bare.split_whitespace().collect::<Vec<_>>().join(" "),
        complete,
    )
}

/// The commands of a markdown document: every command of its ```sh blocks, each with the
/// ```json block that follows its block (if one does, with nothing but blank lines between),
/// and the inline `curl ...` spans of its prose.
fn doc_commands(source: &str, markdown: &str) -> Vec<DocCommand> {
    enum Block {
        Prose,
        Sh,
        Json(String),
        Other,
    }
    let mut commands: Vec<DocCommand> = Vec::new();
    let mut block = Block::Prose;
    let mut pending = String::new();
    // Whether the last thing seen was a ```sh block (blank lines aside).
    let mut after_sh = false;
    for line in markdown.lines() {
        let fence = line.trim_start().strip_prefix("```");
        block = match (block, fence) {
            (Block::Prose, Some("sh")) => Block::Sh,
            (Block::Prose, Some("json")) => Block::Json(String::new()),
            (Block::Prose, Some(_)) => Block::Other,
            (Block::Prose, None) => {
                if !line.trim().is_empty() {
                    after_sh = false;
                }
                let spans = line.split('`').skip(1).step_by(2);
                for span in spans.filter(|span| span.starts_with("curl ")) {
                    let (bare, complete) = scan(span);
                    assert!(complete, "{source}: an incomplete command: `{span}`");
                    commands.push(DocCommand {
                        source: source.to_owned(),
                        text: span.to_owned(),
                        bare,
                        shown: None,
                    });
                }
                Block::Prose
            }
            (Block::Sh, Some(_)) => {
                assert!(
                    pending.trim().is_empty(),
                    "{source}: a command is left open: {pending}"
                );
                pending.clear();
                after_sh = true;
                Block::Prose
            }
            (Block::Sh, None) => {
                if !pending.is_empty() {
                    pending.push('\n');
                }
                pending.push_str(line);
                let (bare, complete) = scan(&pending);
                if complete {
                    if !bare.is_empty() {
                        commands.push(DocCommand {
                            source: source.to_owned(),
                            text: std::mem::take(&mut pending),
                            bare,
                            shown: None,
                        });
                    }
                    pending.clear();
                }
                Block::Sh
            }
            (Block::Json(json), Some(_)) => {
                if after_sh {
                    let shown: Value = serde_json::from_str(&json)
                        .unwrap_or_else(|e| panic!("{source}: a shown answer is not JSON: {e}"));
                    commands.last_mut().unwrap().shown = Some(shown);
                }
                after_sh = false;
                Block::Prose
            }
            (Block::Json(mut json), None) => {
                json.push_str(line);
                json.push('\n');
                Block::Json(json)
            }
            (Block::Other, Some(_)) => {
                after_sh = false;
                Block::Prose
            }
            (Block::Other, None) => Block::Other,
        };
    }
    commands
}

/// The commands of `cocktail up`'s banner: its lines that start a `curl`, with the lines
/// that continue them.
fn banner_commands(banner: &str) -> Vec<DocCommand> {
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in banner.lines() {
        if pending.is_empty() && !line.trim_start().starts_with("curl ") {
            continue;
        }
        if !pending.is_empty() {
            pending.push('\n');
        }
        pending.push_str(line.trim_start());
        let (bare, complete) = scan(&pending);
        if complete {
            commands.push(DocCommand {
                source: "cocktail up".to_owned(),
                text: std::mem::take(&mut pending),
                bare,
                shown: None,
            });
        }
    }
    assert!(
        pending.is_empty(),
        "the banner leaves a command open: {pending}"
    );
    commands
}

/// The kind of a JSON value, for comparing shapes.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Where `live` differs in shape from `shown`: objects must have the same keys, values
/// the same kinds, and arrays the shown elements' shapes.
fn shape_differences(path: &str, shown: &Value, live: &Value, out: &mut Vec<String>) {
    if kind(shown) != kind(live) {
        out.push(format!(
            "{path}: shown {}, answered {}",
            kind(shown),
            kind(live)
        ));
        return;
    }
    match (shown, live) {
        (Value::Object(s), Value::Object(l)) => {
            let shown_keys: BTreeSet<&String> = s.keys().collect();
            let live_keys: BTreeSet<&String> = l.keys().collect();
            if shown_keys != live_keys {
                out.push(format!(
                    "{path}: shown keys {shown_keys:?}, answered {live_keys:?}"
                ));
            }
            for (key, value) in s {
                if let Some(answered) = l.get(key) {
                    shape_differences(&format!("{path}/{key}"), value, answered, out);
                }
            }
        }
        // Element by element where the lengths agree (OIP's outputs differ in kind),
        // else each element against the first shown (a vote of more models).
        (Value::Array(s), Value::Array(l)) if s.len() == l.len() => {
            for (i, (shown, answered)) in s.iter().zip(l).enumerate() {
                shape_differences(&format!("{path}/{i}"), shown, answered, out);
            }
        }
        (Value::Array(s), Value::Array(l)) => {
            if let Some(first) = s.first() {
                for (i, answered) in l.iter().enumerate() {
                    shape_differences(&format!("{path}/{i}"), first, answered, out);
                }
            }
        }
        _ => {}
    }
}

/// The answer's label: `/v1/classify`'s `label`, or OIP's `label` output.
fn label(answer: &Value) -> Option<&Value> {
    answer.get("label").or_else(|| {
        answer["outputs"]
            .as_array()?
            .iter()
            .find(|o| o["name"] == "label")
            .map(|o| &o["data"][0])
    })
}

/// Whether the answer came within its latency target, where it says.
fn latency_met(answer: &Value) -> Option<bool> {
    answer
        .get("latency_met")
        .or_else(|| answer.pointer("/parameters/latency_met"))
        .and_then(Value::as_bool)
}

/// The path a request command sends to at `url`.
fn request_path(command: &str, url: &str) -> String {
    let start = command
        .find(url)
        .unwrap_or_else(|| panic!("no request to {url} in `{command}`"))
        + url.len();
    command[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '\'' && *c != '"')
        .collect()
}

/// A `cocktail up` on free ports, run where `models/` is this checkout's; stopped (and
/// its workers with it) when dropped.
struct Up {
    child: Child,
    dir: PathBuf,
    url: String,
    /// Its stdout up to the end of the banner.
    banner: String,
    /// From the start to the banner.
    ready_after: Duration,
}

impl Up {
    async fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("cocktail-readme-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(workspace_root().join("models"), dir.join("models")).unwrap();
        // Every request's curl prints the status after the body; the commands stay as
        // printed.
        std::fs::write(
            dir.join(".curlrc"),
            "write-out = \"\\n%{http_code}\"\nmax-time = 120\n",
        )
        .unwrap();
        let port = free_port();
        let started = Instant::now();
        let mut child = Command::new(binary("cocktail"))
            .args(["up", "--port", &port.to_string(), "--grpc-port"])
            .arg(free_port().to_string())
            .current_dir(&dir)
            // As a newcomer's: the master makes its secrets in `.cocktail/` here.
            .env_remove("COCKTAIL_ADMIN_TOKEN")
            .env_remove("COCKTAIL_CLUSTER_SECRET")
            .env_remove("COCKTAIL_SECRETS_DIR")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut banner = String::new();
        // `cocktail up` waits up to 300 s for its workers by default.
        let ready = tokio::time::timeout(Duration::from_secs(330), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                banner.push_str(&line);
                banner.push('\n');
                if line.contains("Cocktail-rs is serving on") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(ready, Ok(true), "`cocktail up` printed no banner: {banner}");
        let ready_after = started.elapsed();
        // The rest of the banner comes in the same write.
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_secs(1), lines.next_line()).await
        {
            banner.push_str(&line);
            banner.push('\n');
        }
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
            banner,
            ready_after,
        }
    }
}

impl Drop for Up {
    /// SIGTERM: `cocktail up` stops the master, which drains and stops its workers.
    fn drop(&mut self) {
        cocktail_process::stop_blocking(&mut self.child, Duration::from_secs(90));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One request's outcome.
struct Answered {
    status: String,
    body: Value,
    took: Duration,
}

/// Runs `command` through `bash -c` in `dir`, once.
async fn run_request(command: &str, dir: &Path) -> Answered {
    let started = Instant::now();
    let output = Command::new("bash")
        .args(["-c", command])
        .current_dir(dir)
        .env("CURL_HOME", dir)
        .output()
        .await
        .expect("bash runs (curl: scripts/test.sh installs it)");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (body, status) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    assert!(
        output.status.success(),
        "`{command}` failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Answered {
        status: status.trim().to_owned(),
        body: serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())),
        took,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_command_answers_as_shown_on_a_fresh_cocktail_up() {
    let root = workspace_root();
    let mut documented = Vec::new();
    for doc in DOCS {
        let markdown = std::fs::read_to_string(root.join(doc)).unwrap();
        documented.extend(doc_commands(doc, &markdown));
    }
    let (requests, setup): (Vec<DocCommand>, Vec<DocCommand>) = documented
        .into_iter()
        .partition(|c| c.bare.starts_with("curl "));
    let skipped: Vec<(&str, &str)> = setup
        .iter()
        .map(|c| (c.source.as_str(), c.bare.as_str()))
        .collect();
    let expected: Vec<(&str, &str)> = SKIPPED.iter().map(|&(doc, cmd, _)| (doc, cmd)).collect();
    assert_eq!(
        skipped, expected,
        "the documents' commands that are not requests are not the ones this test skips \
         (list a new one in SKIPPED with the reason, or make it a request)"
    );
    assert!(
        DOCS.iter()
            .all(|doc| requests.iter().any(|r| r.source == *doc)),
        "every document has requests: {requests:#?}"
    );

    let up = Up::start().await;
    let banner = banner_commands(&up.banner);
    eprintln!(
        "cocktail up printed its banner after {:.1} s; {} documented requests and {} of \
         the banner",
        up.ready_after.as_secs_f64(),
        requests.len(),
        banner.len()
    );
    let banner_paths: BTreeSet<String> = banner
        .iter()
        .map(|c| request_path(&c.bare, &up.url))
        .collect();
    for path in ["/v1/classify", "/v2/models/sentiment/infer", "/v1/workers"] {
        assert!(
            banner_paths.contains(path),
            "the banner has no request to {path}:\n{}",
            up.banner
        );
    }

    // The documents' requests in order, then the banner's, each once.
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut labels: HashMap<String, Value> = HashMap::new();
    let mut failures = Vec::new();
    let mut report = Vec::new();
    for (command, url) in requests
        .iter()
        .map(|c| (c, DOC_URL))
        .chain(banner.iter().map(|c| (c, up.url.as_str())))
    {
        let mut text = command.text.replace(url, &up.url);
        for (shown, live) in &ids {
            text = text.replace(&format!("\"{shown}\""), &format!("\"{live}\""));
        }
        let path = request_path(&command.bare, url);
        let fields = FIELDS
            .iter()
            .find(|(p, _)| *p == path)
            .unwrap_or_else(|| panic!("{path} ({}) has no entry in FIELDS", command.source))
            .1;
        let answered = run_request(&text, &up.dir).await;
        let body = &answered.body;
        let mut wrong = Vec::new();
        if answered.status != "200" {
            wrong.push(format!("answered {}", answered.status));
        }
        for field in fields {
            if body.pointer(field).is_none() {
                wrong.push(format!("no {field}"));
            }
        }
        if let Some(shown) = &command.shown {
            shape_differences("", shown, body, &mut wrong);
            if let (Some(Value::String(shown)), Some(Value::String(live))) =
                (shown.get("id"), body.get("id"))
            {
                ids.insert(shown.clone(), live.clone());
            }
            if let Some(shown) = label(shown) {
                labels.insert(path.clone(), shown.clone());
            }
        }
        if answered.status == "200"
            && let Some(shown) = labels.get(&path)
            && label(body) != Some(shown)
        {
            wrong.push(format!("label {:?}, shown {shown}", label(body)));
        }
        // Printed, not asserted: whether a 50 ms target holds right after start depends on
        // what else the host runs (debug builds on two shared cores); the issue asks for
        // 200 on the first try.
        let slo = match latency_met(body) {
            Some(false) => "latency_met: false",
            _ => "",
        };
        let models = match path.as_str() {
            "/v1/classify" => body["models"].to_string(),
            "/v2/models/sentiment/infer" => body["parameters"]["models"].to_string(),
            _ => String::new(),
        };
        let waited = body
            .get("wait_us")
            .or_else(|| body.pointer("/parameters/wait_us"))
            .and_then(Value::as_f64)
            .map_or_else(String::new, |us| format!("(master: {:.1} ms)", us / 1e3));
        report.push(format!(
            "{:<24} {path:<28} {} in {:>5.0} ms {waited} {models} {slo}",
            command.source,
            answered.status,
            answered.took.as_secs_f64() * 1e3
        ));
        if !wrong.is_empty() {
            failures.push(format!(
                "{} `{}`:\n  {}\n  answer: {body}",
                command.source,
                command.bare,
                wrong.join("\n  ")
            ));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "{} of {} requests did not answer as shown on their first try:\n{}",
        failures.len(),
        report.len(),
        failures.join("\n")
    );
}
