//! A model's pool: its instances, the queue waiting for their slots (Kairos' matching
//! on pools that mix types) and the slot a request holds while it calls a worker.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cocktail_common::catalog::{Catalog, InstanceType};
use cocktail_common::latency::{BatchLatency, HopSlots};
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;

use cocktail_policy::kairos::{self, Server, Waiting};
use cocktail_policy::packing::{self, Slots};
use cocktail_policy::response::Overhead;

use super::line::{InLine, Line};
use super::{Instance, UNANSWERED_LIMIT};
use cocktail_common::control::Registration;

/// A pool: every instance serving one model, and the queue waiting for their slots.
#[derive(Debug, Default)]
pub struct Pool {
    pub(super) instances: RwLock<Vec<Arc<Instance>>>,
    /// Wakes the calls waiting for a slot on a pool that mixes types (Kairos' matching
    /// runs again); calls on other pools wait in [`Line`], woken one per freed slot.
    pub(super) freed: Notify,
    /// The model's batch latency, for Kairos' matching on pools that mix types.
    pub(super) speed: Option<Arc<Speed>>,
    /// Requests waiting for a slot on a mixed pool, oldest first.
    waiting: Mutex<Vec<Waiter>>,
    next_waiter: std::sync::atomic::AtomicU64,
    /// Items per request of the last [`RECENT_BATCHES`] requests (Kairos §5.2 keeps
    /// "a number of most recent queries" for the batch-size mix). Allocated whole when
    /// the pool is made, so a long-running master's memory does not creep up as it fills;
    /// a batch is at most `MAX_ITEMS` (64), so `u16` holds it.
    recent: Mutex<std::collections::VecDeque<u16>>,
    /// The pool has received batches of different sizes: Kairos' matching applies.
    varying: AtomicBool,
    /// Moving average of a call's time from sending to the worker's answer, in µs (0:
    /// none yet), for the dispatcher's hedging.
    call_us: std::sync::atomic::AtomicU64,
    /// What a member call takes beyond inference (waiting for a slot, the hop, the
    /// worker's queue), for selection's predicted response time.
    overhead: Mutex<Overhead>,
    /// The last readiness probe's round trip in ms: the hop alone. It is not the pool's
    /// estimate: a probe is one sample, taken as an instance starts, often while others
    /// load on the same host, and kept as the estimate of a pool no member call
    /// measured since, it ruled the pool out of every target for good (live, cold-start
    /// probes of 50-240 ms beside calls of 7-12 ms). Probes only stand in for the fleet's
    /// hop before any member call was measured ([`super::Registry::response_times`]).
    probe_ms: Mutex<Option<f64>>,
    /// Member calls waiting for a slot now, for admission ([`Pool::backlog`]).
    queued: std::sync::atomic::AtomicUsize,
    /// The order in which calls waiting for a slot get one (pools without matching).
    line: Line,
    /// Moving average of how long a call holds its slot, in µs (0: none yet): the call
    /// and what the master does around it (the request's encoding, TLS, reading the
    /// answer), which is what frees slots for the queue ([`Pool::backlog`]).
    hold_us: std::sync::atomic::AtomicU64,
}

/// Counts a call in [`Pool::queued`] while it waits for a slot.
struct Queued<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Queued<'a> {
    fn new(counter: &'a std::sync::atomic::AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How far behind a pool is: the calls waiting for its slots, its usable slots, how
/// long a new call would wait for one, and how long it then takes (a typical call).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backlog {
    pub queued: usize,
    pub slots: usize,
    pub wait: Duration,
    pub call: Duration,
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
    pub(super) id: u64,
    pub(super) items: usize,
    pub(super) since: Instant,
    pub(super) deadline: Instant,
}

/// Leaves the waiting list when the request gets its slot, times out or is dropped.
struct Ticket<'a> {
    pub(super) pool: &'a Pool,
    pub(super) id: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.pool.waiting.lock().retain(|w| w.id != self.id);
        self.pool.freed.notify_waiters();
    }
}

/// At most this many of the oldest waiting requests enter one matching.
const MATCH_WINDOW: usize = 64;

/// A slot on an instance, given back on drop. A call sent on it that ends without an
/// answer (none within the dispatcher's hang limit) counts against the instance
/// ([`UNANSWERED_LIMIT`]); a call its request stopped waiting for keeps the slot until
/// the worker answers (`crate::serving::dispatch`).
#[derive(Debug)]
pub struct Lease {
    pub instance: Arc<Instance>,
    /// Whether the call waited for this slot (every usable one was busy when it asked).
    pub queued: bool,
    pub(super) pool: Arc<Pool>,
    pub(super) sent: Option<Instant>,
    taken: Instant,
    /// How an answer on this slot joins the pool's overhead estimate, once the call set it.
    measure: Option<Measure>,
}

/// A member call's measure ([`Lease::measure`]).
#[derive(Debug, Clone, Copy)]
struct Measure {
    /// When the call asked for a slot: its overhead is counted from then.
    asked: Instant,
    items: usize,
    /// Its request's due time ([`crate::serving::dispatch::Call::measured_until`]).
    due: Instant,
}

impl Lease {
    pub(super) fn new(instance: &Arc<Instance>, pool: &Arc<Pool>) -> Self {
        Self {
            instance: Arc::clone(instance),
            queued: false,
            pool: Arc::clone(pool),
            sent: None,
            taken: Instant::now(),
            measure: None,
        }
    }

    /// An answer on this slot measures the pool's overhead: from `asked` (when the call
    /// asked for a slot) for `items` items, its request due at `due`.
    pub fn measure(&mut self, asked: Instant, items: usize, due: Instant) {
        self.measure = Some(Measure { asked, items, due });
    }

    /// Marks whether the call waited for this slot.
    fn waited(mut self, waited: bool) -> Self {
        self.queued = waited;
        self
    }

    /// A call goes out on this slot.
    pub fn sent(&mut self) {
        self.sent = Some(Instant::now());
    }

    /// The worker answered the call (any status): the instance is alive, and the pool
    /// learns how long its calls take. An answer that `served` (the member's, not an
    /// error) joins the pool's overhead estimate ([`Lease::measure`]) when it came by its
    /// request's due time, or later on a slot it had at once: leaving late answers out,
    /// a pool whose hop made half its calls late kept predicting them in time (in CI,
    /// `autoscaling_live` simulated `mlp_med` serving `const2` at 0.7 % of requests
    /// meeting it). A late answer that waited for its slot is left out: that lateness
    /// is the pool's backlog, which the autoscaler answers (the miss it counts,
    /// `crate::serving::service`), not the call's time. The simulator measures alike
    /// (`cocktail_benches::sim::Cluster::serve`).
    pub fn answered(&mut self, served: bool) {
        if let Some(sent) = self.sent.take() {
            self.instance.answered();
            self.pool.observe_call(sent.elapsed());
            if let Some(m) = self.measure.filter(|_| served)
                && (Instant::now() <= m.due || !self.queued)
            {
                self.pool
                    .observe_member_call(&self.instance, m.items, m.asked.elapsed());
            }
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
        average_us(&self.pool.hold_us, self.taken.elapsed());
        if self.instance.slots().available {
            // One call in line takes the slot; on a mixed pool, the matching runs again.
            self.pool.line.freed(&self.instance);
            self.pool.freed.notify_waiters();
        } else {
            // Gone down or draining: the calls that could only use it must learn so.
            self.pool.changed();
        }
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
    /// An empty pool; `speed` turns on Kairos' matching when it mixes types.
    pub(super) fn new(speed: Option<Arc<Speed>>) -> Self {
        Self {
            speed,
            recent: Mutex::new(std::collections::VecDeque::with_capacity(RECENT_BATCHES)),
            ..Self::default()
        }
    }

    /// Waits in this pool's queue for a slot until `deadline`; instances in `exclude`
    /// (already tried by this request) are skipped.
    pub async fn acquire(
        self: &Arc<Self>,
        deadline: Instant,
        exclude: &[Arc<Instance>],
        items: usize,
    ) -> Result<Lease, NoSlot> {
        let matched = self.varying.load(Ordering::Relaxed) && self.mixed(exclude);
        let _queued = Queued::new(&self.queued);
        if let Some(speed) = self.speed.as_ref().filter(|_| matched) {
            return self.acquire_matched(speed, deadline, exclude, items).await;
        }
        // Joined only once the call has to wait: a call that finds a free slot no older
        // call is waiting for takes it at once.
        let mut place: Option<InLine<'_>> = None;
        let mut waited = false;
        loop {
            let mut usable = false;
            {
                let instances = self.instances.read();
                let candidates: Vec<&Arc<Instance>> =
                    instances.iter().filter(|i| !i.is_in(exclude)).collect();
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
                // The line is asked only when there is a free slot to take.
                if let Some(choice) = regular.or(spill) {
                    let mut free = free_slots(&candidates, &slots);
                    if self.line.my_turn(place.as_ref().map(|p| p.id), &free) {
                        let instance = candidates[choice];
                        if spill.is_some() {
                            metrics::counter!("cocktail_master_burst_spills_total", "model" => instance.model.clone())
                                .increment(1);
                        }
                        if instance.try_take() {
                            *instance.last_used.lock() = Instant::now();
                            if let Some(place) = place.as_mut() {
                                take_one(&mut free, instance);
                                place.served(&free);
                            }
                            return Ok(Lease::new(instance, self).waited(waited));
                        }
                        // Lost a race for the slot: look again at once.
                        continue;
                    }
                }
            }
            if !usable {
                return Err(NoSlot::NoInstance);
            }
            let Some(waiting) = place.as_ref() else {
                let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
                place = Some(self.line.join(id, exclude));
                // Its place may already be its turn.
                continue;
            };
            // A slot freed since the look above left a wake-up behind: none is missed.
            if tokio::time::timeout_at(deadline.into(), waiting.woken())
                .await
                .is_err()
            {
                return Err(NoSlot::Timeout);
            }
            waited = true;
        }
    }

    /// Whether an instance outside `exclude` could take a call at once.
    pub fn free_besides(&self, exclude: &[Arc<Instance>]) -> bool {
        self.instances
            .read()
            .iter()
            .any(|i| i.slots().free() > 0 && !i.is_in(exclude))
    }

    /// Something other than a freed slot changed (an instance came, went, drained, went
    /// down or answered a heartbeat): every waiting call looks again.
    pub(super) fn changed(&self) {
        self.freed.notify_waiters();
        self.line.wake_all();
    }

    /// Whether the usable regular instances span more than one known type.
    pub(super) fn mixed(&self, exclude: &[Arc<Instance>]) -> bool {
        let instances = self.instances.read();
        let mut types = instances
            .iter()
            .filter(|i| !i.burst && !i.is_in(exclude))
            .filter_map(|i| i.instance_type.as_deref());
        types
            .next()
            .is_some_and(|first| types.any(|other| other != first))
    }

    /// Kairos' query distribution (Kairos §5.1), for pools that mix types and receive
    /// batches of varying size (single requests keep the packing of Cocktail §4.2.1).
    /// Every waiting request, this one included, is matched to an instance by min-cost
    /// bipartite matching on its batch's latency on the instance's type
    /// ([`kairos::distribute`]); this request takes its slot when its match has one free,
    /// else waits for the next change (a slot freed, a request arrived) and matches again.
    /// Matched to a busy instance, it waits for that instance rather than take one where
    /// it would miss its deadline.
    pub(super) async fn acquire_matched(
        self: &Arc<Self>,
        speed: &Speed,
        deadline: Instant,
        exclude: &[Arc<Instance>],
        items: usize,
    ) -> Result<Lease, NoSlot> {
        let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
        let since = Instant::now();
        self.waiting.lock().push(Waiter {
            id,
            items: items.max(1),
            since,
            deadline,
        });
        let _ticket = Ticket { pool: self, id };
        self.freed.notify_waiters();
        let mut waited = false;
        loop {
            let mut notified = pin!(self.freed.notified());
            notified.as_mut().enable();
            let now = Instant::now();
            let candidates: Vec<Arc<Instance>> = self
                .instances()
                .into_iter()
                .filter(|i| !i.burst && !i.is_in(exclude))
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
                let all = self.waiting.lock();
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
                waited = true;
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
                    .map(|j| latency_ms(j, cocktail_common::oip::limits::MAX_ITEMS))
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
                *instance.last_used.lock() = Instant::now();
                metrics::counter!("cocktail_master_matched_total", "model" => instance.model.clone())
                    .increment(1);
                return Ok(Lease::new(instance, self).waited(waited));
            }
            if tokio::time::timeout_at(deadline.into(), notified)
                .await
                .is_err()
            {
                return Err(NoSlot::Timeout);
            }
            waited = true;
        }
    }

    /// Folds one answered call's time into the pool's moving average.
    pub(super) fn observe_call(&self, took: Duration) {
        average_us(&self.call_us, took);
    }

    /// The calls queued for this pool's slots and how long a new call would wait behind
    /// them. Once the free slots are taken, the calls ahead of it start as slots are
    /// given back, one every typical hold of a slot divided by the usable slots (in
    /// steady state the holds are spread over a hold's time): so the new call waits for
    /// one more than there are calls ahead. Zero when no call waits beyond the free
    /// slots. `None` before a call was answered or while no instance can take work.
    pub fn backlog(&self) -> Option<Backlog> {
        let (slots, free) = self
            .instances
            .read()
            .iter()
            .map(|i| i.slots())
            .filter(|s| s.available)
            .fold((0, 0), |(slots, free), s| {
                let size = s.packing_factor as usize;
                (slots + size, free + s.free() as usize)
            });
        let typical = self.typical_call()?;
        if slots == 0 {
            return None;
        }
        let hold = match self.hold_us.load(Ordering::Relaxed) {
            0 => typical,
            us => Duration::from_micros(us),
        };
        let queued = self.queued.load(Ordering::Relaxed);
        let ahead = queued.saturating_sub(free);
        let wait = if ahead == 0 {
            Duration::ZERO
        } else {
            let given_back = u32::try_from(ahead + 1).unwrap_or(u32::MAX);
            let slots = u32::try_from(slots).unwrap_or(u32::MAX);
            hold.saturating_mul(given_back) / slots
        };
        Some(Backlog {
            queued,
            slots,
            wait,
            call: typical,
        })
    }

    /// How long a call to this pool usually takes, once one has been answered.
    pub fn typical_call(&self) -> Option<Duration> {
        match self.call_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// Predicted inference time in ms of `items` on `instance_type` (the profiling host's
    /// when the type is unknown); `None` for a model without a profile.
    fn inference_ms(&self, instance_type: Option<&str>, items: usize) -> Option<f64> {
        let speed = self.speed.as_ref()?;
        Some(match instance_type.and_then(|t| speed.catalog.get(t)) {
            Some(ty) => speed.latency.ms_on(ty, &speed.catalog.gpu, items),
            None => speed.latency.host_ms(items),
        })
    }

    /// Whether a call of one item to `instance` is quick: its predicted inference (from
    /// the model's profile; the pool's typical call without one) takes at most `within`.
    /// Not the measured call time, which grows with the queues under load.
    pub fn quick(&self, instance: &Instance, within: Duration) -> bool {
        match self.inference_ms(instance.instance_type.as_deref(), 1) {
            Some(ms) => ms <= within.as_secs_f64() * 1e3,
            None => self.typical_call().is_some_and(|t| t <= within),
        }
    }

    /// The calls an instance registered as `registration` takes at once: its packing
    /// factor, with `counting`'s hop counted for a model whose calls join
    /// ([`HopSlots::slots`], on the same type-aware inference as [`Pool::quick`]). The
    /// extra slots are what lets such a model's calls join
    /// ([`crate::serving::dispatch`]).
    pub(super) fn slots(&self, registration: &Registration, counting: HopSlots) -> u32 {
        let ty = registration.instance_type.as_deref();
        match self.inference_ms(ty, 1) {
            Some(_) => counting.slots(registration.packing_factor, |items| {
                self.inference_ms(ty, items).unwrap_or(f64::INFINITY)
            }),
            None => registration.packing_factor.max(1),
        }
    }

    /// One member call answered by `instance`, `took` from asking for a slot to reading
    /// the answer: its overhead over the predicted inference joins the pool's estimate.
    pub(super) fn observe_member_call(&self, instance: &Instance, items: usize, took: Duration) {
        if let Some(inference) = self.inference_ms(instance.instance_type.as_deref(), items) {
            self.overhead
                .lock()
                .observe(clock_s(), took.as_secs_f64() * 1e3, inference);
        }
    }

    /// A round trip to a newly registered instance (its readiness probe): the hop
    /// alone ([`Pool::probe_ms`]).
    pub fn observe_probe(&self, took: Duration) {
        *self.probe_ms.lock() = Some(took.as_secs_f64() * 1e3);
    }

    /// The overhead to expect of the next member call, once one was measured (and not
    /// forgotten: [`cocktail_policy::response::MAX_AGE_S`]).
    pub fn overhead_ms(&self) -> Option<f64> {
        self.overhead.lock().estimate_ms(clock_s())
    }

    /// The last readiness probe's round trip, once one answered.
    pub fn probe_ms(&self) -> Option<f64> {
        *self.probe_ms.lock()
    }

    /// Predicted inference time of one request on the fastest type among the usable
    /// instances, for the pool's typical batch (the mean of the recent ones); `None`
    /// when no instance can take work or the model has no profile.
    pub fn inference_estimate_ms(&self) -> Option<f64> {
        let items = {
            let recent = self.recent.lock();
            let n = recent.len().max(1);
            (recent.iter().map(|&i| usize::from(i)).sum::<usize>() / n).max(1)
        };
        self.instances
            .read()
            .iter()
            .filter(|i| i.slots().available)
            .filter_map(|i| self.inference_ms(i.instance_type.as_deref(), items))
            .min_by(f64::total_cmp)
    }

    /// Remembers a request's batch size (once per request, not per attempt).
    pub fn record_batch(&self, items: usize) {
        let items = u16::try_from(items.max(1)).unwrap_or(u16::MAX);
        let mut recent = self.recent.lock();
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
            .iter()
            .map(|&items| usize::from(items))
            .collect()
    }

    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.instances.read().clone()
    }

    /// Whether some call holds or waits for one of its slots (a removed model's pool
    /// drains until it holds none).
    pub fn busy(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > 0
            || self
                .instances
                .read()
                .iter()
                .any(|i| i.in_flight.load(Ordering::Acquire) > 0)
    }
}

/// `free` less the slot just taken on `instance`.
fn take_one(free: &mut [(&Arc<Instance>, u32)], instance: &Arc<Instance>) {
    if let Some((_, n)) = free.iter_mut().find(|(i, _)| Arc::ptr_eq(i, instance)) {
        *n = n.saturating_sub(1);
    }
}

/// The instances among `candidates` with a free slot, and how many each has.
fn free_slots<'a>(
    candidates: &[&'a Arc<Instance>],
    slots: &[Slots],
) -> Vec<(&'a Arc<Instance>, u32)> {
    candidates
        .iter()
        .zip(slots)
        .filter(|(_, s)| s.free() > 0)
        .map(|(i, s)| (*i, s.free()))
        .collect()
}

/// The master's clock for the pools' overhead estimates, in seconds since its first
/// reading (the policy counts in seconds, as the simulator's clock does).
fn clock_s() -> f64 {
    static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
    EPOCH.elapsed().as_secs_f64()
}

/// Folds one sample into a moving average of µs kept in `cell` (weight 1/8; 0 means no
/// sample yet). Written by hand: an atomic cell read by every admission, where a lost
/// race between two writers only loses one sample.
fn average_us(cell: &std::sync::atomic::AtomicU64, took: Duration) {
    let sample = (took.as_micros() as u64).max(1);
    let old = cell.load(Ordering::Relaxed);
    let new = if old == 0 {
        sample
    } else {
        old - old / 8 + sample / 8
    };
    cell.store(new.max(1), Ordering::Relaxed);
}
