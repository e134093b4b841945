//! Child processes of the workspace's binaries, in one place for `cocktail up`, the
//! master's local provider, the benchmarks and the black-box tests: start a binary that
//! prints `... http://ADDR` as its first stdout line and read that URL; send it signals;
//! stop it with SIGTERM, a grace period, then SIGKILL (TGI `launcher` `terminate()`).
//!
//! Nothing here panics: the tests wrap these calls in their own `unwrap`s.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

pub use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Why a process could not be started or signalled.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("starting {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    #[error("reading the output of {what}: {source}")]
    Read {
        what: String,
        source: std::io::Error,
    },
    #[error("{what} did not print its address within {limit:?}")]
    Timeout { what: String, limit: Duration },
    #[error("{what} exited before it printed its address")]
    Exited { what: String },
    #[error("{what} printed `{line}` instead of its address")]
    NoAddress { what: String, line: String },
    #[error("the process has already exited")]
    NotRunning,
    #[error("sending {signal} to process {pid}: {source}")]
    Signal {
        pid: i32,
        signal: Signal,
        source: nix::Error,
    },
}

/// A started process and the URL it printed. The child is killed when dropped
/// (`kill_on_drop`), so a failing caller leaves nothing behind.
#[derive(Debug)]
pub struct Started {
    pub child: Child,
    pub url: String,
}

/// Spawns `command` (stdout piped, killed on drop) and waits up to `limit` for its first
/// stdout line, whose last word is the URL it serves (`http://` or `https://`). The
/// rest of stdout is drained in the background so the process never blocks on a full
/// pipe. `what` names the process in errors.
pub async fn start(
    what: &str,
    mut command: Command,
    limit: Duration,
) -> Result<Started, ProcessError> {
    let mut child = command
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ProcessError::Spawn {
            what: what.to_owned(),
            source,
        })?;
    let stdout = child.stdout.take().ok_or_else(|| ProcessError::Exited {
        what: what.to_owned(),
    })?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(limit, lines.next_line())
        .await
        .map_err(|_| ProcessError::Timeout {
            what: what.to_owned(),
            limit,
        })?
        .map_err(|source| ProcessError::Read {
            what: what.to_owned(),
            source,
        })?
        .ok_or_else(|| ProcessError::Exited {
            what: what.to_owned(),
        })?;
    let url = line
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ProcessError::NoAddress {
            what: what.to_owned(),
            line,
        });
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Started { child, url })
}

/// Sends `signal` to the process `pid`.
pub fn signal_pid(pid: i32, signal: Signal) -> Result<(), ProcessError> {
    nix::sys::signal::kill(Pid::from_raw(pid), signal).map_err(|source| ProcessError::Signal {
        pid,
        signal,
        source,
    })
}

/// Sends `signal` to `child`; [`ProcessError::NotRunning`] once it has been reaped.
pub fn signal(child: &Child, signal: Signal) -> Result<(), ProcessError> {
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or(ProcessError::NotRunning)?;
    signal_pid(pid, signal)
}

/// Waits up to `grace` for `child` to exit, then kills it: its exit status if it exited
/// in time, `None` if it had to be killed.
pub async fn wait_or_kill(
    child: &mut Child,
    grace: Duration,
) -> std::io::Result<Option<ExitStatus>> {
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.map(Some),
        Err(_) => child.kill().await.map(|()| None),
    }
}

/// SIGTERM, up to `grace` for `child` to exit, then SIGKILL: its exit status if it
/// stopped by itself, `None` if it had to be killed.
pub async fn stop(child: &mut Child, grace: Duration) -> std::io::Result<Option<ExitStatus>> {
    // An error means it has exited already; waiting reaps it.
    let _ = signal(child, Signal::SIGTERM);
    wait_or_kill(child, grace).await
}

/// [`stop`] for `Drop` implementations, which cannot await: SIGTERM, then polls every
/// 20 ms for up to `grace`, then starts a SIGKILL. Whether it stopped by itself.
pub fn stop_blocking(child: &mut Child, grace: Duration) -> bool {
    if child.id().is_none() {
        return true;
    }
    let _ = signal(child, Signal::SIGTERM);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.start_kill();
    false
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::panic,
        reason = "a test fails by panicking, with the value that was wrong"
    )]

    use super::*;

    /// `sh -c script`. Scripts `exec` their last command, so that killing the child
    /// kills what it runs and nothing outlives the test holding its output.
    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[tokio::test]
    async fn reads_the_url_from_the_first_line() {
        let started = start(
            "echo",
            shell("echo 'listening on http://127.0.0.1:9' && exec sleep 5"),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(started.url, "http://127.0.0.1:9");
    }

    #[tokio::test]
    async fn a_line_without_an_address_or_an_early_exit_is_an_error() {
        let printed = start("echo", shell("echo ready"), Duration::from_secs(5)).await;
        assert!(
            matches!(printed, Err(ProcessError::NoAddress { ref line, .. }) if line == "ready"),
            "{printed:?}"
        );
        let exited = start("true", shell("true"), Duration::from_secs(5)).await;
        assert!(
            matches!(exited, Err(ProcessError::Exited { .. })),
            "{exited:?}"
        );
        let silent = start("sleep", shell("exec sleep 5"), Duration::from_millis(50)).await;
        assert!(
            matches!(silent, Err(ProcessError::Timeout { .. })),
            "{silent:?}"
        );
    }

    #[tokio::test]
    async fn stop_terminates_and_kills_what_ignores_sigterm() {
        let mut polite = shell("exec sleep 30").kill_on_drop(true).spawn().unwrap();
        let status = stop(&mut polite, Duration::from_secs(5)).await.unwrap();
        assert!(status.is_some_and(|s| !s.success()), "{status:?}");
        let mut stubborn = shell("trap '' TERM; echo; exec sleep 30")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // The trap is set once the shell prints.
        let mut lines = BufReader::new(stubborn.stdout.take().unwrap()).lines();
        lines.next_line().await.unwrap();
        let status = stop(&mut stubborn, Duration::from_millis(200))
            .await
            .unwrap();
        assert_eq!(status, None);
        assert!(matches!(
            signal(&stubborn, Signal::SIGTERM),
            Err(ProcessError::NotRunning)
        ));
    }
}
