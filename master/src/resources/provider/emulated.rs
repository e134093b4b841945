//! A cloud emulated on this machine, shared by the `local` provider (each instance a
//! `cocktail-worker` process) and the `docker` provider (each a container): the instance
//! records and their billing, a provisioning delay, the spot price process, and spot
//! revocations with a notice, when the price rises above the bid or at a chaos rate. An
//! instance type is emulated by the worker's intra-op thread count (its vCPUs, capped by
//! this machine) and, with `emulate_types`, by its modelled speed. A [`Runtime`] starts
//! and stops each instance's worker.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cocktail_common::catalog::{
    Catalog, InstanceType, SpotPrices, SpotProcess, SpotReplay, unit_random,
};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use cocktail_common::auth::Secret;

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
    /// Workers answer each call no sooner than their instance type would
    /// (`--emulate-type`), so a mixed pool of local workers behaves like the types it
    /// stands for.
    pub emulate_types: bool,
    /// Emulated types run this many times slower than modelled (`--emulate-scale`).
    pub emulate_scale: f64,
    /// Given to every worker in its environment (never on its command line).
    pub cluster_secret: Option<Secret>,
    /// The cluster CA's certificate (PEM): workers get it in their environment and ask
    /// the master for their own certificate at start (`--cluster-tls`). `None`: plain
    /// HTTP (`--no-cluster-tls`).
    pub cluster_ca: Option<String>,
}

/// The worker one instance runs, as a [`Runtime`] starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    /// The instance id, which the worker registers under.
    pub id: String,
    pub model: String,
    pub instance_type: String,
    /// ONNX Runtime intra-op threads.
    pub threads: usize,
    /// The type's size, for runtimes that can limit a worker to it.
    pub vcpus: u32,
    pub memory_gib: f64,
}

impl WorkerSpec {
    /// The worker's flags every runtime passes; the runtime adds where it listens.
    pub fn args(&self, config: &LocalConfig, master_url: &str) -> Vec<String> {
        let mut args: Vec<String> = [
            "--model",
            &self.model,
            "--id",
            &self.id,
            "--master",
            master_url,
            "--threads",
            &self.threads.to_string(),
            "--instance-type",
            &self.instance_type,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if config.cluster_ca.is_some() {
            args.push("--cluster-tls".to_owned());
        }
        if config.emulate_types {
            args.extend([
                "--emulate-type".to_owned(),
                "--emulate-scale".to_owned(),
                config.emulate_scale.to_string(),
            ]);
        }
        args
    }
}

/// Runs instances' workers: processes on this host, or containers.
pub trait Runtime: Send + Sync + std::fmt::Debug + 'static {
    /// A running worker.
    type Worker: Send + std::fmt::Debug + 'static;
    fn name(&self) -> &'static str;
    /// The host the worker of instance `id` listens on, as the master reaches it.
    fn host(&self, id: &str) -> String;
    /// Starts the worker of one instance.
    fn start<'a>(
        &'a self,
        config: &'a LocalConfig,
        spec: &'a WorkerSpec,
    ) -> BoxFuture<'a, Result<Self::Worker, MasterError>>;
    /// Stops it: SIGTERM (the worker drains and deregisters), a grace period, then kill;
    /// nothing of it is left.
    fn stop(&self, worker: Self::Worker) -> BoxFuture<'_, ()>;
    /// Whether it has exited on its own.
    fn exited(&self, worker: &mut Self::Worker) -> bool;
    /// Removes every worker this runtime started that is still there (the master stops).
    fn sweep(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[derive(Debug)]
struct Entry<W> {
    record: InstanceRecord,
    worker: Option<W>,
}

type Entries<W> = Arc<Mutex<HashMap<String, Entry<W>>>>;

/// The emulated cloud over a [`Runtime`].
#[derive(Debug)]
pub struct Emulated<R: Runtime> {
    config: LocalConfig,
    runtime: Arc<R>,
    catalog: Catalog,
    prices: Box<dyn SpotPrices>,
    started: Instant,
    entries: Entries<R::Worker>,
    next: AtomicU64,
    events: Mutex<Option<mpsc::Receiver<Interruption>>>,
    notify: mpsc::Sender<Interruption>,
    /// The boots under way, which [`Provider::close`] waits for: a worker whose start was
    /// in flight when the master began to stop would otherwise outlive it.
    boots: TaskTracker,
}

/// How long closing waits for boots under way.
const BOOTS_WAIT: Duration = Duration::from_secs(10);

/// The local provider: each instance a worker process on this host.
pub type LocalProvider = Emulated<crate::resources::provider::local::Processes>;

impl<R: Runtime> Emulated<R> {
    /// Creates the provider and starts its revocation watch, which ends when `shutdown`
    /// is cancelled (or the provider is dropped); call inside Tokio.
    pub fn start(
        config: LocalConfig,
        runtime: R,
        catalog: Catalog,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, MasterError> {
        let (notify, events) = mpsc::channel(1024);
        let prices: Box<dyn SpotPrices> = match &config.spot_history {
            Some(path) => Box::new(SpotReplay::load(path)?),
            None => Box::new(SpotProcess::new(catalog.spot, config.seed)),
        };
        let provider = Arc::new(Self {
            prices,
            runtime: Arc::new(runtime),
            catalog,
            started: Instant::now(),
            entries: Arc::new(Mutex::new(HashMap::new())),
            next: AtomicU64::new(1),
            events: Mutex::new(Some(events)),
            notify,
            config,
            boots: TaskTracker::new(),
        });
        let watcher = Arc::downgrade(&provider);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let mut counter = 0_u64;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = shutdown.cancelled() => return,
                }
                let Some(provider) = watcher.upgrade() else {
                    return;
                };
                counter += 1;
                provider.revocations(counter);
            }
        });
        Ok(provider)
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<String, Entry<R::Worker>>> {
        self.entries.lock()
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

    /// Stops the instance's worker (it drains and deregisters first); the instance ends
    /// `Terminated`, or `Stopped` to be started again.
    async fn halt(&self, id: &str, to: InstanceStatus) -> Result<(), MasterError> {
        let worker = {
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
            entry.worker.take()
        };
        if let Some(worker) = worker {
            self.runtime.stop(worker).await;
        }
        Ok(())
    }

    /// After `delay`, starts the instance's worker, unless it was stopped or terminated
    /// meanwhile.
    async fn boot(
        runtime: Arc<R>,
        entries: Entries<R::Worker>,
        config: LocalConfig,
        spec: WorkerSpec,
        delay: Duration,
    ) {
        tokio::time::sleep(delay).await;
        let provisioning = entries
            .lock()
            .get(&spec.id)
            .is_some_and(|e| e.record.status == InstanceStatus::Provisioning);
        if !provisioning {
            return; // Stopped or terminated while it waited: nothing to start.
        }
        let started = runtime.start(&config, &spec).await;
        let stray = {
            let mut entries_now = entries.lock();
            let Some(entry) = entries_now.get_mut(&spec.id) else {
                return;
            };
            match started {
                // Stopped or terminated while provisioning: the worker must go again.
                Ok(worker) if entry.record.status != InstanceStatus::Provisioning => Some(worker),
                Ok(worker) => {
                    entry.record.status = InstanceStatus::Running;
                    entry.worker = Some(worker);
                    None
                }
                Err(e) => {
                    tracing::error!(id = %spec.id, error = %e, "cannot start the worker");
                    entry.record.status = InstanceStatus::Terminated;
                    entry.record.terminated_at = Some(now_s());
                    None
                }
            }
        };
        if let Some(worker) = stray {
            runtime.stop(worker).await;
        }
    }

    fn spec(&self, id: &str, model: &str, ty: &InstanceType) -> WorkerSpec {
        WorkerSpec {
            id: id.to_owned(),
            model: model.to_owned(),
            instance_type: ty.name.clone(),
            threads: (ty.vcpus as usize).clamp(1, self.config.max_threads.max(1)),
            vcpus: ty.vcpus,
            memory_gib: ty.memory_gib,
        }
    }

    fn spawn_boot(&self, spec: WorkerSpec, delay: Duration) {
        self.boots.spawn(Self::boot(
            Arc::clone(&self.runtime),
            Arc::clone(&self.entries),
            self.config.clone(),
            spec,
            delay,
        ));
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

impl<R: Runtime> Provider for Emulated<R> {
    fn name(&self) -> &'static str {
        self.runtime.name()
    }

    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        async move {
            let id = format!(
                "{}-{:05}",
                self.runtime.name(),
                self.next.fetch_add(1, Ordering::Relaxed)
            );
            let record = InstanceRecord {
                host: Some(self.runtime.host(&id)),
                ..InstanceRecord::provisioning(id.clone(), &spec)
            };
            self.lock().insert(
                id.clone(),
                Entry {
                    record: record.clone(),
                    worker: None,
                },
            );
            let worker = self.spec(&id, &spec.model, &spec.instance_type);
            self.spawn_boot(worker, self.config.provisioning_delay);
            Ok(vec![record])
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
    /// burstable standbys resume in under 2 minutes (MArk §4.5).
    fn start<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        async move {
            let (model, instance_type) = {
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
                (r.model.clone(), r.instance_type.clone())
            };
            let ty = self.catalog.get(&instance_type).cloned().ok_or_else(|| {
                MasterError::invalid(
                    "instance_type",
                    format!("`{instance_type}` is not in the catalog"),
                )
            })?;
            let worker = self.spec(id, &model, &ty);
            self.spawn_boot(worker, self.config.provisioning_delay / 4);
            Ok(())
        }
        .boxed()
    }

    /// Every instance; a running one whose worker has exited shows as `Failed`.
    fn describe(&self) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        let mut entries = self.lock();
        for entry in entries.values_mut() {
            let exited = entry
                .worker
                .as_mut()
                .is_some_and(|worker| self.runtime.exited(worker));
            if exited && entry.record.status == InstanceStatus::Running {
                tracing::warn!(id = %entry.record.id, model = %entry.record.model, "worker exited");
                entry.record.status = InstanceStatus::Failed;
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
        self.events.lock().take()
    }

    /// Waits for the boots under way (each stops the worker it started for an instance
    /// terminated meanwhile), then sweeps what is left.
    fn close(&self) -> BoxFuture<'_, ()> {
        async move {
            self.boots.close();
            if tokio::time::timeout(BOOTS_WAIT, self.boots.wait())
                .await
                .is_err()
            {
                tracing::warn!("boots still under way at close");
            }
            self.runtime.sweep().await;
        }
        .boxed()
    }
}
