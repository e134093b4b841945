//! The autoscaler and the procurement policy (Cocktail §4.2, Algorithm 2), as pure code:
//! the live controller and the simulator pass in the pools as they are and the predicted
//! load, and carry out the decisions.
//!
//! - Importance sampling: a pool's weight is its share of the requests of the last
//!   window (5 minutes); its demand is the predicted load times its weight.
//! - Procurement: `An = demand − Cr`, with `Cr` the capacity of the pool's instances
//!   (those still provisioning included). The type chosen minimises the cost of covering
//!   `An`: `price × ⌈An / capacity⌉`; a GPU only when `An` fills its capacity.
//! - Recycling: instances idle long enough go, as long as the rest still covers the load
//!   to keep (the forecast over the recycling timeout, for the predictive policies) and
//!   the pool keeps its minimum.
//! - Spreading: one spot type holds at most a share of a pool, so one type's price spike
//!   revokes only part of it.
//! - Trading back: an on-demand instance (an interruption's stand-in, or bought while spot
//!   was above the bid) is covered by cheaper spot instances once spot is under the bid
//!   again and the pool has had no interruption for the recycling timeout, and goes once
//!   the cover serves.
//! - Reactive: a pool whose SLO violations over the last check exceed the threshold gets
//!   one more instance at once, whatever the prediction says.
//!
//! Capacity is in requests per second: an instance with packing factor `Pf` serves `Pf`
//! requests at once, each taking the model's latency plus the per-request overhead
//! (HTTP, preprocessing), so it completes `Pf × 1000 / (latency_ms + overhead_ms)` per
//! second (Little's law).

use serde::{Deserialize, Serialize};

mod mark;
pub use mark::{MarkPlan, mark, mark_plan};

/// A running or provisioning instance, as the autoscaler sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceState {
    pub id: String,
    pub instance_type: String,
    pub spot: bool,
    pub packing_factor: u32,
    /// Seconds since it last served a request (since launch if never).
    pub idle_s: f64,
    /// What it is billed now.
    pub price_per_hour: f64,
}

/// One model's pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolState {
    pub model: String,
    /// The model's single-request latency (profile).
    pub latency_ms: f64,
    /// Requests that used this pool during the importance window.
    pub requests: u64,
    pub instances: Vec<InstanceState>,
    /// Share of this pool's recent requests that missed their deadline.
    pub slo_violations: f64,
    /// Some instance is still provisioning.
    pub booting: bool,
    /// No spot instance of the pool was interrupted for the recycling timeout (so none is
    /// still draining): on-demand stand-ins may be traded back for spot.
    pub spot_calm: bool,
}

impl PoolState {
    /// Importance weight: the pool's share of the window's `total` requests.
    pub fn weight(&self, total: u64) -> f64 {
        if total == 0 {
            0.0
        } else {
            (self.requests as f64 / total as f64).min(1.0)
        }
    }

    /// Requests per second its instances (provisioning ones included) serve.
    pub fn capacity(&self, config: &AutoscaleConfig) -> f64 {
        self.instances
            .iter()
            .map(|i| capacity(i.packing_factor, self.latency_ms, config))
            .sum()
    }
}

/// An instance type the pool could get now, with its packing factor for the model and
/// its current price (spot when the spot price is under the bid, else on-demand).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    pub instance_type: String,
    pub packing_factor: u32,
    pub price_per_hour: f64,
    pub spot: bool,
    pub gpu: bool,
    /// The type's on-demand price and whether it is burstable, for replacements.
    pub on_demand_per_hour: f64,
    pub burstable: bool,
    /// The model's single-request latency on this type (0: unknown), for MArk's filter of
    /// types too slow for the pool's latency target (MArk §4.2).
    #[serde(default)]
    pub latency_ms: f64,
}

impl Offer {
    /// What `ty` costs now: spot when `spot_allowed` and its price is under the `bid`,
    /// else on-demand. `latency_ms`: the model's single-request latency on `ty`.
    pub fn priced(
        ty: &cocktail_common::catalog::InstanceType,
        packing_factor: u32,
        latency_ms: f64,
        spot_price: f64,
        bid: f64,
        spot_allowed: bool,
    ) -> Self {
        let spot = spot_allowed && spot_price <= bid;
        Self {
            instance_type: ty.name.clone(),
            packing_factor,
            price_per_hour: if spot {
                spot_price
            } else {
                ty.on_demand_per_hour
            },
            spot,
            gpu: ty.is_gpu(),
            on_demand_per_hour: ty.on_demand_per_hour,
            burstable: ty.burstable,
            latency_ms,
        }
    }
}

/// The offers fast enough for a pool whose tightest latency target is `slo_ms` (MArk's
/// per-type filter, MArk §4.2): those whose latency on the type fits it; the fastest
/// when none does (better a slow instance than none). No target, or no latency known:
/// every offer.
pub fn within_slo(offers: &[Offer], slo_ms: Option<f64>) -> Vec<Offer> {
    let Some(slo) = slo_ms else {
        return offers.to_vec();
    };
    let fitting: Vec<Offer> = offers
        .iter()
        .filter(|o| o.latency_ms <= slo)
        .cloned()
        .collect();
    if !fitting.is_empty() {
        return fitting;
    }
    let fastest = offers
        .iter()
        .filter(|o| o.packing_factor > 0)
        .map(|o| o.latency_ms)
        .fold(f64::INFINITY, f64::min);
    offers
        .iter()
        .filter(|o| o.latency_ms <= fastest)
        .cloned()
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AutoscaleConfig {
    /// Per-request time beyond inference (HTTP, preprocessing), in ms.
    pub overhead_ms: f64,
    /// Instances idle this long are recycled (Cocktail: 10 minutes).
    pub idle_timeout_s: f64,
    /// Instances every pool keeps.
    pub min_instances: usize,
    /// SLO violation share that triggers a reactive scale-up.
    pub slo_threshold: f64,
    /// The share of its capacity a pool is planned to use (the predictive and reactive
    /// policies; target tracking has its own): headroom for the load within an interval.
    pub target_utilisation: f64,
    /// The largest share of a pool's instances one spot type may hold once the pool has
    /// more than one (1: no limit), so that one type's price spike revokes only part of
    /// the pool.
    pub spot_type_share: f64,
}

impl Default for AutoscaleConfig {
    fn default() -> Self {
        Self {
            overhead_ms: 0.5,
            idle_timeout_s: 600.0,
            min_instances: 1,
            slo_threshold: 0.05,
            target_utilisation: 0.8,
            spot_type_share: 0.5,
        }
    }
}

/// What one interval sizes the pools for, in requests per second of the whole load (each
/// pool takes its weight's share).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// Capacity to have: a pool short of `buy × weight` launches the cheapest cover.
    pub buy: f64,
    /// Capacity to keep: a pool's instances idle for `release_idle_s` go while the rest
    /// still covers `keep × weight` (and the pool keeps its minimum).
    pub keep: f64,
    pub release_idle_s: f64,
}

impl Target {
    /// Buy and keep `rate`; release only what idled for `release_idle_s`.
    pub fn steady(rate: f64, release_idle_s: f64) -> Self {
        Self {
            buy: rate,
            keep: rate,
            release_idle_s,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    Launch {
        instance_type: String,
        count: u32,
        spot: bool,
        price_per_hour: f64,
    },
    Terminate {
        id: String,
    },
    /// Start a stopped instance (a cold standby, MArk §4.5).
    Resume {
        id: String,
    },
    /// Stop an instance without giving it up (a standby back to cold).
    Stop {
        id: String,
    },
}

/// One decision with everything that led to it, kept for `/v1/decisions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub pool: String,
    pub action: Action,
    pub weight: f64,
    /// Requests per second the pool must serve, and what it can serve now.
    pub demand: f64,
    pub capacity: f64,
    pub reason: String,
}

/// Types a fleet request may take instead of `chosen`, at most `n`: offers in the same
/// market and of the same kind (GPU or not) that cost no more per request, cheapest per
/// request first, each with its capacity relative to `chosen` (their packing factors'
/// ratio), so that the fleet buys the same serving capacity whichever type it finds.
/// Spreading a pool over types also spreads its spot revocations.
pub fn alternates(chosen: &Offer, offers: &[Offer], n: usize) -> Vec<(String, f64)> {
    let per_request = |o: &Offer| o.price_per_hour / f64::from(o.packing_factor.max(1));
    let mut fitting: Vec<&Offer> = offers
        .iter()
        .filter(|o| {
            o.instance_type != chosen.instance_type
                && o.spot == chosen.spot
                && o.gpu == chosen.gpu
                && o.packing_factor > 0
                && per_request(o) <= per_request(chosen) * 1.25
        })
        .collect();
    fitting.sort_by(|a, b| per_request(a).total_cmp(&per_request(b)));
    fitting
        .into_iter()
        .take(n)
        .map(|o| {
            let weight = f64::from(o.packing_factor) / f64::from(chosen.packing_factor.max(1));
            (o.instance_type.clone(), weight)
        })
        .collect()
}

/// Requests per second one instance serves.
pub fn capacity(packing_factor: u32, latency_ms: f64, config: &AutoscaleConfig) -> f64 {
    f64::from(packing_factor) * 1000.0 / (latency_ms + config.overhead_ms).max(1e-6)
}

/// The cheapest way to add `needed` requests per second: `(offer, count)`.
pub fn procure<'a>(
    needed: f64,
    latency_ms: f64,
    offers: &'a [Offer],
    config: &AutoscaleConfig,
) -> Option<(&'a Offer, u32)> {
    offers
        .iter()
        .filter(|o| o.packing_factor > 0)
        .filter_map(|o| {
            let per = capacity(o.packing_factor, latency_ms, config);
            // A GPU only pays off when the load fills it (Cocktail §4.2.1).
            if o.gpu && needed < per {
                return None;
            }
            let count = (needed / per).ceil().max(1.0);
            Some((o, count as u32, o.price_per_hour * count))
        })
        .min_by(|a, b| {
            a.2.total_cmp(&b.2)
                .then(a.0.instance_type.cmp(&b.0.instance_type))
        })
        .map(|(o, count, _)| (o, count))
}

/// One autoscaling interval (Algorithm 2): `target` is the load (requests per second) to
/// cover when new instances would be ready and the load to keep capacity for,
/// `total_requests` the requests of the importance window (an ensemble request counts
/// once there and once in each of its members' pools, so a pool in every ensemble has
/// weight 1); `offers(pool)` lists what each pool can get.
pub fn plan(
    target: &Target,
    total_requests: u64,
    pools: &[PoolState],
    offers: &dyn Fn(&PoolState) -> Vec<Offer>,
    config: &AutoscaleConfig,
) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for pool in pools {
        let weight = pool.weight(total_requests);
        let demand = target.buy.max(0.0) * weight;
        let capacity_now = pool.capacity(config);
        let missing = config.min_instances.saturating_sub(pool.instances.len());
        let needed = demand - capacity_now;
        if needed > 0.0 || missing > 0 {
            let offers = offers(pool);
            let cover = spread(
                needed.max(f64::MIN_POSITIVE),
                missing as u32,
                pool,
                &offers,
                config,
            );
            for (offer, count) in cover {
                decisions.push(Decision {
                    pool: pool.model.clone(),
                    action: Action::Launch {
                        instance_type: offer.instance_type.clone(),
                        count,
                        spot: offer.spot,
                        price_per_hour: offer.price_per_hour,
                    },
                    weight,
                    demand,
                    capacity: capacity_now,
                    reason: if needed > 0.0 {
                        format!(
                            "planned {:.1} req/s × weight {weight:.2} = {demand:.1} req/s exceeds capacity {capacity_now:.1}; cheapest cover: {count} × {} at ${:.4}/h ({})",
                            target.buy,
                            offer.instance_type,
                            offer.price_per_hour,
                            if offer.spot { "spot" } else { "on-demand" }
                        )
                    } else {
                        format!("pool below its minimum of {} instance(s)", config.min_instances)
                    },
                });
            }
            continue;
        }
        let released = release(pool, weight, target, config);
        if released.is_empty() {
            let keep = target.keep.max(target.buy).max(0.0) * weight;
            decisions.extend(trade_to_spot(pool, weight, keep, &offers(pool), config));
        }
        decisions.extend(released);
    }
    decisions
}

/// The dearest on-demand instance of a pool that needs nothing bought or released,
/// traded for spot (MArk §4.5: on-demand only stands in until spot is back): while
/// nothing boots and no spot instance was interrupted for the recycling timeout, a
/// cheaper spot cover of its capacity is launched; once the rest of the pool covers
/// `keep` requests per second with nothing booting, the on-demand instance goes.
pub(crate) fn trade_to_spot(
    pool: &PoolState,
    weight: f64,
    keep: f64,
    offers: &[Offer],
    config: &AutoscaleConfig,
) -> Vec<Decision> {
    if pool.booting || !pool.spot_calm {
        return Vec::new();
    }
    let Some(dearest) = pool
        .instances
        .iter()
        .filter(|i| !i.spot)
        .max_by(|a, b| a.price_per_hour.total_cmp(&b.price_per_hour))
    else {
        return Vec::new();
    };
    let capacity_now = pool.capacity(config);
    let own = capacity(dearest.packing_factor, pool.latency_ms, config);
    let decision = |action: Action, reason: String| Decision {
        pool: pool.model.clone(),
        action,
        weight,
        demand: keep,
        capacity: capacity_now,
        reason,
    };
    let spot_covers = pool.instances.iter().any(|i| i.spot);
    if spot_covers && capacity_now - own >= keep && pool.instances.len() > config.min_instances {
        return vec![decision(
            Action::Terminate {
                id: dearest.id.clone(),
            },
            format!(
                "on-demand {} (${:.4}/h) traded for spot: the rest covers the {keep:.1} req/s to keep",
                dearest.id, dearest.price_per_hour
            ),
        )];
    }
    let spot: Vec<Offer> = offers.iter().filter(|o| o.spot).cloned().collect();
    let cover = spread(own, 1, pool, &spot, config);
    let price: f64 = cover
        .iter()
        .map(|(o, count)| o.price_per_hour * f64::from(*count))
        .sum();
    if cover.is_empty() || price >= dearest.price_per_hour {
        return Vec::new();
    }
    cover
        .into_iter()
        .map(|(offer, count)| {
            decision(
                Action::Launch {
                    instance_type: offer.instance_type.clone(),
                    count,
                    spot: true,
                    price_per_hour: offer.price_per_hour,
                },
                format!(
                    "spot cover for on-demand {} (${:.4}/h): {count} × {} at ${:.4}/h",
                    dearest.id, dearest.price_per_hour, offer.instance_type, offer.price_per_hour
                ),
            )
        })
        .collect()
}

/// The idle instances a pool can give up, most idle first: idle for the target's
/// `release_idle_s`, while the rest covers `keep` and the pool keeps its minimum.
fn release(
    pool: &PoolState,
    weight: f64,
    target: &Target,
    config: &AutoscaleConfig,
) -> Vec<Decision> {
    let keep = target.keep.max(target.buy).max(0.0) * weight;
    let capacity_now = pool.capacity(config);
    let mut idle: Vec<&InstanceState> = pool
        .instances
        .iter()
        .filter(|i| i.idle_s >= target.release_idle_s)
        .collect();
    idle.sort_by(|a, b| b.idle_s.total_cmp(&a.idle_s).then(a.id.cmp(&b.id)));
    let mut remaining = capacity_now;
    let mut kept = pool.instances.len();
    let mut decisions = Vec::new();
    for instance in idle {
        let own = capacity(instance.packing_factor, pool.latency_ms, config);
        if kept <= config.min_instances || remaining - own < keep {
            break;
        }
        remaining -= own;
        kept -= 1;
        decisions.push(Decision {
            pool: pool.model.clone(),
            action: Action::Terminate {
                id: instance.id.clone(),
            },
            weight,
            demand: keep,
            capacity: capacity_now,
            reason: format!(
                "idle {:.0} s (releases after {:.0} s); the rest covers the {keep:.1} req/s to keep",
                instance.idle_s, target.release_idle_s
            ),
        });
    }
    decisions
}

/// The cheapest cover of `needed` requests per second (at least `at_least` instances),
/// with no spot type holding more than `spot_type_share` of the pool once it has more
/// than one instance: what one type may not take goes to the next cheapest type.
fn spread<'a>(
    needed: f64,
    at_least: u32,
    pool: &PoolState,
    offers: &'a [Offer],
    config: &AutoscaleConfig,
) -> Vec<(&'a Offer, u32)> {
    let mut cover: Vec<(&'a Offer, u32)> = Vec::new();
    let mut left = needed;
    let mut excluded: Vec<&str> = Vec::new();
    loop {
        let open: Vec<Offer> = offers
            .iter()
            .filter(|o| !excluded.contains(&o.instance_type.as_str()))
            .cloned()
            .collect();
        let bought: u32 = cover.iter().map(|c| c.1).sum();
        let Some((chosen, count)) = procure(left, pool.latency_ms, &open, config) else {
            break;
        };
        let count = count.max(at_least.saturating_sub(bought));
        let Some(offer) = offers
            .iter()
            .find(|o| o.instance_type == chosen.instance_type)
        else {
            break;
        };
        let size_after = pool.instances.len() as u32 + bought + count;
        let of_type = pool
            .instances
            .iter()
            .filter(|i| i.spot && i.instance_type == offer.instance_type)
            .count() as u32;
        let allowed = if !offer.spot || config.spot_type_share >= 1.0 || size_after <= 1 {
            count
        } else {
            let cap = ((config.spot_type_share * f64::from(size_after)).floor() as u32).max(1);
            cap.saturating_sub(of_type).min(count)
        };
        let last_type = open.len() <= 1;
        if allowed == count || last_type {
            cover.push((offer, count));
            break;
        }
        if allowed > 0 {
            cover.push((offer, allowed));
            left -= f64::from(allowed) * capacity(offer.packing_factor, pool.latency_ms, config);
        }
        excluded.push(&offer.instance_type);
        if left <= 0.0 && bought + allowed >= at_least {
            break;
        }
        left = left.max(f64::MIN_POSITIVE);
    }
    cover
}

/// The reactive check (every 10 s): one more instance for each pool violating its SLO.
pub fn react(
    pools: &[PoolState],
    offers: &dyn Fn(&PoolState) -> Vec<Offer>,
    config: &AutoscaleConfig,
) -> Vec<Decision> {
    pools
        .iter()
        .filter(|p| p.slo_violations > config.slo_threshold)
        .filter_map(|pool| {
            let offers = offers(pool);
            let capacity_now = pool.capacity(config);
            // One instance's worth: the smallest cover of any extra load.
            let (offer, _) = procure(f64::MIN_POSITIVE, pool.latency_ms, &offers, config)?;
            Some(Decision {
                pool: pool.model.clone(),
                action: Action::Launch {
                    instance_type: offer.instance_type.clone(),
                    count: 1,
                    spot: offer.spot,
                    price_per_hour: offer.price_per_hour,
                },
                weight: 0.0,
                demand: capacity_now,
                capacity: capacity_now,
                reason: format!(
                    "{:.1} % of requests missed their deadline (threshold {:.1} %)",
                    pool.slo_violations * 100.0,
                    config.slo_threshold * 100.0
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
