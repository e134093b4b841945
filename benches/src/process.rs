//! Starting the project's binaries for benchmarks, and the inputs they are sent.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cocktail_common::auth::RunSecrets;
use cocktail_service::net;
use tokio::process::{Child, Command};

/// A binary next to the running one (`cargo build --release --workspace --bins`).
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name(name);
    if !path.is_file() {
        bail!(
            "{} is missing: build it with `cargo build --release --workspace --bins`",
            path.display()
        );
    }
    Ok(path)
}

/// The secrets of this run's masters and workers: the environment's, else fresh ones.
pub fn secrets() -> anyhow::Result<&'static RunSecrets> {
    static SECRETS: OnceLock<RunSecrets> = OnceLock::new();
    if let Some(secrets) = SECRETS.get() {
        return Ok(secrets);
    }
    let made = RunSecrets::from_env_or_new()?;
    Ok(SECRETS.get_or_init(|| made))
}

/// A client for the masters this run started (admin endpoints included).
pub fn admin_client() -> anyhow::Result<reqwest::Client> {
    Ok(net::client(&[], Some(&secrets()?.admin))?.build()?)
}

/// The flags of a benchmark's master: a free port, and member
/// deadlines long enough that a busy 2-core machine does not turn into failed requests.
pub const MASTER_FLAGS: &[&str] = &["--port", "0", "--deadline-grace-ms", "1000"];

/// Starts `name` with `args` and this run's [`secrets`], and returns it with the URL
/// from its first stdout line; the child is killed when dropped.
pub async fn start(name: &str, args: &[&str]) -> anyhow::Result<(Child, String)> {
    let mut command = Command::new(sibling(name)?);
    command
        .args(args)
        .envs(secrets()?.env())
        .env("RUST_LOG", "warn");
    let started = cocktail_process::start(name, command, Duration::from_secs(120)).await?;
    Ok((started.child, started.url))
}

/// Every process of this host as `(pid, argv)`, from `/proc` (the soak benchmark and the
/// fault tests find the master's workers by their command lines).
pub fn command_lines() -> Vec<(i32, Vec<String>)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args = cmdline
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            Some((pid, args))
        })
        .collect()
}

/// The value after `flag` in `args`.
pub fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.windows(2)
        .find(|w| w[0] == flag)
        .map(|w| w[1].as_str())
}

/// The parent of process `pid`, from `/proc/PID/stat` (after the command name, which may
/// hold spaces and parentheses, come the state and the parent's pid).
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// The pids of the `cocktail-worker` processes serving `model` that the master process
/// `master_pid` started (its local provider's workers are its children; they reach it on
/// its cluster listener, not the URL the tests know).
pub fn worker_pids(master_pid: u32, model: &str) -> Vec<i32> {
    command_lines()
        .into_iter()
        .filter(|(pid, args)| {
            args.first().is_some_and(|a| a.ends_with("cocktail-worker"))
                && flag(args, "--model") == Some(model)
                && parent_of(*pid).is_some_and(|p| i64::from(p) == i64::from(master_pid))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// A grey test image as base64 PNG, as a client sends it.
pub fn png_base64(image: &cocktail_common::testset::GreyImage) -> anyhow::Result<String> {
    let buffer = image::GrayImage::from_raw(image.width, image.height, image.pixels.clone())
        .context("image size")?;
    let mut bytes = Vec::new();
    buffer.write_to(
        &mut std::io::Cursor::new(&mut bytes),
        image::ImageFormat::Png,
    )?;
    Ok(BASE64.encode(bytes))
}

/// Waits until `count` workers are registered with the master at `url` (a minute at most).
pub async fn wait_for_workers(
    client: &reqwest::Client,
    url: &str,
    count: usize,
) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed: serde_json::Value = client
            .get(format!("{url}/v1/workers"))
            .send()
            .await?
            .json()
            .await?;
        if listed["workers"].as_array().map_or(0, Vec::len) >= count {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "workers did not register within a minute"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The `/metrics` text of the process at `url` (read once, then [`series_sum`] for each
/// series needed).
pub async fn metrics_text(client: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    Ok(client
        .get(format!("{url}/metrics"))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?)
}

/// The sum of every sample of the Prometheus series `name` (all label sets) in `text`; 0
/// when it has none yet (a histogram appears at its first observation).
pub fn series_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_sums_its_label_sets_and_not_its_longer_namesakes() {
        let text = "# TYPE x_seconds summary\n\
                    x_seconds_sum{model=\"a\"} 0.5\n\
                    x_seconds_sum{model=\"b\"} 0.25\n\
                    x_seconds_sum_other 9\n\
                    x_seconds_count 3\n";
        assert_eq!(series_sum(text, "x_seconds_sum"), 0.75);
        assert_eq!(series_sum(text, "x_seconds_count"), 3.0);
        assert_eq!(series_sum(text, "y"), 0.0);
    }
}
