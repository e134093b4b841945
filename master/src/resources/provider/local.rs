//! The local provider: instances are real `cocktail-worker` processes on this host.
//! An instance type is emulated by the worker's intra-op thread count (its vCPUs, capped
//! by this machine), launches take a provisioning delay, and spot instances are revoked
//! with a notice, either when the spot price rises above the bid or at a chaos rate.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cocktail_common::catalog::{
    Catalog, InstanceType, SpotPrices, SpotProcess, SpotReplay, unit_random,
};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::{InstanceRecord, InstanceStatus, Interruption, LaunchSpec, Provider, now_s};
use crate::MasterError;

#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub worker_bin: PathBuf,
    /// The master the workers register with.
    pub master_url: String,
    pub zoo: Option<PathBuf>,
    /// Time between a launch and starting the worker (EC2 takes 60-100 s).
    pub provisioning_delay: Duration,
    /// Intra-op threads at most, whatever the type's vCPUs (this host's cores).
    pub max_threads: usize,
    /// Spot revocations per instance-hour beyond those the price causes.
    pub revocations_per_hour: f64,
    /// Warning before a revoked instance goes (EC2: 2 minutes).
    pub notice: Duration,
    pub seed: u64,
    /// Replay this spot price history (`seconds,instance_type,price` CSV, seconds since
    /// the provider started) instead of the synthetic process.
    pub spot_history: Option<PathBuf>,
    /// Workers take as long per batch as their instance type would (`--emulate-type`),
    /// so a mixed pool of local workers behaves like the types it stands for.
    pub emulate_types: bool,
    /// Emulated types run this many times slower than modelled (`--emulate-scale`).
    pub emulate_scale: f64,
}

#[derive(Debug)]
struct Entry {
    record: InstanceRecord,
    child: Option<Child>,
}

#[derive(Debug)]
pub struct LocalProvider {
    config: LocalConfig,
    catalog: Catalog,
    prices: Box<dyn SpotPrices>,
    started: Instant,
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    next: AtomicU64,
    events: Mutex<Option<mpsc::Receiver<Interruption>>>,
    notify: mpsc::Sender<Interruption>,
}

impl LocalProvider {
    /// Creates the provider and starts its revocation watch; call inside Tokio.
    pub fn start(config: LocalConfig, catalog: Catalog) -> Result<Arc<Self>, MasterError> {
        let (notify, events) = mpsc::channel(1024);
        let prices: Box<dyn SpotPrices> = match &config.spot_history {
            Some(path) => Box::new(SpotReplay::load(path)?),
            None => Box::new(SpotProcess::new(catalog.spot, config.seed)),
        };
        let provider = Arc::new(Self {
            prices,
            catalog,
            started: Instant::now(),
            entries: Arc::new(Mutex::new(HashMap::new())),
            next: AtomicU64::new(1),
            events: Mutex::new(Some(events)),
            notify,
            config,
        });
        let watcher = Arc::downgrade(&provider);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let mut counter = 0_u64;
            loop {
                tick.tick().await;
                let Some(provider) = watcher.upgrade() else {
                    return;
                };
                counter += 1;
                provider.revocations(counter);
            }
        });
        Ok(provider)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Once a second: revoke running spot instances whose price passed the bid, or by
    /// chance at the chaos rate.
    fn revocations(self: &Arc<Self>, counter: u64) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let chance = self.config.revocations_per_hour / 3600.0;
        let doomed: Vec<(InstanceRecord, String)> = {
            let mut entries = self.lock();
            let mut doomed = Vec::new();
            for entry in entries.values_mut() {
                let r = &mut entry.record;
                if !r.spot || r.status != InstanceStatus::Running {
                    continue;
                }
                let Some(ty) = self.catalog.get(&r.instance_type) else {
                    continue;
                };
                let price = self.prices.price(ty, elapsed);
                let reason = if price > self.catalog.bid(ty) {
                    format!(
                        "spot price ${price:.4}/h rose above the bid ${:.4}/h",
                        self.catalog.bid(ty)
                    )
                } else if unit_random(
                    self.config.seed,
                    counter.wrapping_mul(1_000_003) ^ instance_key(&r.id),
                ) < chance
                {
                    "spot capacity reclaimed (chaos)".to_owned()
                } else {
                    continue;
                };
                r.status = InstanceStatus::Interrupted;
                doomed.push((r.clone(), reason));
            }
            doomed
        };
        for (record, reason) in doomed {
            tracing::warn!(id = %record.id, %reason, "spot interruption notice");
            let _ = self.notify.try_send(Interruption {
                id: record.id.clone(),
                model: record.model.clone(),
                instance_type: record.instance_type.clone(),
                reason,
                notice: self.config.notice,
            });
            let provider = Arc::clone(self);
            tokio::spawn(async move {
                tokio::time::sleep(provider.config.notice).await;
                let _ = provider.halt(&record.id, InstanceStatus::Terminated).await;
            });
        }
    }

    /// SIGTERM (the worker drains and deregisters), then waits for it to exit; the
    /// instance ends `Terminated`, or `Stopped` to be started again.
    async fn halt(&self, id: &str, to: InstanceStatus) -> Result<(), MasterError> {
        let child = {
            let mut entries = self.lock();
            let entry = entries
                .get_mut(id)
                .ok_or_else(|| MasterError::UnknownInstance { id: id.to_owned() })?;
            if entry.record.status == InstanceStatus::Terminated {
                return Ok(());
            }
            let now = now_s();
            if to == InstanceStatus::Terminated {
                entry.record.terminated_at = Some(now);
                if let Some(stopped_at) = entry.record.stopped_at.take() {
                    entry.record.stopped_s += now - stopped_at;
                }
            } else if entry.record.stopped_at.is_none() {
                entry.record.stopped_at = Some(now);
            }
            entry.record.status = to;
            entry.child.take()
        };
        if let Some(mut child) = child {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            if tokio::time::timeout(Duration::from_secs(35), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        Ok(())
    }

    async fn boot(
        entries: Arc<Mutex<HashMap<String, Entry>>>,
        config: LocalConfig,
        id: String,
        model: String,
        instance_type: String,
        threads: usize,
        delay: Duration,
    ) {
        tokio::time::sleep(delay).await;
        let mut command = Command::new(&config.worker_bin);
        command
            .args([
                "--model",
                &model,
                "--port",
                "0",
                "--id",
                &id,
                "--master",
                &config.master_url,
            ])
            .args(["--threads", &threads.to_string()])
            .args(["--instance-type", &instance_type])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if let Some(zoo) = &config.zoo {
            command.arg("--zoo").arg(zoo);
        }
        if config.emulate_types {
            command
                .arg("--emulate-type")
                .args(["--emulate-scale", &config.emulate_scale.to_string()]);
        }
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "warn");
        }
        let started = command.spawn();
        let mut entries_now = entries.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = entries_now.get_mut(&id) else {
            return;
        };
        if entry.record.status != InstanceStatus::Provisioning {
            return; // stopped or terminated while provisioning; the child is dropped and killed
        }
        match started {
            Ok(mut child) => {
                if let Some(stdout) = child.stdout.take() {
                    // Drain stdout so the worker never blocks on a full pipe.
                    tokio::spawn(async move {
                        let mut lines = BufReader::new(stdout).lines();
                        while let Ok(Some(_)) = lines.next_line().await {}
                    });
                }
                entry.record.status = InstanceStatus::Running;
                entry.child = Some(child);
            }
            Err(e) => {
                tracing::error!(%id, error = %e, "cannot start the worker process");
                entry.record.status = InstanceStatus::Terminated;
                entry.record.terminated_at = Some(now_s());
            }
        }
    }
}

/// A stable number per instance id, so the chaos does not depend on map order.
fn instance_key(id: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    // SipHash with fixed keys: the same id gives the same key in every run.
    let mut hasher = std::hash::DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
}

impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<InstanceRecord, MasterError>> {
        async move {
            let id = format!("local-{:05}", self.next.fetch_add(1, Ordering::Relaxed));
            let record = InstanceRecord::provisioning(id.clone(), &spec);
            self.lock().insert(
                id.clone(),
                Entry {
                    record: record.clone(),
                    child: None,
                },
            );
            let threads =
                (spec.instance_type.vcpus as usize).clamp(1, self.config.max_threads.max(1));
            tokio::spawn(Self::boot(
                Arc::clone(&self.entries),
                self.config.clone(),
                id,
                spec.model,
                spec.instance_type.name.clone(),
                threads,
                self.config.provisioning_delay,
            ));
            Ok(record)
        }
        .boxed()
    }

    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        self.halt(id, InstanceStatus::Terminated).boxed()
    }

    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        self.halt(id, InstanceStatus::Stopped).boxed()
    }

    /// Resuming a stopped instance takes a quarter of a launch here: the paper's stopped
    /// burstable standbys resume in under 2 minutes (mark.txt §4.5).
    fn start<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        async move {
            let (model, instance_type, threads) = {
                let mut entries = self.lock();
                let entry = entries
                    .get_mut(id)
                    .ok_or_else(|| MasterError::UnknownInstance { id: id.to_owned() })?;
                let r = &mut entry.record;
                if r.status != InstanceStatus::Stopped {
                    return Err(MasterError::invalid("id", format!("`{id}` is not stopped")));
                }
                if let Some(stopped_at) = r.stopped_at.take() {
                    r.stopped_s += now_s() - stopped_at;
                }
                r.status = InstanceStatus::Provisioning;
                let vcpus = self
                    .catalog
                    .get(&r.instance_type)
                    .map_or(1, |t| t.vcpus as usize);
                (
                    r.model.clone(),
                    r.instance_type.clone(),
                    vcpus.clamp(1, self.config.max_threads.max(1)),
                )
            };
            tokio::spawn(Self::boot(
                Arc::clone(&self.entries),
                self.config.clone(),
                id.to_owned(),
                model,
                instance_type,
                threads,
                self.config.provisioning_delay / 4,
            ));
            Ok(())
        }
        .boxed()
    }

    /// Every instance; a running one whose worker process has exited shows as `Failed`.
    fn describe(&self) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        let mut entries = self.lock();
        for entry in entries.values_mut() {
            let exited = entry
                .child
                .as_mut()
                .is_some_and(|child| !matches!(child.try_wait(), Ok(None)));
            if exited && entry.record.status == InstanceStatus::Running {
                tracing::warn!(id = %entry.record.id, model = %entry.record.model, "worker process exited");
                entry.record.status = InstanceStatus::Failed;
                entry.child = None;
            }
        }
        let mut all: Vec<InstanceRecord> = entries.values().map(|e| e.record.clone()).collect();
        drop(entries);
        all.sort_by(|a, b| a.id.cmp(&b.id));
        async move { Ok(all) }.boxed()
    }

    fn spot_price(&self, ty: &InstanceType) -> f64 {
        self.prices.price(ty, self.started.elapsed().as_secs_f64())
    }

    fn interruptions(&self) -> Option<mpsc::Receiver<Interruption>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
