//! The simulated cluster: instances with their Pf slots, one queue per model pool, launch
//! delays, spot prices, revocations and the bill.
//!
//! Every instance has Pf slots, each free from some time. A member call goes where the
//! master's load balancer sends it (`policy::packing`): to the fullest instance that has a
//! slot free now, so busy instances fill up and spare ones idle until the autoscaler
//! releases them. When every slot is busy, the call waits for the earliest one, runs for
//! the model's profiled latency (or, with `SimConfig::per_type_latency`, its latency on
//! the instance's type), and misses when it cannot start before its deadline, as the live
//! dispatcher's queue does. Each pool measures its answered calls' overhead
//! (the hop and the wait for a slot) as the live registry does, for selection's predicted
//! response times ([`Cluster::predicted`]): the answers in time, and the late ones that
//! had their slot at once.

use cocktail_common::catalog::{Catalog, InstanceType, SpotPrices, SpotProcess};
use cocktail_policy::autoscale::{InstanceState, Offer};
use cocktail_policy::control::PoolMeasure;
use cocktail_policy::packing::{self, Slots};
use cocktail_policy::response::{self, Overhead};
use cocktail_policy::selection::Candidate;

#[derive(Debug, Clone)]
pub struct Instance {
    pub pool: usize,
    pub instance_type: usize,
    pub spot: bool,
    pub packing_factor: u32,
    pub launched: f64,
    pub ready: f64,
    /// Takes requests (ready, not revoked, not failed, not terminated).
    pub serving: bool,
    /// When billing stopped.
    pub ended: Option<f64>,
    pub last_used: f64,
    /// When each of its Pf slots is free.
    slots: Vec<f64>,
    /// Billed up to this time.
    billed_to: f64,
}

/// What happened to a member call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Served {
    /// Answered at this time.
    At(f64),
    /// Started but finished after its deadline, at this time.
    Late(f64),
    /// No slot before the deadline.
    Missed,
    /// The pool has no serving instance: the call fails at once (not a deadline miss).
    NoInstance,
}

#[derive(Debug, Default)]
struct Pool {
    /// Its serving instances, in the order they came up (packing's tie-break); an
    /// instance leaves when it stops serving, never on the per-call path.
    members: Vec<usize>,
    /// Member calls and deadline misses since the start.
    calls: u64,
    misses: u64,
    /// What an answered call took beyond inference, as the live master measures it.
    overhead: Overhead,
}

#[derive(Debug)]
pub struct Cluster {
    pub catalog: Catalog,
    allowed: Vec<usize>,
    prices: SpotProcess,
    pools: Vec<Pool>,
    /// Per pool: the model's latency per call in seconds.
    service_s: Vec<f64>,
    /// The network hop master ↔ worker, in seconds, added to every answer.
    hop_s: f64,
    /// Calls run for the model's latency on the instance's type (else the profile's on
    /// the profiling host, whatever the type).
    per_type: bool,
    /// Per pool and catalog type: Pf, and the model's latency in ms.
    packing: Vec<Vec<u32>>,
    type_latency: Vec<Vec<f64>>,
    pub instances: Vec<Instance>,
    /// Instances not yet ended, for billing and revocations.
    live: Vec<usize>,
    pub cost: f64,
    pub revocations: u64,
}

impl Cluster {
    /// `latency_ms[pool]`, `packing[pool][type]` and `type_latency[pool][type]` come from
    /// the profile; `allowed` are the catalog types that may be bought; every answer
    /// takes `hop_ms` more.
    pub fn new(
        catalog: Catalog,
        allowed: Vec<usize>,
        (latency_ms, hop_ms, per_type): (&[f64], f64, bool),
        packing: Vec<Vec<u32>>,
        type_latency: Vec<Vec<f64>>,
        seed: u64,
    ) -> Self {
        Self {
            prices: SpotProcess::new(catalog.spot, seed),
            catalog,
            allowed,
            pools: latency_ms.iter().map(|_| Pool::default()).collect(),
            service_s: latency_ms.iter().map(|ms| ms / 1000.0).collect(),
            hop_s: hop_ms / 1000.0,
            per_type,
            packing,
            type_latency,
            instances: Vec::new(),
            live: Vec::new(),
            cost: 0.0,
            revocations: 0,
        }
    }

    /// The hop of the calls from now on (a request's, drawn from live answers).
    pub fn set_hop_ms(&mut self, ms: f64) {
        self.hop_s = ms / 1000.0;
    }

    fn instance_type(&self, ty: usize) -> Option<&InstanceType> {
        self.catalog.types.get(ty)
    }

    pub fn spot_price(&self, ty: usize, t: f64) -> f64 {
        self.instance_type(ty)
            .map_or(0.0, |ty| self.prices.price(ty, t))
    }

    /// What each allowed type costs `pool` at `t`: spot under the bid when `spot`, else
    /// on-demand (the live controller's offers).
    pub fn offers(&self, pool: usize, spot: bool, t: f64) -> Vec<Offer> {
        self.allowed
            .iter()
            .filter_map(|&k| {
                let ty = self.instance_type(k)?;
                let latency_ms = self
                    .type_latency
                    .get(pool)
                    .and_then(|l| l.get(k))
                    .copied()
                    .unwrap_or(0.0);
                Some(Offer::priced(
                    ty,
                    self.packing_of(pool, k),
                    latency_ms,
                    self.prices.price(ty, t),
                    self.catalog.bid(ty),
                    spot,
                ))
            })
            .collect()
    }

    fn packing_of(&self, pool: usize, ty: usize) -> u32 {
        self.packing
            .get(pool)
            .and_then(|p| p.get(ty))
            .copied()
            .unwrap_or(1)
    }

    /// Launches `count` instances of the named type for `pool`, serving after `delay_s`.
    /// Returns their indices.
    pub fn launch(
        &mut self,
        pool: usize,
        type_name: &str,
        spot: bool,
        count: u32,
        now: f64,
        delay_s: f64,
    ) -> Vec<usize> {
        let Some(ty) = self.catalog.types.iter().position(|t| t.name == type_name) else {
            return Vec::new();
        };
        let packing_factor = self.packing_of(pool, ty);
        (0..count)
            .map(|_| {
                let id = self.instances.len();
                self.instances.push(Instance {
                    pool,
                    instance_type: ty,
                    spot,
                    packing_factor,
                    launched: now,
                    ready: now + delay_s,
                    serving: false,
                    ended: None,
                    last_used: now + delay_s,
                    slots: Vec::new(),
                    billed_to: now,
                });
                self.live.push(id);
                id
            })
            .collect()
    }

    /// The instance is up: its slots join the pool's queue.
    pub fn ready(&mut self, id: usize) {
        let Some(instance) = self.instances.get_mut(id) else {
            return;
        };
        if instance.ended.is_some() {
            return;
        }
        instance.serving = true;
        instance.slots = vec![instance.ready; instance.packing_factor.max(1) as usize];
        if let Some(pool) = self.pools.get_mut(instance.pool) {
            pool.members.push(id);
        }
    }

    /// Stops routing to the instance (a revocation notice, a failure, a termination).
    pub fn stop_serving(&mut self, id: usize) {
        if let Some(i) = self.instances.get_mut(id) {
            i.serving = false;
            if let Some(pool) = self.pools.get_mut(i.pool) {
                pool.members.retain(|&m| m != id);
            }
        }
    }

    /// Stops billing the instance.
    pub fn end(&mut self, id: usize, now: f64) {
        self.bill_one(id, now);
        self.stop_serving(id);
        if let Some(i) = self.instances.get_mut(id) {
            i.ended.get_or_insert(now);
        }
        self.live.retain(|&l| l != id);
    }

    /// `models` with each `latency_ms` the predicted response time: inference (on the
    /// fastest type the pool runs on, with per-type latencies) plus the pool's measured
    /// overhead ([`response::predicted`], as the live master).
    pub fn predicted(&self, models: &[Candidate], now: f64) -> Vec<Candidate> {
        // Inference on the fastest type among the pool's serving instances, as live.
        let inference: Vec<Option<f64>> = self
            .pools
            .iter()
            .enumerate()
            .filter(|_| self.per_type)
            .map(|(pool, p)| {
                p.members
                    .iter()
                    .filter_map(|&id| {
                        let ty = self.instances.get(id)?.instance_type;
                        self.type_latency.get(pool)?.get(ty).copied()
                    })
                    .min_by(f64::total_cmp)
            })
            .collect();
        let overhead: Vec<Option<f64>> = self
            .pools
            .iter()
            .map(|p| p.overhead.estimate_ms(now))
            .collect();
        let prior = response::prior(overhead.iter().copied());
        response::predicted(models, &inference, &overhead, prior)
    }

    /// A member call to `pool` arriving at `t`, whose answer must reach the master by
    /// `deadline`. Its answer joins the pool's overhead estimate when in time, or late
    /// on a slot it had at once (late by the hop or the instance's type); a late answer
    /// that waited for its slot is the pool's backlog, not its calls' time. As live:
    /// `cocktail_master::serving::registry::Lease::answered`.
    pub fn serve(&mut self, pool: usize, t: f64, deadline: f64) -> Served {
        let hop = self.hop_s;
        let (served, service) = self.serve_until(pool, t, deadline - hop);
        let measured = match served {
            Served::At(at) => Some(at),
            Served::Late(at) if at - service <= t + 1e-9 => Some(at),
            _ => None,
        };
        if let (Some(at), Some(p)) = (measured, self.pools.get_mut(pool)) {
            p.overhead.observe(at, (at - t + hop) * 1e3, service * 1e3);
        }
        match served {
            Served::At(at) => Served::At(at + hop),
            Served::Late(at) => Served::Late(at + hop),
            other => other,
        }
    }

    /// The call on the worker's side: it must finish by `deadline` (give or take a
    /// nanosecond: a model whose latency is exactly the target fits it). It runs for the
    /// model's latency on the instance's type (the profile's when the type has none),
    /// which is returned with the outcome.
    fn serve_until(&mut self, pool: usize, t: f64, deadline: f64) -> (Served, f64) {
        let deadline = deadline + 1e-9;
        let Some(profiled) = self.service_s.get(pool).copied() else {
            return (Served::Missed, 0.0);
        };
        let Some(p) = self.pools.get_mut(pool) else {
            return (Served::Missed, profiled);
        };
        p.calls += 1;
        let type_latency = self.type_latency.get(pool).filter(|_| self.per_type);
        let instances = &mut self.instances;
        // The fullest instance with a slot free at `t`, as the live load balancer packs.
        let packed = packing::choose(p.members.iter().map(|&id| {
            let slots = instances.get(id).map_or(&[][..], |i| &i.slots[..]);
            Slots {
                packing_factor: slots.len() as u32,
                in_flight: slots.iter().filter(|&&free| free > t).count() as u32,
                available: true,
            }
        }));
        // Else the slot free first.
        let chosen = match packed {
            Some(k) => p.members.get(k).copied(),
            None => p
                .members
                .iter()
                .copied()
                .filter_map(|id| {
                    let earliest = instances
                        .get(id)?
                        .slots
                        .iter()
                        .copied()
                        .min_by(f64::total_cmp)?;
                    Some((earliest, id))
                })
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                .map(|(_, id)| id),
        };
        let Some(instance) = chosen.and_then(|id| instances.get_mut(id)) else {
            return (Served::NoInstance, profiled);
        };
        let service = type_latency
            .and_then(|per_type| per_type.get(instance.instance_type))
            .map_or(profiled, |ms| ms / 1000.0);
        let Some(slot) = instance.slots.iter_mut().min_by(|a, b| a.total_cmp(b)) else {
            return (Served::NoInstance, service);
        };
        let start = slot.max(t);
        // A call that must wait for its slot past the deadline is not made; one that has
        // its slot at once is, even when the hop alone takes it past the deadline: the
        // live master sends it, and its late answer may still be the request's
        // (`Ballots::ask`).
        if start > deadline && start > t {
            p.misses += 1;
            return (Served::Missed, service);
        }
        let finish = start + service;
        *slot = finish;
        instance.last_used = finish;
        if finish > deadline {
            // The pool's miss only when the call waited for the slot, as live
            // (`cocktail_master::serving::service`): one that had it at once was late
            // by the hop's spread or its instance's type, which more instances do not fix.
            if start > t {
                p.misses += 1;
            }
            return (Served::Late(finish), service);
        }
        (Served::At(finish), service)
    }

    /// Bills every live instance up to `now`.
    pub fn bill(&mut self, now: f64) {
        for k in 0..self.live.len() {
            if let Some(&id) = self.live.get(k) {
                self.bill_one(id, now);
            }
        }
    }

    fn bill_one(&mut self, id: usize, now: f64) {
        let Some(i) = self.instances.get(id) else {
            return;
        };
        if i.ended.is_some() || now <= i.billed_to {
            return;
        }
        let price = match (i.spot, self.instance_type(i.instance_type)) {
            (true, Some(ty)) => self.prices.price(ty, i.billed_to),
            (false, Some(ty)) => ty.on_demand_per_hour,
            (_, None) => 0.0,
        };
        self.cost += price * (now - i.billed_to) / 3600.0;
        if let Some(i) = self.instances.get_mut(id) {
            i.billed_to = now;
        }
    }

    /// Live spot instances whose price rose above the bid at `t`, or that `chaos` picks.
    pub fn revoked(&self, t: f64, chaos: &mut dyn FnMut() -> bool) -> Vec<usize> {
        self.live
            .iter()
            .copied()
            .filter(|&id| {
                self.instances.get(id).is_some_and(|i| {
                    i.spot && i.serving && {
                        let over_bid = self
                            .instance_type(i.instance_type)
                            .is_some_and(|ty| self.prices.price(ty, t) > self.catalog.bid(ty));
                        over_bid || chaos()
                    }
                })
            })
            .collect()
    }

    /// Whether `pool` has an instance still booting (the reactive check leaves it alone).
    pub fn booting(&self, pool: usize, now: f64) -> bool {
        self.live.iter().any(|&id| {
            self.instances
                .get(id)
                .is_some_and(|i| i.pool == pool && !i.serving && i.ready > now)
        })
    }

    /// Every live instance (serving or booting, not revoked), per pool.
    pub fn counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.pools.len()];
        for &id in &self.live {
            if let Some(i) = self.instances.get(id)
                && let Some(c) = counts.get_mut(i.pool)
            {
                *c += 1;
            }
        }
        counts
    }

    /// The control loop's measure of one pool at `now`: `slo_ms` is the tightest latency
    /// target of the ensembles using it (`None`: out of use), `spot` whether it may buy
    /// spot.
    pub fn measure(
        &self,
        pool: usize,
        model: &str,
        latency_ms: f64,
        slo_ms: Option<f64>,
        spot: bool,
        now: f64,
    ) -> PoolMeasure {
        let (calls, misses) = self.pools.get(pool).map_or((0, 0), |p| (p.calls, p.misses));
        PoolMeasure {
            model: model.to_owned(),
            latency_ms,
            calls,
            misses,
            recent_miss_share: None,
            booting: self.booting(pool, now),
            in_use: slo_ms.is_some(),
            slo_ms,
            offers: self.offers(pool, spot, now),
            instances: self
                .live
                .iter()
                .filter_map(|&id| {
                    let i = self.instances.get(id)?;
                    if i.pool != pool || (!i.serving && i.ready <= now) {
                        return None; // another pool's, or revoked and draining
                    }
                    let ty = self.instance_type(i.instance_type)?;
                    Some(InstanceState {
                        id: id.to_string(),
                        instance_type: ty.name.clone(),
                        spot: i.spot,
                        packing_factor: i.packing_factor,
                        idle_s: (now - i.last_used).max(0.0),
                        price_per_hour: if i.spot {
                            self.prices.price(ty, now)
                        } else {
                            ty.on_demand_per_hour
                        },
                    })
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pool of one instance with one slot, whose calls take `ms` of inference.
    fn one_slot(ms: f64) -> Cluster {
        let catalog = Catalog::embedded().unwrap();
        let ty = catalog.types[0].name.clone();
        let mut cluster = Cluster::new(
            catalog,
            vec![0],
            (&[ms], 0.0, false),
            vec![vec![1]],
            vec![vec![ms]],
            1,
        );
        let ids = cluster.launch(0, &ty, false, 1, 0.0, 0.0);
        cluster.ready(ids[0]);
        cluster
    }

    /// A pool whose hop makes half its calls late is measured on those too, so it no
    /// longer looks in time (`autoscaling_live`'s `const2` in CI); a late call that
    /// waited for its slot is the backlog's, and is not measured.
    #[test]
    fn late_calls_are_measured_unless_they_waited_for_a_slot() {
        let mut cluster = one_slot(18.0);
        // Read a second after the last call, well within the estimate's age.
        let estimate = |c: &Cluster, now: f64| c.pools[0].overhead.estimate_ms(now).unwrap();
        // A call a second, due 26.5 ms after it is sent: 18 ms of inference, and a hop of
        // 2 ms (in time) or 12 ms (late) in turn.
        for k in 0..20 {
            cluster.set_hop_ms(if k % 2 == 0 { 2.0 } else { 12.0 });
            let t = f64::from(k);
            let served = cluster.serve(0, t, t + 0.0265);
            assert_eq!(
                matches!(served, Served::Late(_)),
                k % 2 == 1,
                "{k}: {served:?}"
            );
        }
        assert!(
            (estimate(&cluster, 20.0) - 12.0).abs() < 1e-6,
            "the late half counts: {}",
            estimate(&cluster, 20.0)
        );
        // Two calls at once on the one slot, with a quick hop: the second waits 18 ms for
        // the slot and is late; its wait is not its hop. (As many pairs as the estimate's
        // window holds calls: measured, the waits would be half of it.)
        cluster.set_hop_ms(1.0);
        for k in 20..84 {
            let t = f64::from(k);
            assert!(matches!(cluster.serve(0, t, t + 0.0265), Served::At(_)));
            assert!(matches!(cluster.serve(0, t, t + 0.0265), Served::Late(_)));
        }
        assert!(
            (estimate(&cluster, 84.0) - 1.0).abs() < 1e-6,
            "only the calls with their slot at once: {}",
            estimate(&cluster, 84.0)
        );
    }
}
