//! The worker instances the master knows, grouped in one pool per model, and the slots
//! the load balancer hands out ([`cocktail_policy::packing`]).
//!
//! Workers register and heartbeat (`common::control`). An instance that misses
//! [`MISSED_HEARTBEATS`] heartbeats is dropped by [`Registry::expire`]; one that refuses
//! connections is marked down until its next heartbeat; one that leaves
//! [`UNANSWERED_LIMIT`] calls in a row unanswered (hung, or stopped) gets no work until
//! its next heartbeat; a draining one (spot notice, SIGTERM) gets no new work. The
//! resource controller reads the same signals ([`Registry::health`]) to replace the
//! instances that stay that way.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::MasterError;
use cocktail_common::control::{MISSED_HEARTBEATS, Registration};
use cocktail_common::latency::HopSlots;
use parking_lot::{Mutex, RwLock};

mod instance;
mod line;
mod pool;
#[cfg(test)]
mod tests;

pub use instance::{Instance, UNANSWERED_LIMIT};
pub use pool::{Backlog, Lease, NoSlot, Pool, RECENT_BATCHES, Speed};

/// All pools, by model name.
#[derive(Debug, Default)]
pub struct Registry {
    pools: RwLock<HashMap<String, Arc<Pool>>>,
    /// Each model's speed per instance type, for pools that mix types (replaced by a
    /// zoo reload; a pool keeps the speed it was made with).
    speeds: RwLock<HashMap<String, Arc<Speed>>>,
    hop_slots: HopSlots,
}

/// What the registry measures of each model's response time ([`Registry::response_times`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResponseTimes {
    pub inference_ms: Vec<Option<f64>>,
    pub overhead_ms: Vec<Option<f64>>,
    pub prior: Option<f64>,
}

/// What `GET /v1/workers` shows per instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct InstanceView {
    pub id: String,
    pub model: String,
    pub url: String,
    pub packing_factor: u32,
    pub burst: bool,
    pub instance_type: Option<String>,
    pub in_flight: u32,
    pub draining: bool,
    pub down: bool,
    /// Calls in a row it left unanswered; at [`UNANSWERED_LIMIT`] it gets no work until
    /// its next heartbeat.
    pub unanswered: u32,
    pub last_seen_ms: u64,
    /// Milliseconds since a request last took one of its slots.
    pub idle_ms: u64,
}

impl Registry {
    /// A registry whose mixed-type pools use Kairos' matching with these speeds.
    pub fn with_speeds(speeds: HashMap<String, Arc<Speed>>) -> Self {
        Self {
            pools: RwLock::default(),
            speeds: RwLock::new(speeds),
            hop_slots: HopSlots::default(),
        }
    }

    /// Instances of quick models registered from now on take as many calls at once as
    /// fit with `slots.hop` counted ([`Pool::slots`]).
    pub fn counting_hop(self, slots: HopSlots) -> Self {
        Self {
            hop_slots: slots,
            ..self
        }
    }

    /// The speeds of a reloaded zoo, for the pools made from now on.
    pub fn set_speeds(&self, speeds: HashMap<String, Arc<Speed>>) {
        *self.speeds.write() = speeds;
    }

    pub fn pool(&self, model: &str) -> Option<Arc<Pool>> {
        self.pools.read().get(model).cloned()
    }

    /// `model`'s speed per instance type, when its profile gives one.
    pub fn speed(&self, model: &str) -> Option<Arc<Speed>> {
        self.speeds.read().get(model).cloned()
    }

    /// Adds or replaces an instance (a worker registering again keeps its id). 422 naming
    /// `url` when it does not make a URL to call.
    pub fn register(&self, registration: &Registration) -> Result<(), MasterError> {
        let url = registration.url.trim_end_matches('/').to_owned();
        let infer = format!("{url}/v2/models/{}/infer", registration.model);
        let infer_url = callable(&infer)?;
        self.remove(&registration.id);
        let pool = {
            let mut pools = self.pools.write();
            Arc::clone(pools.entry(registration.model.clone()).or_insert_with(|| {
                Arc::new(Pool::new(
                    self.speeds.read().get(&registration.model).cloned(),
                ))
            }))
        };
        let slots = pool.slots(registration, self.hop_slots);
        let instance = Arc::new(Instance {
            id: registration.id.clone(),
            model: registration.model.clone(),
            infer_url,
            url,
            packing_factor: slots,
            burst: registration.burst,
            instance_type: registration.instance_type.clone(),
            in_flight: AtomicU32::new(0),
            draining: AtomicBool::new(false),
            down: AtomicBool::new(false),
            unanswered: AtomicU32::new(0),
            last_seen: Mutex::new(Instant::now()),
            last_used: Mutex::new(Instant::now()),
            line: crate::serving::dispatch::Line::default(),
        });
        pool.instances.write().push(instance);
        pool.changed();
        tracing::info!(id = %registration.id, model = %registration.model, url = %registration.url,
            packing_factor = registration.packing_factor, slots, "worker registered");
        Ok(())
    }

    fn find(&self, id: &str) -> Option<(Arc<Pool>, Arc<Instance>)> {
        let pools = self.pools.read();
        pools.values().find_map(|pool| {
            let instances = pool.instances.read();
            instances
                .iter()
                .find(|i| i.id == id)
                .map(|i| (Arc::clone(pool), Arc::clone(i)))
        })
    }

    /// Records a heartbeat; `false` when the instance is unknown (it must register).
    pub fn heartbeat(&self, id: &str, draining: bool) -> bool {
        let Some((pool, instance)) = self.find(id) else {
            return false;
        };
        *instance.last_seen.lock() = Instant::now();
        instance.down.store(false, Ordering::Release);
        instance.unanswered.store(0, Ordering::Release);
        if draining {
            instance.draining.store(true, Ordering::Release);
        }
        pool.changed();
        true
    }

    /// The instance will go away: no new work for it.
    pub fn drain(&self, id: &str) -> bool {
        let Some((pool, instance)) = self.find(id) else {
            return false;
        };
        instance.draining.store(true, Ordering::Release);
        // Waiters must look elsewhere (or learn that nothing is left).
        pool.changed();
        true
    }

    pub fn remove(&self, id: &str) -> bool {
        let Some((pool, _)) = self.find(id) else {
            return false;
        };
        pool.instances.write().retain(|i| i.id != id);
        pool.changed();
        true
    }

    /// Drops instances silent for [`MISSED_HEARTBEATS`] heartbeat periods.
    pub fn expire(&self, heartbeat: Duration) -> Vec<String> {
        let limit = heartbeat * MISSED_HEARTBEATS;
        let stale: Vec<String> = self
            .view()
            .into_iter()
            .filter(|i| Duration::from_millis(i.last_seen_ms) > limit)
            .map(|i| i.id)
            .collect();
        for id in &stale {
            tracing::warn!(id = %id, "worker missed {MISSED_HEARTBEATS} heartbeats; dropped");
            self.remove(id);
        }
        stale
    }

    pub fn view(&self) -> Vec<InstanceView> {
        let pools = self.pools.read();
        let mut all: Vec<InstanceView> = pools
            .values()
            .flat_map(|pool| pool.instances())
            .map(|i| InstanceView {
                id: i.id.clone(),
                model: i.model.clone(),
                url: i.url.clone(),
                packing_factor: i.packing_factor,
                burst: i.burst,
                instance_type: i.instance_type.clone(),
                in_flight: i.in_flight.load(Ordering::Acquire),
                draining: i.draining.load(Ordering::Acquire),
                down: i.down.load(Ordering::Acquire),
                unanswered: i.unanswered.load(Ordering::Acquire),
                last_seen_ms: i.last_seen.lock().elapsed().as_millis() as u64,
                idle_ms: i.last_used.lock().elapsed().as_millis() as u64,
            })
            .collect();
        all.sort_by(|a, b| a.model.cmp(&b.model).then(a.id.cmp(&b.id)));
        all
    }

    /// Whether an instance of `model` other than `id` can take work.
    pub fn serves_besides(&self, model: &str, id: &str) -> bool {
        self.pool(model).is_some_and(|p| {
            p.instances()
                .iter()
                .any(|i| i.id != id && i.slots().available)
        })
    }

    /// Per model of `models`, the predicted inference time on the fastest usable type
    /// and the measured member-call overhead, and the overhead to assume for pools not
    /// measured yet ([`cocktail_policy::response::prior`]): what
    /// [`cocktail_policy::response::predicted`] needs. The prior is the measured pools'
    /// median, and before any member call the readiness probes' (as the simulator, which
    /// has no probes, gives an unmeasured pool the measured ones' median).
    pub fn response_times(&self, models: &[String]) -> ResponseTimes {
        let pools = self.pools.read();
        let prior = cocktail_policy::response::prior(pools.values().map(|p| p.overhead_ms()))
            .or_else(|| cocktail_policy::response::prior(pools.values().map(|p| p.probe_ms())));
        let (inference_ms, overhead_ms) = models
            .iter()
            .map(|m| {
                pools.get(m).map_or((None, None), |p| {
                    (p.inference_estimate_ms(), p.overhead_ms())
                })
            })
            .unzip();
        ResponseTimes {
            inference_ms,
            overhead_ms,
            prior,
        }
    }

    /// `model`'s predicted inference time of one request on the fastest of `types` (catalog
    /// names), from its profile; `None` without a profile or a type the catalog knows.
    pub fn inference_on(&self, model: &str, types: &[String]) -> Option<f64> {
        let speed = self.speed(model)?;
        types
            .iter()
            .filter_map(|t| speed.catalog.get(t))
            .map(|ty| speed.latency.ms_on(ty, &speed.catalog.gpu, 1))
            .min_by(f64::total_cmp)
    }

    /// Per model of `models`, the overhead its predicted response time counts: its
    /// pool's measured one, else, once the pool's readiness probe answered, the prior;
    /// none before that.
    pub fn overheads(&self, models: &[String]) -> Vec<Option<f64>> {
        let times = self.response_times(models);
        let pools = self.pools.read();
        models
            .iter()
            .zip(times.overhead_ms)
            .map(|(m, measured)| measured.or_else(|| pools.get(m)?.probe_ms().and(times.prior)))
            .collect()
    }

    /// Whether some instance of `model` can take work now or soon.
    pub fn serves(&self, model: &str) -> bool {
        self.pool(model)
            .is_some_and(|p| p.instances().iter().any(|i| i.slots().available))
    }
}

/// `url` as a URI a member call can go to: absolute, `http` or `https`. 422 naming `url`
/// otherwise.
fn callable(url: &str) -> Result<http::Uri, MasterError> {
    let refused = |why: String| MasterError::invalid("url", format!("`{url}`: {why}"));
    let parsed = reqwest::Url::parse(url).map_err(|e| refused(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
        return Err(refused(
            "must be an http:// or https:// URL with a host".into(),
        ));
    }
    parsed
        .as_str()
        .parse()
        .map_err(|e: http::uri::InvalidUri| refused(e.to_string()))
}
