//! The docker provider: each instance of the emulated cloud ([`super::emulated`]) is a
//! container of the project's image running `cocktail-worker`, started through the
//! Docker Engine API (bollard, over the socket mounted into the master's container) on
//! the compose network, labelled with its cluster, pool and instance, and limited to its
//! catalog type's vCPUs (at most this host's cores) and memory. The containers a master
//! left behind (it crashed) are removed when the next one starts; the master terminates
//! those it launched when it stops. With a targets file, the running containers are
//! listed there for Prometheus' file service discovery, rewritten at each launch and
//! removal.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HealthConfig, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StopContainerOptionsBuilder,
};
use cocktail_common::auth::CLUSTER_SECRET_ENV;
use cocktail_service::net::CLUSTER_CA_ENV;
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;

use super::emulated::{LocalConfig, Runtime, WorkerSpec};
use crate::MasterError;

/// Seconds a worker has to drain after SIGTERM before Docker kills it.
const DRAIN_GRACE_S: i32 = 35;
/// How often a container's state is read, to notice one that exited.
const WATCH_PERIOD: Duration = Duration::from_secs(1);
/// How long removing a cluster's containers keeps trying while some are left, and the
/// pause between tries.
const SWEEP_DEADLINE: Duration = Duration::from_secs(10);
const SWEEP_PAUSE: Duration = Duration::from_millis(500);
/// Labels on every container this provider starts.
pub const CLUSTER_LABEL: &str = "io.cocktail.cluster";
pub const POOL_LABEL: &str = "io.cocktail.pool";
pub const INSTANCE_LABEL: &str = "io.cocktail.instance";

#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// The image whose `cocktail-worker` the containers run.
    pub image: String,
    /// The Docker network the containers join (compose's); the master must be on it.
    pub network: String,
    /// The master's URL as the containers reach it, e.g. `http://master:8080`.
    pub master_url: String,
    /// Names this master's containers (label and name prefix): leftovers with it are
    /// removed at start.
    pub cluster: String,
    /// The port the worker listens on inside its container.
    pub port: u16,
    /// Where to list the running containers for Prometheus (`file_sd_configs`), if
    /// anywhere.
    pub targets_file: Option<PathBuf>,
}

/// Workers as containers.
#[derive(Debug)]
pub struct Containers {
    docker: Docker,
    config: DockerConfig,
    /// This host's cores: a type's vCPUs beyond them cannot be granted.
    host_cpus: usize,
    /// The running containers by name, with their Prometheus labels, as the targets
    /// file lists them.
    targets: Mutex<BTreeMap<String, Target>>,
}

/// A worker container as Prometheus' file service discovery lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct Target {
    targets: [String; 1],
    labels: BTreeMap<&'static str, String>,
}

/// A running worker container, watched for its exit.
#[derive(Debug)]
pub struct Container {
    name: String,
    exited: Arc<AtomicBool>,
    watcher: tokio::task::JoinHandle<()>,
}

fn docker_error(what: &str) -> impl Fn(bollard::errors::Error) -> MasterError + '_ {
    move |e| MasterError::Provider(format!("docker {what}: {e}"))
}

impl Containers {
    /// Connects to the Docker daemon (`DOCKER_HOST`, else the local socket), checks that
    /// it answers, and removes the containers a previous master of `cluster` left (it
    /// crashed, or was killed before it could stop them).
    pub async fn connect(config: DockerConfig) -> Result<Self, MasterError> {
        let docker = Docker::connect_with_local_defaults().map_err(docker_error("connect"))?;
        docker.ping().await.map_err(docker_error("ping"))?;
        let containers = Self {
            docker,
            config,
            host_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            targets: Mutex::new(BTreeMap::new()),
        };
        containers.remove_leftovers().await?;
        // An empty list now, so that a bad path stops the master at start and Prometheus
        // forgets the containers of a master before this one.
        if let Some(path) = &containers.config.targets_file {
            write_targets(path, &BTreeMap::new())?;
        }
        Ok(containers)
    }

    /// Adds (`Some`) or removes (`None`) container `name` in the targets file. A failed
    /// write is logged: the container serves either way, only Prometheus misses it.
    fn list_target(&self, name: &str, target: Option<Target>) {
        let Some(path) = &self.config.targets_file else {
            return;
        };
        let Ok(mut targets) = self.targets.lock() else {
            tracing::warn!("the targets list is poisoned; {name} is not listed for Prometheus");
            return;
        };
        match target {
            Some(target) => targets.insert(name.to_owned(), target),
            None => targets.remove(name),
        };
        if let Err(e) = write_targets(path, &targets) {
            tracing::warn!(error = %e, "cannot update the Prometheus targets file");
        }
    }

    /// `https`: the worker serves HTTPS with a certificate from the cluster's CA, and
    /// Prometheus scrapes it so (`__scheme__`).
    fn target(&self, spec: &WorkerSpec, name: &str, https: bool) -> Target {
        let mut labels = BTreeMap::from([
            ("pool", spec.model.clone()),
            ("instance_id", spec.id.clone()),
            ("instance_type", spec.instance_type.clone()),
            ("cluster", self.config.cluster.clone()),
        ]);
        if https {
            labels.insert("__scheme__", "https".to_owned());
        }
        Target {
            targets: [format!("{name}:{}", self.config.port)],
            labels,
        }
    }

    /// Removes every container of this cluster, running or not, and reads the list again
    /// until none is left or [`SWEEP_DEADLINE`] has passed. Each container is tried even
    /// when another fails: a container whose stop is still under way elsewhere (one the
    /// controller was recycling when the master began to stop) answers 409, "removal
    /// already in progress", and the next read shows whether it went.
    async fn remove_leftovers(&self) -> Result<(), MasterError> {
        let give_up = tokio::time::Instant::now() + SWEEP_DEADLINE;
        let mut last_error: Option<MasterError> = None;
        loop {
            let left = self.cluster_containers().await?;
            if left.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() > give_up {
                let why = last_error.map_or_else(|| "they came back".to_owned(), |e| e.to_string());
                return Err(MasterError::Provider(format!(
                    "{} container(s) of cluster {} are left after {SWEEP_DEADLINE:?} of \
                     removing them ({why}): {left:?}",
                    left.len(),
                    self.config.cluster
                )));
            }
            let mut failed = false;
            for id in &left {
                tracing::info!(container = %id, cluster = %self.config.cluster, "removing a worker container left behind");
                if let Err(e) = self
                    .docker
                    .remove_container(
                        id,
                        Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                    )
                    .await
                {
                    last_error = Some(docker_error("remove")(e));
                    failed = true;
                }
            }
            if failed {
                tokio::time::sleep(SWEEP_PAUSE).await;
            }
        }
    }

    /// The ids of every container labelled with this cluster, running or not.
    async fn cluster_containers(&self) -> Result<Vec<String>, MasterError> {
        let filters: HashMap<&str, Vec<String>> = HashMap::from([(
            "label",
            vec![format!("{CLUSTER_LABEL}={}", self.config.cluster)],
        )]);
        let listed = self
            .docker
            .list_containers(Some(
                ListContainersOptionsBuilder::default()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await
            .map_err(docker_error("list"))?;
        Ok(listed.into_iter().filter_map(|c| c.id).collect())
    }

    /// The container's name: the cluster and the instance id, as Docker allows them.
    fn name(&self, id: &str) -> String {
        format!("{}-{id}", self.config.cluster)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }

    fn body(&self, local: &LocalConfig, spec: &WorkerSpec, name: &str) -> ContainerCreateBody {
        let mut args = spec.args(local, &self.config.master_url);
        args.extend([
            "--host".to_owned(),
            "0.0.0.0".to_owned(),
            "--port".to_owned(),
            self.config.port.to_string(),
            "--advertise-url".to_owned(),
            format!(
                "{}://{name}:{}",
                if local.cluster_ca.is_some() {
                    "https"
                } else {
                    "http"
                },
                self.config.port
            ),
        ]);
        if let Some(zoo) = &local.zoo {
            args.extend(["--zoo".to_owned(), zoo.display().to_string()]);
        }
        let labels = HashMap::from([
            (CLUSTER_LABEL.to_owned(), self.config.cluster.clone()),
            (POOL_LABEL.to_owned(), spec.model.clone()),
            (INSTANCE_LABEL.to_owned(), spec.id.clone()),
            (
                "io.cocktail.instance-type".to_owned(),
                spec.instance_type.clone(),
            ),
        ]);
        let cpus = f64::from(spec.vcpus).min(self.host_cpus as f64).max(0.01);
        ContainerCreateBody {
            image: Some(self.config.image.clone()),
            entrypoint: Some(vec!["cocktail-worker".to_owned()]),
            cmd: Some(args),
            // The port again as the image's health check reads it.
            env: Some(
                [
                    "RUST_LOG=warn".to_owned(),
                    format!("COCKTAIL_PORT={}", self.config.port),
                ]
                .into_iter()
                .chain(
                    local
                        .cluster_secret
                        .as_ref()
                        .map(|s| format!("{CLUSTER_SECRET_ENV}={}", s.expose())),
                )
                .chain(
                    local
                        .cluster_ca
                        .as_ref()
                        .map(|ca| format!("{CLUSTER_CA_ENV}={ca}")),
                )
                .collect(),
            ),
            // The image's check speaks plain HTTP; a worker serving HTTPS is checked by
            // its master instead (every health interval, over TLS).
            healthcheck: local.cluster_ca.as_ref().map(|_| HealthConfig {
                test: Some(vec!["NONE".to_owned()]),
                ..HealthConfig::default()
            }),
            labels: Some(labels),
            host_config: Some(HostConfig {
                nano_cpus: Some((cpus * 1e9) as i64),
                memory: Some((spec.memory_gib * 1024.0 * 1024.0 * 1024.0) as i64),
                network_mode: Some(self.config.network.clone()),
                init: Some(true),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }
}

impl Runtime for Containers {
    type Worker = Container;

    fn name(&self) -> &'static str {
        "docker"
    }

    /// The container's name, which Docker's DNS resolves on the cluster's network.
    fn host(&self, id: &str) -> String {
        self.name(id)
    }

    fn start<'a>(
        &'a self,
        local: &'a LocalConfig,
        spec: &'a WorkerSpec,
    ) -> BoxFuture<'a, Result<Container, MasterError>> {
        async move {
            let name = self.name(&spec.id);
            let body = self.body(local, spec, &name);
            self.docker
                .create_container(
                    Some(CreateContainerOptionsBuilder::default().name(&name).build()),
                    body,
                )
                .await
                .map_err(docker_error("create"))?;
            self.docker
                .start_container(&name, None)
                .await
                .map_err(docker_error("start"))?;
            self.list_target(
                &name,
                Some(self.target(spec, &name, local.cluster_ca.is_some())),
            );
            let exited = Arc::new(AtomicBool::new(false));
            let watcher = tokio::spawn(watch(
                self.docker.clone(),
                name.clone(),
                Arc::clone(&exited),
            ));
            Ok(Container {
                name,
                exited,
                watcher,
            })
        }
        .boxed()
    }

    fn stop(&self, container: Container) -> BoxFuture<'_, ()> {
        async move {
            container.watcher.abort();
            let stopped = self
                .docker
                .stop_container(
                    &container.name,
                    Some(StopContainerOptionsBuilder::default().t(DRAIN_GRACE_S).build()),
                )
                .await;
            if let Err(e) = stopped {
                tracing::debug!(container = %container.name, error = %e, "stop");
            }
            if let Err(e) = self
                .docker
                .remove_container(
                    &container.name,
                    Some(RemoveContainerOptionsBuilder::default().force(true).build()),
                )
                .await
            {
                tracing::warn!(container = %container.name, error = %e, "cannot remove the container");
            }
            // Scraped while it drains; gone from the list once it is gone.
            self.list_target(&container.name, None);
        }
        .boxed()
    }

    fn exited(&self, container: &mut Container) -> bool {
        container.exited.load(Ordering::Acquire)
    }

    /// Every container of the cluster that a termination still under way left.
    fn sweep(&self) -> BoxFuture<'_, ()> {
        async move {
            if let Err(e) = self.remove_leftovers().await {
                tracing::warn!(error = %e, "cannot remove the remaining worker containers");
            }
        }
        .boxed()
    }
}

/// Writes `targets` to `path` as Prometheus' file service discovery reads it (a JSON
/// list of target groups), through a file renamed into place: Prometheus never reads a
/// half-written list.
fn write_targets(path: &Path, targets: &BTreeMap<String, Target>) -> Result<(), MasterError> {
    let failed = |e: &dyn std::fmt::Display| {
        MasterError::Provider(format!(
            "cannot write the targets file `{}`: {e}",
            path.display()
        ))
    };
    let groups: Vec<&Target> = targets.values().collect();
    let json = serde_json::to_vec_pretty(&groups).map_err(|e| failed(&e))?;
    let mut partial = path.as_os_str().to_owned();
    partial.push(".part");
    std::fs::write(&partial, json).map_err(|e| failed(&e))?;
    std::fs::rename(&partial, path).map_err(|e| failed(&e))
}

/// Reads the container's state every [`WATCH_PERIOD`] until it is no longer running.
async fn watch(docker: Docker, name: String, exited: Arc<AtomicBool>) {
    loop {
        tokio::time::sleep(WATCH_PERIOD).await;
        let running = match docker
            .inspect_container(&name, None::<InspectContainerOptions>)
            .await
        {
            Ok(inspected) => inspected
                .state
                .is_some_and(|s| s.running.unwrap_or(false) || s.restarting.unwrap_or(false)),
            // Gone (removed behind our back), or the daemon is unreachable: only the
            // former means exited, and a missing container answers 404.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => false,
            Err(_) => true,
        };
        if !running {
            exited.store(true, Ordering::Release);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn the_targets_file_lists_each_container_as_a_target_group() {
        let dir = std::env::temp_dir().join(format!("cocktail-targets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("workers.json");
        let target = |name: &str, pool: &str| Target {
            targets: [format!("{name}:9000")],
            labels: BTreeMap::from([("pool", pool.to_owned())]),
        };
        let mut targets = BTreeMap::new();
        write_targets(&path, &targets).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[]");
        targets.insert("c-1".to_owned(), target("c-1", "resnet"));
        targets.insert("c-2".to_owned(), target("c-2", "gru"));
        write_targets(&path, &targets).unwrap();
        let listed: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            listed,
            serde_json::json!([
                {"targets": ["c-1:9000"], "labels": {"pool": "resnet"}},
                {"targets": ["c-2:9000"], "labels": {"pool": "gru"}},
            ])
        );
        // Nothing but the list is left in the folder.
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(files.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
