//! The worker instances the master knows, grouped in one pool per model, and the slots
//! the load balancer hands out ([`crate::packing`]).
//!
//! Workers register and heartbeat (`common::control`). An instance that misses
//! [`MISSED_HEARTBEATS`] heartbeats is dropped by [`Registry::expire`]; one that refuses
//! connections is marked down until its next heartbeat; one that leaves
//! [`UNANSWERED_LIMIT`] calls in a row unanswered (hung, or stopped) gets no work until
//! its next heartbeat; a draining one (spot notice, SIGTERM) gets no new work. The
//! resource controller reads the same signals ([`Registry::health`]) to replace the
//! instances that stay that way.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use cocktail_common::catalog::{Catalog, InstanceType};
use cocktail_common::control::{MISSED_HEARTBEATS, Registration};
use cocktail_common::latency::BatchLatency;
use tokio::sync::Notify;

use crate::kairos::{self, Server, Waiting};
use crate::packing::{self, Slots};

#[derive(Debug)]
pub struct Instance {
    pub id: String,
    pub model: String,
    pub url: String,
    /// `{url}/v2/models/{model}/infer`, built once.
    pub infer_url: String,
    pub packing_factor: u32,
    /// A burst instance serves only what the regular ones cannot take at once.
    pub burst: bool,
    /// Its instance type, when the worker said.
    pub instance_type: Option<String>,
    in_flight: AtomicU32,
    draining: AtomicBool,
    down: AtomicBool,
    /// Calls in a row that got no answer in time (reset by an answer or a heartbeat).
    unanswered: AtomicU32,
    last_seen: Mutex<Instant>,
    /// When a request last took a slot (registration time before that).
    last_used: Mutex<Instant>,
}

impl Instance {
    fn slots(&self) -> Slots {
        Slots {
            packing_factor: self.packing_factor,
            in_flight: self.in_flight.load(Ordering::Acquire),
            available: !self.draining.load(Ordering::Acquire)
                && !self.down.load(Ordering::Acquire)
                && self.unanswered.load(Ordering::Acquire) < UNANSWERED_LIMIT,
        }
    }

    /// Takes a slot if one is free.
    fn try_take(&self) -> bool {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.packing_factor).then_some(n + 1)
            })
            .is_ok()
    }

    /// The instance refused a connection: no work until it heartbeats again.
    fn mark_down(&self) {
        self.down.store(true, Ordering::Release);
    }

    /// The worker answered (whatever it said): it is alive.
    fn answered(&self) {
        self.unanswered.store(0, Ordering::Release);
    }
}

/// Calls in a row an instance may leave unanswered before it gets no more work until its
/// next heartbeat: a hung worker (SIGSTOP, a stuck runtime) stops taking requests within
/// a few calls instead of eating every request's deadline.
pub const UNANSWERED_LIMIT: u32 = 3;

/// A pool: every instance serving one model, and the queue waiting for their slots.
#[derive(Debug, Default)]
pub struct Pool {
    instances: RwLock<Vec<Arc<Instance>>>,
    freed: Notify,
    /// The model's batch latency, for Kairos' matching on pools that mix types.
    speed: Option<Arc<Speed>>,
    /// Requests waiting for a slot on a mixed pool, oldest first.
    waiting: Mutex<Vec<Waiter>>,
    next_waiter: std::sync::atomic::AtomicU64,
    /// Items per request of the last [`RECENT_BATCHES`] requests (kairos.txt §5.2 keeps
    /// "a number of most recent queries" for the batch-size mix). Allocated whole when
    /// the pool is made, so a long-running master's memory does not creep up as it fills;
    /// a batch is at most `MAX_ITEMS` (64), so `u16` holds it.
    recent: Mutex<std::collections::VecDeque<u16>>,
    /// The pool has received batches of different sizes: Kairos' matching applies.
    varying: AtomicBool,
    /// Moving average of a call's time from sending to the worker's answer, in µs (0:
    /// none yet), for the dispatcher's hedging.
    call_us: std::sync::atomic::AtomicU64,
}

/// Requests whose batch sizes a pool remembers.
pub const RECENT_BATCHES: usize = 10_000;

/// What the master knows of a model's speed on each instance type.
#[derive(Debug)]
pub struct Speed {
    pub latency: BatchLatency,
    pub catalog: Arc<Catalog>,
}

#[derive(Debug, Clone, Copy)]
struct Waiter {
    id: u64,
    items: usize,
    since: Instant,
    deadline: Instant,
}

/// Leaves the waiting list when the request gets its slot, times out or is dropped.
struct Ticket<'a> {
    pool: &'a Pool,
    id: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.pool
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|w| w.id != self.id);
        self.pool.freed.notify_waiters();
    }
}

/// At most this many of the oldest waiting requests enter one matching.
const MATCH_WINDOW: usize = 64;

/// A slot on an instance, given back on drop. A call sent on it that ends without an
/// answer (timed out, or abandoned for a hedge that answered first) counts against the
/// instance ([`UNANSWERED_LIMIT`]).
#[derive(Debug)]
pub struct Lease {
    pub instance: Arc<Instance>,
    pool: Arc<Pool>,
    sent: Option<Instant>,
}

impl Lease {
    fn new(instance: &Arc<Instance>, pool: &Arc<Pool>) -> Self {
        Self {
            instance: Arc::clone(instance),
            pool: Arc::clone(pool),
            sent: None,
        }
    }

    /// A call goes out on this slot.
    pub fn sent(&mut self) {
        self.sent = Some(Instant::now());
    }

    /// The worker answered the call (any status): the instance is alive, and the pool
    /// learns how long its calls take.
    pub fn answered(&mut self) {
        if let Some(sent) = self.sent.take() {
            self.instance.answered();
            self.pool.observe_call(sent.elapsed());
        }
    }

    /// The instance refused the connection: not hung but gone (or not up yet); no work
    /// until it heartbeats again.
    pub fn refused(&mut self) {
        self.sent = None;
        self.instance.mark_down();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.sent.is_some() {
            let misses = self.instance.unanswered.fetch_add(1, Ordering::AcqRel) + 1;
            if misses == UNANSWERED_LIMIT {
                tracing::warn!(id = %self.instance.id, model = %self.instance.model,
                    "{UNANSWERED_LIMIT} calls in a row unanswered: no work until its next heartbeat");
            }
        }
        self.instance.in_flight.fetch_sub(1, Ordering::AcqRel);
        // Every waiter looks again: the freed slot may be on an instance one of them has
        // already tried, so waking only one could strand the others.
        self.pool.freed.notify_waiters();
    }
}

/// Why no slot was handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoSlot {
    /// No usable instance (none registered, or all excluded, draining or down).
    NoInstance,
    /// Every usable instance stayed full until the deadline.
    Timeout,
}

impl Pool {
    /// Waits in this pool's queue for a slot until `deadline`; instances in `exclude`
    /// (already tried by this request) are skipped.
    pub async fn acquire(
        self: &Arc<Self>,
        deadline: Instant,
        exclude: &[Arc<Instance>],
        items: usize,
    ) -> Result<Lease, NoSlot> {
        let matched = self.varying.load(Ordering::Relaxed) && self.mixed(exclude);
        if let Some(speed) = self.speed.as_ref().filter(|_| matched) {
            return self.acquire_matched(speed, deadline, exclude, items).await;
        }
        loop {
            // Register interest before looking, so a slot freed meanwhile is not missed.
            let mut notified = pin!(self.freed.notified());
            notified.as_mut().enable();
            let mut usable = false;
            {
                let instances = self.instances.read().unwrap_or_else(|p| p.into_inner());
                let candidates: Vec<&Arc<Instance>> = instances
                    .iter()
                    .filter(|i| !exclude.iter().any(|e| Arc::ptr_eq(e, i)))
                    .collect();
                let slots: Vec<Slots> = candidates.iter().map(|i| i.slots()).collect();
                usable |= slots.iter().any(|s| s.available);
                // Regular instances first; a request that would have to wait spills to
                // the burst instances (MArk's Lambda) while they have a free slot.
                let in_tier = |burst: bool| {
                    slots.iter().zip(&candidates).map(move |(s, i)| Slots {
                        available: s.available && i.burst == burst,
                        ..*s
                    })
                };
                let regular = packing::choose(in_tier(false));
                let spill = regular
                    .is_none()
                    .then(|| packing::choose(in_tier(true)))
                    .flatten();
                if let Some(choice) = regular.or(spill) {
                    let instance = candidates[choice];
                    if spill.is_some() {
                        metrics::counter!("cocktail_master_burst_spills_total", "model" => instance.model.clone())
                            .increment(1);
                    }
                    if instance.try_take() {
                        *instance.last_used.lock().unwrap_or_else(|p| p.into_inner()) =
                            Instant::now();
                        return Ok(Lease::new(instance, self));
                    }
                    // Lost a race for the slot: look again at once.
                    continue;
                }
            }
            if !usable {
                return Err(NoSlot::NoInstance);
            }
            let wait = tokio::time::timeout_at(deadline.into(), notified).await;
            if wait.is_err() {
                return Err(NoSlot::Timeout);
            }
        }
    }

    /// Whether the usable regular instances span more than one known type.
    fn mixed(&self, exclude: &[Arc<Instance>]) -> bool {
        let instances = self.instances.read().unwrap_or_else(|p| p.into_inner());
        let mut types = instances
            .iter()
            .filter(|i| !i.burst && !exclude.iter().any(|e| Arc::ptr_eq(e, i)))
            .filter_map(|i| i.instance_type.as_deref());
        types
            .next()
            .is_some_and(|first| types.any(|other| other != first))
    }

    /// Kairos' query distribution (kairos.txt §5.1), for pools that mix types and receive
    /// batches of varying size (single requests keep the packing of Cocktail §4.2.1).
    /// Every waiting request, this one included, is matched to an instance by min-cost
    /// bipartite matching on its batch's latency on the instance's type
    /// ([`kairos::distribute`]); this request takes its slot when its match has one free,
    /// else waits for the next change (a slot freed, a request arrived) and matches again.
    /// Matched to a busy instance, it waits for that instance rather than take one where
    /// it would miss its deadline.
    async fn acquire_matched(
        self: &Arc<Self>,
        speed: &Speed,
        deadline: Instant,
        exclude: &[Arc<Instance>],
        items: usize,
    ) -> Result<Lease, NoSlot> {
        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let since = Instant::now();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Waiter {
                id,
                items: items.max(1),
                since,
                deadline,
            });
        let _ticket = Ticket { pool: self, id };
        self.freed.notify_waiters();
        loop {
            let mut notified = pin!(self.freed.notified());
            notified.as_mut().enable();
            let now = Instant::now();
            let candidates: Vec<Arc<Instance>> = self
                .instances()
                .into_iter()
                .filter(|i| !i.burst && !exclude.iter().any(|e| Arc::ptr_eq(e, i)))
                .filter(|i| i.slots().available)
                .collect();
            if candidates.is_empty() {
                return Err(NoSlot::NoInstance);
            }
            let types: Vec<Option<&InstanceType>> = candidates
                .iter()
                .map(|i| {
                    i.instance_type
                        .as_deref()
                        .and_then(|t| speed.catalog.get(t))
                })
                .collect();
            let latency_ms = |j: usize, batch: usize| match types.get(j).copied().flatten() {
                Some(ty) => speed.latency.ms_on(ty, &speed.catalog.gpu, batch),
                // An instance of an unknown type: as fast as the profiling host.
                None => speed.latency.host_ms(batch),
            };
            let waiting: Vec<Waiter> = {
                let all = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
                all.iter().take(MATCH_WINDOW).copied().collect()
            };
            let Some(me) = waiting.iter().position(|w| w.id == id) else {
                // Beyond the window: wait for the older ones to go.
                if tokio::time::timeout_at(deadline.into(), notified)
                    .await
                    .is_err()
                {
                    return Err(NoSlot::Timeout);
                }
                continue;
            };
            let mean_items = waiting.iter().map(|w| w.items).sum::<usize>() / waiting.len().max(1);
            // Each instance is its own "type" here: its coefficient and latency come from
            // its catalog type.
            let servers: Vec<Server> = candidates
                .iter()
                .enumerate()
                .map(|(j, i)| Server {
                    type_index: j,
                    busy_ms: if i.slots().in_flight < i.packing_factor {
                        0.0
                    } else {
                        latency_ms(j, mean_items.max(1))
                    },
                })
                .collect();
            // Definition 1: the latency ratio on the largest query the system serves.
            let coefficients = kairos::coefficients(
                &(0..candidates.len())
                    .map(|j| latency_ms(j, crate::request::MAX_ITEMS))
                    .collect::<Vec<_>>(),
            );
            let queries: Vec<Waiting> = waiting
                .iter()
                .map(|w| Waiting {
                    batch: w.items,
                    waited_ms: now.saturating_duration_since(w.since).as_secs_f64() * 1e3,
                })
                .collect();
            // Each request's own deadline is its target: scale so that `waited + L ≤ κT`
            // reads `now + L ≤ deadline` for this request.
            let qos_ms = waiting[me]
                .deadline
                .saturating_duration_since(waiting[me].since)
                .as_secs_f64()
                * 1e3
                / kairos::KAPPA;
            let plan = kairos::distribute(&queries, &servers, &coefficients, latency_ms, qos_ms);
            if let Some(j) = plan.get(me).copied().flatten()
                && let Some(instance) = candidates.get(j)
                && instance.try_take()
            {
                *instance.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                metrics::counter!("cocktail_master_matched_total", "model" => instance.model.clone())
                    .increment(1);
                return Ok(Lease::new(instance, self));
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                return Err(NoSlot::Timeout);
            }
        }
    }

    /// Folds one answered call's time into the pool's moving average (weight 1/8; a
    /// lost race between two calls only loses one sample).
    fn observe_call(&self, took: Duration) {
        let sample = (took.as_micros() as u64).max(1);
        let old = self.call_us.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.call_us.store(new.max(1), Ordering::Relaxed);
    }

    /// How long a call to this pool usually takes, once one has been answered.
    pub fn typical_call(&self) -> Option<Duration> {
        match self.call_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// Remembers a request's batch size (once per request, not per attempt).
    pub fn record_batch(&self, items: usize) {
        let items = u16::try_from(items.max(1)).unwrap_or(u16::MAX);
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.back().is_some_and(|&last| last != items) {
            self.varying.store(true, Ordering::Relaxed);
        }
        if recent.len() == RECENT_BATCHES {
            recent.pop_front();
        }
        recent.push_back(items);
    }

    /// Batch sizes of the recent requests, oldest first.
    pub fn recent_batches(&self) -> Vec<usize> {
        self.recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|&items| usize::from(items))
            .collect()
    }

    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.instances
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// All pools, by model name.
#[derive(Debug, Default)]
pub struct Registry {
    pools: RwLock<HashMap<String, Arc<Pool>>>,
    /// Each model's speed per instance type, for pools that mix types.
    speeds: HashMap<String, Arc<Speed>>,
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
            speeds,
        }
    }

    pub fn pool(&self, model: &str) -> Option<Arc<Pool>> {
        self.pools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .cloned()
    }

    /// `model`'s speed per instance type, when its profile gives one.
    pub fn speed(&self, model: &str) -> Option<Arc<Speed>> {
        self.speeds.get(model).cloned()
    }

    /// Adds or replaces an instance (a worker registering again keeps its id).
    pub fn register(&self, registration: &Registration) {
        let url = registration.url.trim_end_matches('/').to_owned();
        let instance = Arc::new(Instance {
            id: registration.id.clone(),
            model: registration.model.clone(),
            infer_url: format!("{url}/v2/models/{}/infer", registration.model),
            url,
            packing_factor: registration.packing_factor.max(1),
            burst: registration.burst,
            instance_type: registration.instance_type.clone(),
            in_flight: AtomicU32::new(0),
            draining: AtomicBool::new(false),
            down: AtomicBool::new(false),
            unanswered: AtomicU32::new(0),
            last_seen: Mutex::new(Instant::now()),
            last_used: Mutex::new(Instant::now()),
        });
        self.remove(&registration.id);
        let pool = {
            let mut pools = self.pools.write().unwrap_or_else(|p| p.into_inner());
            Arc::clone(pools.entry(registration.model.clone()).or_insert_with(|| {
                Arc::new(Pool {
                    speed: self.speeds.get(&registration.model).cloned(),
                    recent: Mutex::new(std::collections::VecDeque::with_capacity(RECENT_BATCHES)),
                    ..Pool::default()
                })
            }))
        };
        pool.instances
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(instance);
        pool.freed.notify_waiters();
        tracing::info!(id = %registration.id, model = %registration.model, url = %registration.url,
            packing_factor = registration.packing_factor, "worker registered");
    }

    fn find(&self, id: &str) -> Option<(Arc<Pool>, Arc<Instance>)> {
        let pools = self.pools.read().unwrap_or_else(|p| p.into_inner());
        pools.values().find_map(|pool| {
            let instances = pool.instances.read().unwrap_or_else(|p| p.into_inner());
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
        *instance.last_seen.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        instance.down.store(false, Ordering::Release);
        instance.unanswered.store(0, Ordering::Release);
        if draining {
            instance.draining.store(true, Ordering::Release);
        }
        pool.freed.notify_waiters();
        true
    }

    /// The instance will go away: no new work for it.
    pub fn drain(&self, id: &str) -> bool {
        let Some((pool, instance)) = self.find(id) else {
            return false;
        };
        instance.draining.store(true, Ordering::Release);
        // Waiters must look elsewhere (or learn that nothing is left).
        pool.freed.notify_waiters();
        true
    }

    pub fn remove(&self, id: &str) -> bool {
        let Some((pool, _)) = self.find(id) else {
            return false;
        };
        pool.instances
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|i| i.id != id);
        pool.freed.notify_waiters();
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
        let pools = self.pools.read().unwrap_or_else(|p| p.into_inner());
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
                last_seen_ms: i
                    .last_seen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .elapsed()
                    .as_millis() as u64,
                idle_ms: i
                    .last_used
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .elapsed()
                    .as_millis() as u64,
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

    /// Whether some instance of `model` can take work now or soon.
    pub fn serves(&self, model: &str) -> bool {
        self.pool(model)
            .is_some_and(|p| p.instances().iter().any(|i| i.slots().available))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(id: &str, pf: u32) -> Registration {
        Registration {
            id: id.into(),
            model: "m".into(),
            url: format!("http://{id}"),
            packing_factor: pf,
            queue_items: 0,
            threads: 1,
            burst: false,
            instance_type: None,
        }
    }

    #[tokio::test]
    async fn leases_pack_by_fewest_free_slots_and_queue_when_full() {
        let registry = Registry::default();
        registry.register(&registration("a", 2));
        registry.register(&registration("b", 2));
        let pool = registry.pool("m").unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        let first = pool.acquire(soon, &[], 1).await.unwrap();
        let second = pool.acquire(soon, &[], 1).await.unwrap();
        // The first instance fills before the second is used.
        assert_eq!(first.instance.id, second.instance.id);
        let third = pool.acquire(soon, &[], 1).await.unwrap();
        let fourth = pool.acquire(soon, &[], 1).await.unwrap();
        assert_ne!(third.instance.id, first.instance.id);
        assert_eq!(
            pool.acquire(soon, &[], 1).await.unwrap_err(),
            NoSlot::Timeout
        );
        // A slot given back wakes a waiter.
        let waiter = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move {
                pool.acquire(Instant::now() + Duration::from_secs(5), &[], 1)
                    .await
                    .map(|l| l.instance.id.clone())
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(fourth);
        assert_eq!(waiter.await.unwrap().unwrap(), third.instance.id);
        drop((first, second));
    }

    #[tokio::test]
    async fn requests_spill_to_burst_instances_only_when_the_regular_ones_are_full() {
        let registry = Registry::default();
        registry.register(&Registration {
            burst: true,
            ..registration("lambda", 4)
        });
        registry.register(&registration("a", 1));
        let pool = registry.pool("m").unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        let first = pool.acquire(soon, &[], 1).await.unwrap();
        assert_eq!(first.instance.id, "a");
        let second = pool.acquire(soon, &[], 1).await.unwrap();
        assert_eq!(second.instance.id, "lambda", "a is full: spill");
        drop(first);
        assert_eq!(pool.acquire(soon, &[], 1).await.unwrap().instance.id, "a");
    }

    #[tokio::test]
    async fn draining_down_and_excluded_instances_get_no_work() {
        let registry = Registry::default();
        registry.register(&registration("a", 1));
        registry.register(&registration("b", 1));
        let pool = registry.pool("m").unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(registry.drain("a"));
        let lease = pool.acquire(soon, &[], 1).await.unwrap();
        assert_eq!(lease.instance.id, "b");
        let tried = [Arc::clone(&lease.instance)];
        drop(lease);
        assert_eq!(
            pool.acquire(soon, &tried, 1).await.unwrap_err(),
            NoSlot::NoInstance
        );
        pool.instances()[1].mark_down();
        assert_eq!(
            pool.acquire(soon, &[], 1).await.unwrap_err(),
            NoSlot::NoInstance
        );
        // A heartbeat brings a down instance back; unknown ids must register.
        assert!(registry.heartbeat("b", false));
        assert!(pool.acquire(soon, &[], 1).await.is_ok());
        assert!(!registry.heartbeat("zz", false));
        assert!(registry.remove("b"));
        assert!(registry.expire(Duration::from_secs(60)).is_empty());
        assert_eq!(registry.view().len(), 1);
    }

    #[tokio::test]
    async fn an_instance_that_leaves_calls_unanswered_gets_no_work_until_it_heartbeats() {
        let registry = Registry::default();
        registry.register(&registration("a", 4));
        let pool = registry.pool("m").unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        for _ in 0..UNANSWERED_LIMIT - 1 {
            let mut lease = pool.acquire(soon, &[], 1).await.unwrap();
            lease.sent(); // ... and dropped without an answer (timed out, or hedged)
        }
        // An answer resets the count; a lease never used for a call counts nothing.
        let mut answered = pool.acquire(soon, &[], 1).await.unwrap();
        answered.sent();
        answered.answered();
        drop(answered);
        drop(pool.acquire(soon, &[], 1).await.unwrap());
        assert_eq!(registry.view()[0].unanswered, 0);
        assert!(pool.typical_call().is_some(), "the answered call was timed");
        for _ in 0..UNANSWERED_LIMIT {
            pool.acquire(soon, &[], 1).await.unwrap().sent();
        }
        assert_eq!(registry.view()[0].unanswered, UNANSWERED_LIMIT);
        assert_eq!(
            pool.acquire(soon, &[], 1).await.unwrap_err(),
            NoSlot::NoInstance
        );
        assert!(!registry.serves("m"));
        // Refused is not hung: down, and the count stays.
        assert!(registry.heartbeat("a", false));
        let mut refused = pool.acquire(soon, &[], 1).await.unwrap();
        refused.sent();
        refused.refused();
        drop(refused);
        assert_eq!(registry.view()[0].unanswered, 0);
        assert!(registry.view()[0].down);
        assert!(registry.heartbeat("a", false));
        assert!(registry.serves("m"));
    }

    /// A pool of a GPU and a small CPU instance (kairos.txt Fig. 5): a large batch is
    /// matched to the GPU even while the CPU is free, a small one takes the CPU.
    #[tokio::test]
    async fn mixed_pools_match_batches_to_the_type_that_meets_the_deadline() {
        let catalog = Arc::new(Catalog::embedded().unwrap());
        let speed = Arc::new(Speed {
            // resnet-like: 10 µs fixed, 190 µs per item on one host core.
            latency: BatchLatency {
                fixed_us: 10.0,
                per_item_us: 190.0,
            },
            catalog,
        });
        let registry = Registry::with_speeds(HashMap::from([("m".to_owned(), speed)]));
        registry.register(&Registration {
            instance_type: Some("r5n.large".into()),
            ..registration("cpu", 1)
        });
        registry.register(&Registration {
            instance_type: Some("g4dn.xlarge".into()),
            ..registration("gpu", 1)
        });
        let pool = registry.pool("m").unwrap();
        assert!(pool.mixed(&[]));
        pool.record_batch(1);
        pool.record_batch(128);
        // 128 items: ~14 ms on r5n.large, ~2 ms on the GPU; a 5 ms deadline.
        let within = |ms: u64| Instant::now() + Duration::from_millis(ms);
        let large = pool.acquire(within(5), &[], 128).await.unwrap();
        assert_eq!(large.instance.id, "gpu");
        drop(large);
        let small = pool.acquire(within(50), &[], 1).await.unwrap();
        assert_eq!(
            small.instance.id, "cpu",
            "1 item: 0.1 ms on the CPU, 1 ms on the GPU"
        );
        // With the GPU taken, the large batch waits for it rather than take the CPU.
        let _held = pool.acquire(within(5), &[], 128).await.unwrap();
        drop(small);
        let waited = pool.acquire(within(5), &[], 128).await;
        assert_eq!(waited.unwrap_err(), NoSlot::Timeout);
        assert!(!Registry::default().pool("m").is_some_and(|p| p.mixed(&[])));
    }
}
