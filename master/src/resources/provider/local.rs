//! The local provider: each instance of the emulated cloud ([`super::emulated`]) is a real
//! `cocktail-worker` process on this host.

use std::process::Stdio;
use std::time::Duration;

use cocktail_common::auth::{ADMIN_TOKEN_ENV, CLUSTER_SECRET_ENV};
use cocktail_service::net::CLUSTER_CA_ENV;
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub use super::emulated::{LocalConfig, LocalProvider};
use super::emulated::{Runtime, WorkerSpec};
use crate::MasterError;

/// How long a worker has to drain after SIGTERM before it is killed.
const DRAIN_GRACE: Duration = Duration::from_secs(35);

/// Workers as child processes of the master.
#[derive(Debug, Default)]
pub struct Processes;

impl Runtime for Processes {
    type Worker = Child;

    fn name(&self) -> &'static str {
        "local"
    }

    /// Workers bind this host's loopback (`cocktail-worker`'s default).
    fn host(&self, _: &str) -> String {
        "127.0.0.1".to_owned()
    }

    fn start<'a>(
        &'a self,
        config: &'a LocalConfig,
        spec: &'a WorkerSpec,
    ) -> BoxFuture<'a, Result<Child, MasterError>> {
        async move {
            let mut command = Command::new(&config.worker_bin);
            command
                .args(spec.args(config, &config.master_url))
                .args(["--port", "0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true);
            if let Some(zoo) = &config.zoo {
                command.arg("--zoo").arg(zoo);
            }
            if std::env::var_os("RUST_LOG").is_none() {
                command.env("RUST_LOG", "warn");
            }
            // The worker's secret in its environment, which `ps` does not show; the
            // operator's token stays with the master.
            command.env_remove(ADMIN_TOKEN_ENV);
            if let Some(secret) = &config.cluster_secret {
                command.env(CLUSTER_SECRET_ENV, secret.expose());
            }
            match &config.cluster_ca {
                Some(ca) => command.env(CLUSTER_CA_ENV, ca),
                None => command.env_remove(CLUSTER_CA_ENV),
            };
            let mut child = command.spawn().map_err(|e| {
                MasterError::Provider(format!("{}: {e}", config.worker_bin.display()))
            })?;
            if let Some(stdout) = child.stdout.take() {
                // Drain stdout so the worker never blocks on a full pipe.
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stdout).lines();
                    while let Ok(Some(_)) = lines.next_line().await {}
                });
            }
            Ok(child)
        }
        .boxed()
    }

    fn stop(&self, mut child: Child) -> BoxFuture<'_, ()> {
        async move {
            // SIGTERM, the drain grace, then SIGKILL; an error means it is gone already.
            let _ = cocktail_process::stop(&mut child, DRAIN_GRACE).await;
        }
        .boxed()
    }

    fn exited(&self, child: &mut Child) -> bool {
        !matches!(child.try_wait(), Ok(None))
    }
}
