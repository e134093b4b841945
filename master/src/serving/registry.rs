//! The worker instances the master knows, grouped in one pool per model, and the slots
//! the load balancer hands out ([`crate::packing`]).
//!
//! Workers register and heartbeat (`common::control`). An instance that misses
//! [`MISSED_HEARTBEATS`] heartbeats is dropped by [`Registry::expire`]; one that refuses
//! connections is marked down until its next heartbeat; a draining one (spot notice,
//! SIGTERM) gets no new work.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use cocktail_common::control::{MISSED_HEARTBEATS, Registration};
use tokio::sync::Notify;

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
    in_flight: AtomicU32,
    draining: AtomicBool,
    down: AtomicBool,
    last_seen: Mutex<Instant>,
    /// When a request last took a slot (registration time before that).
    last_used: Mutex<Instant>,
}

impl Instance {
    fn slots(&self) -> Slots {
        Slots {
            packing_factor: self.packing_factor,
            in_flight: self.in_flight.load(Ordering::Acquire),
            available: !self.draining.load(Ordering::Acquire) && !self.down.load(Ordering::Acquire),
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
    pub fn mark_down(&self) {
        self.down.store(true, Ordering::Release);
    }
}

/// A pool: every instance serving one model, and the queue waiting for their slots.
#[derive(Debug, Default)]
pub struct Pool {
    instances: RwLock<Vec<Arc<Instance>>>,
    freed: Notify,
}

/// A slot on an instance, given back on drop.
#[derive(Debug)]
pub struct Lease {
    pub instance: Arc<Instance>,
    pool: Arc<Pool>,
}

impl Drop for Lease {
    fn drop(&mut self) {
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
    ) -> Result<Lease, NoSlot> {
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
                        return Ok(Lease {
                            instance: Arc::clone(instance),
                            pool: Arc::clone(self),
                        });
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
}

/// What `GET /v1/workers` shows per instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct InstanceView {
    pub id: String,
    pub model: String,
    pub url: String,
    pub packing_factor: u32,
    pub burst: bool,
    pub in_flight: u32,
    pub draining: bool,
    pub down: bool,
    pub last_seen_ms: u64,
    /// Milliseconds since a request last took one of its slots.
    pub idle_ms: u64,
}

impl Registry {
    pub fn pool(&self, model: &str) -> Option<Arc<Pool>> {
        self.pools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(model)
            .cloned()
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
            in_flight: AtomicU32::new(0),
            draining: AtomicBool::new(false),
            down: AtomicBool::new(false),
            last_seen: Mutex::new(Instant::now()),
            last_used: Mutex::new(Instant::now()),
        });
        self.remove(&registration.id);
        let pool = {
            let mut pools = self.pools.write().unwrap_or_else(|p| p.into_inner());
            Arc::clone(pools.entry(registration.model.clone()).or_default())
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
                in_flight: i.in_flight.load(Ordering::Acquire),
                draining: i.draining.load(Ordering::Acquire),
                down: i.down.load(Ordering::Acquire),
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
        }
    }

    #[tokio::test]
    async fn leases_pack_by_fewest_free_slots_and_queue_when_full() {
        let registry = Registry::default();
        registry.register(&registration("a", 2));
        registry.register(&registration("b", 2));
        let pool = registry.pool("m").unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        let first = pool.acquire(soon, &[]).await.unwrap();
        let second = pool.acquire(soon, &[]).await.unwrap();
        // The first instance fills before the second is used.
        assert_eq!(first.instance.id, second.instance.id);
        let third = pool.acquire(soon, &[]).await.unwrap();
        let fourth = pool.acquire(soon, &[]).await.unwrap();
        assert_ne!(third.instance.id, first.instance.id);
        assert_eq!(pool.acquire(soon, &[]).await.unwrap_err(), NoSlot::Timeout);
        // A slot given back wakes a waiter.
        let waiter = {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move {
                pool.acquire(Instant::now() + Duration::from_secs(5), &[])
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
        let first = pool.acquire(soon, &[]).await.unwrap();
        assert_eq!(first.instance.id, "a");
        let second = pool.acquire(soon, &[]).await.unwrap();
        assert_eq!(second.instance.id, "lambda", "a is full: spill");
        drop(first);
        assert_eq!(pool.acquire(soon, &[]).await.unwrap().instance.id, "a");
    }

    #[tokio::test]
    async fn draining_down_and_excluded_instances_get_no_work() {
        let registry = Registry::default();
        registry.register(&registration("a", 1));
        registry.register(&registration("b", 1));
        let pool = registry.pool("m").unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(registry.drain("a"));
        let lease = pool.acquire(soon, &[]).await.unwrap();
        assert_eq!(lease.instance.id, "b");
        let tried = [Arc::clone(&lease.instance)];
        drop(lease);
        assert_eq!(
            pool.acquire(soon, &tried).await.unwrap_err(),
            NoSlot::NoInstance
        );
        pool.instances()[1].mark_down();
        assert_eq!(
            pool.acquire(soon, &[]).await.unwrap_err(),
            NoSlot::NoInstance
        );
        // A heartbeat brings a down instance back; unknown ids must register.
        assert!(registry.heartbeat("b", false));
        assert!(pool.acquire(soon, &[]).await.is_ok());
        assert!(!registry.heartbeat("zz", false));
        assert!(registry.remove("b"));
        assert!(registry.expire(Duration::from_secs(60)).is_empty());
        assert_eq!(registry.view().len(), 1);
    }
}
