//! The autoscaler and the procurement policy (Cocktail §4.2, Algorithm 2), as pure code:
//! the live controller and the simulator pass in the pools as they are and the predicted
//! load, and carry out the decisions.
//!
//! - Importance sampling: a pool's weight is its share of the requests of the last
//!   window (5 minutes); its demand is the predicted load times its weight.
//! - Procurement: `An = demand − Cr`, with `Cr` the capacity of the pool's instances
//!   (those still provisioning included). The type chosen minimises the cost of covering
//!   `An`: `price × ⌈An / capacity⌉`; a GPU only when `An` fills its capacity.
//! - Recycling: instances idle for the timeout go, as long as the rest still covers the
//!   demand and the pool keeps its minimum.
//! - Reactive: a pool whose SLO violations over the last check exceed the threshold gets
//!   one more instance at once, whatever the prediction says.
//!
//! Capacity is in requests per second: an instance with packing factor `Pf` serves `Pf`
//! requests at once, each taking the model's latency plus the per-request overhead
//! (HTTP, preprocessing), so it completes `Pf × 1000 / (latency_ms + overhead_ms)` per
//! second (Little's law).

use serde::{Deserialize, Serialize};

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
}

impl Offer {
    /// What `ty` costs now: spot when `spot_allowed` and its price is under the `bid`,
    /// else on-demand.
    pub fn priced(
        ty: &cocktail_common::catalog::InstanceType,
        packing_factor: u32,
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
        }
    }
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
}

impl Default for AutoscaleConfig {
    fn default() -> Self {
        Self {
            overhead_ms: 0.5,
            idle_timeout_s: 600.0,
            min_instances: 1,
            slo_threshold: 0.05,
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
    /// Start a stopped instance (a cold standby, mark.txt §4.5).
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

/// One autoscaling interval (Algorithm 2): `predicted` is the load (requests per second)
/// expected when new instances would be ready, `total_requests` the requests of the
/// importance window (an ensemble request counts once there and once in each of its
/// members' pools, so a pool in every ensemble has weight 1); `offers(pool)` lists what
/// each pool can get.
pub fn plan(
    predicted: f64,
    total_requests: u64,
    pools: &[PoolState],
    offers: &dyn Fn(&PoolState) -> Vec<Offer>,
    config: &AutoscaleConfig,
) -> Vec<Decision> {
    let total = total_requests;
    let mut decisions = Vec::new();
    for pool in pools {
        let weight = pool.weight(total);
        let demand = predicted.max(0.0) * weight;
        let capacity_now = pool.capacity(config);
        let missing = config.min_instances.saturating_sub(pool.instances.len());
        let needed = demand - capacity_now;
        if needed > 0.0 || missing > 0 {
            let offers = offers(pool);
            let target = if needed > 0.0 { needed } else { 0.0 };
            if let Some((offer, count)) = procure(
                target.max(f64::MIN_POSITIVE),
                pool.latency_ms,
                &offers,
                config,
            ) {
                let count = count.max(missing as u32);
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
                            "predicted {predicted:.1} req/s × weight {weight:.2} = {demand:.1} req/s exceeds capacity {capacity_now:.1}; cheapest cover: {count} × {} at ${:.4}/h ({})",
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
        // Recycle idle instances the demand does not need, most idle first.
        let mut idle: Vec<&InstanceState> = pool
            .instances
            .iter()
            .filter(|i| i.idle_s >= config.idle_timeout_s)
            .collect();
        idle.sort_by(|a, b| b.idle_s.total_cmp(&a.idle_s).then(a.id.cmp(&b.id)));
        let mut remaining = capacity_now;
        let mut kept = pool.instances.len();
        for instance in idle {
            let own = capacity(instance.packing_factor, pool.latency_ms, config);
            if kept <= config.min_instances || remaining - own < demand {
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
                demand,
                capacity: capacity_now,
                reason: format!(
                    "idle {:.0} s (timeout {:.0} s); the rest covers {demand:.1} req/s",
                    instance.idle_s, config.idle_timeout_s
                ),
            });
        }
    }
    decisions
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

/// MArk's provisioning (mark.txt §4.3, Algorithm 1) for one pool: cover the forecast of
/// the next steps at the least cost per request served, counting each new instance's
/// launch overhead; running instances are candidates without overhead. Returns the
/// instance types to launch and the running instances the plan does not need.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkPlan {
    pub launch: Vec<String>,
    pub keep: Vec<String>,
    pub surplus: Vec<String>,
}

/// `forecast[t]` is the pool's load (req/s) at step `t + 1`; steps last `step_s` seconds
/// and a launch takes `launch_s` (paid while booting).
pub fn mark_plan(
    forecast: &[f64],
    running: &[(String, f64, f64)],
    offers: &[(String, f64, f64)],
    step_s: f64,
    launch_s: f64,
) -> MarkPlan {
    // `running` and `offers` are (id or type, capacity in req/s, price per hour). Each
    // running instance can join once, each offered type any number of times. The plan
    // holds (running id, or None for a new instance of the type, capacity).
    let mut plan: Vec<(Option<String>, String, f64)> = Vec::new();
    let mut unused: Vec<&(String, f64, f64)> = running.iter().collect();
    // Every pick serves some unfilled request, so the loop ends; the bound is a guard.
    let limit = 10_000;
    while plan.len() < limit {
        let capacity: f64 = plan.iter().map(|p| p.2).sum();
        let unfilled: Vec<f64> = forecast.iter().map(|f| f - capacity).collect();
        let Some(tau) = unfilled.iter().position(|&u| u > 0.0) else {
            break;
        };
        let end = unfilled[tau..]
            .iter()
            .position(|&u| u <= 0.0)
            .map_or(unfilled.len(), |k| tau + k);
        let steps = (end - tau) as f64;
        let served = |cap: f64| -> f64 {
            unfilled[tau..end].iter().map(|&u| u.min(cap)).sum::<f64>() * step_s
        };
        // Cost per request served: (O_i + (e − τ) P_i) / N, with O_i = 0 when running.
        let per_request = |cap: f64, price: f64, overhead_s: f64| {
            let n = served(cap);
            (n > 0.0).then(|| (overhead_s + steps * step_s) / 3600.0 * price / n)
        };
        let best_running = unused
            .iter()
            .enumerate()
            .filter_map(|(k, (_, cap, price))| per_request(*cap, *price, 0.0).map(|c| (c, k)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let best_new = offers
            .iter()
            .enumerate()
            .filter_map(|(k, (_, cap, price))| per_request(*cap, *price, launch_s).map(|c| (c, k)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let running_wins = match (best_running, best_new) {
            (Some((r, _)), Some((n, _))) => r <= n,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if let (true, Some((_, k))) = (running_wins, best_running) {
            let (id, cap, _) = unused.remove(k);
            plan.push((Some(id.clone()), String::new(), *cap));
        } else if let Some((_, k)) = best_new {
            let (name, cap, _) = &offers[k];
            plan.push((None, name.clone(), *cap));
        } else {
            break;
        }
    }
    MarkPlan {
        launch: plan
            .iter()
            .filter(|p| p.0.is_none())
            .map(|p| p.1.clone())
            .collect(),
        keep: plan.iter().filter_map(|p| p.0.clone()).collect(),
        surplus: unused.into_iter().map(|r| r.0.clone()).collect(),
    }
}

/// MArk's provisioning step for every pool (mark.txt Algorithm 1, through [`mark_plan`]):
/// each pool's share of the `forecast` (one rate per step of `step_s`) is covered at the
/// least cost per request; running instances the plan leaves out are terminated once idle.
/// `offers` prices each pool's instance types as [`plan`] does.
pub fn mark(
    forecast: &[f64],
    total_requests: u64,
    pools: &[PoolState],
    offers: &dyn Fn(&PoolState) -> Vec<Offer>,
    config: &AutoscaleConfig,
    step_s: f64,
    launch_s: f64,
) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for pool in pools {
        let weight = pool.weight(total_requests);
        let share: Vec<f64> = forecast.iter().map(|f| f * weight).collect();
        let capacity_of = |pf: u32| capacity(pf, pool.latency_ms, config);
        let running: Vec<(String, f64, f64)> = pool
            .instances
            .iter()
            .map(|i| {
                (
                    i.id.clone(),
                    capacity_of(i.packing_factor),
                    i.price_per_hour,
                )
            })
            .collect();
        let available = offers(pool);
        let candidates: Vec<(String, f64, f64)> = available
            .iter()
            .filter(|o| !o.gpu || share.iter().any(|f| *f >= capacity_of(o.packing_factor)))
            .map(|o| {
                (
                    o.instance_type.clone(),
                    capacity_of(o.packing_factor),
                    o.price_per_hour,
                )
            })
            .collect();
        let planned = mark_plan(&share, &running, &candidates, step_s, launch_s);
        let demand = share.iter().copied().fold(0.0, f64::max);
        let capacity_now: f64 = running.iter().map(|r| r.1).sum();
        let mut launches: Vec<(String, String)> = planned
            .launch
            .into_iter()
            .map(|name| {
                let reason = format!(
                    "MArk: peak forecast {demand:.1} req/s (weight {weight:.2}) over {} steps; {name} is the least cost per request",
                    share.len()
                );
                (name, reason)
            })
            .collect();
        // Keep the pool's minimum even when no load is forecast.
        let cheapest = candidates
            .iter()
            .min_by(|a, b| a.2.total_cmp(&b.2))
            .map(|o| o.0.clone());
        while let (true, Some(name)) = (
            pool.instances.len() + launches.len() < config.min_instances,
            &cheapest,
        ) {
            launches.push((
                name.clone(),
                format!(
                    "pool below its minimum of {} instance(s)",
                    config.min_instances
                ),
            ));
        }
        let mut counts: Vec<((String, String), u32)> = Vec::new();
        for launch in launches {
            match counts.iter_mut().find(|(l, _)| *l == launch) {
                Some((_, n)) => *n += 1,
                None => counts.push((launch, 1)),
            }
        }
        for ((name, reason), count) in counts {
            let Some(offer) = available.iter().find(|o| o.instance_type == name) else {
                continue;
            };
            decisions.push(Decision {
                pool: pool.model.clone(),
                action: Action::Launch {
                    instance_type: name,
                    count,
                    spot: offer.spot,
                    price_per_hour: offer.price_per_hour,
                },
                weight,
                demand,
                capacity: capacity_now,
                reason,
            });
        }
        let mut kept = pool.instances.len();
        for id in planned.surplus {
            let idle = pool
                .instances
                .iter()
                .find(|i| i.id == id)
                .map_or(0.0, |i| i.idle_s);
            if idle < config.idle_timeout_s || kept <= config.min_instances {
                continue;
            }
            kept -= 1;
            decisions.push(Decision {
                pool: pool.model.clone(),
                action: Action::Terminate { id },
                weight,
                demand,
                capacity: capacity_now,
                reason: format!(
                    "MArk: not in the plan for the next {} steps and idle {idle:.0} s",
                    share.len()
                ),
            });
        }
    }
    decisions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(name: &str, pf: u32, price: f64, gpu: bool) -> Offer {
        Offer {
            instance_type: name.into(),
            packing_factor: pf,
            price_per_hour: price,
            spot: true,
            gpu,
            on_demand_per_hour: price * 3.0,
            burstable: false,
        }
    }

    fn offers(_: &PoolState) -> Vec<Offer> {
        vec![
            offer("small", 2, 0.05, false),
            offer("big", 8, 0.18, false),
            offer("gpu", 64, 0.20, true),
        ]
    }

    const CONFIG: AutoscaleConfig = AutoscaleConfig {
        overhead_ms: 0.0,
        idle_timeout_s: 600.0,
        min_instances: 1,
        slo_threshold: 0.05,
    };

    fn pool(model: &str, requests: u64, instances: usize, idle_s: f64) -> PoolState {
        PoolState {
            model: model.into(),
            latency_ms: 10.0, // Pf 1 serves 100 req/s
            requests,
            instances: (0..instances)
                .map(|i| InstanceState {
                    id: format!("{model}-{i}"),
                    instance_type: "small".into(),
                    spot: true,
                    packing_factor: 2,
                    idle_s,
                    price_per_hour: 0.05,
                })
                .collect(),
            slo_violations: 0.0,
        }
    }

    #[test]
    fn procurement_covers_the_need_at_the_least_cost_and_gpus_only_when_filled() {
        let offers = offers(&pool("m", 0, 0, 0.0));
        // 300 req/s: small (200/s) × 2 = $0.10, big (800/s) × 1 = $0.18 → small.
        let (o, n) = procure(300.0, 10.0, &offers, &CONFIG).unwrap();
        assert_eq!((o.instance_type.as_str(), n), ("small", 2));
        // 1,500 req/s: small × 8 = $0.40, big × 2 = $0.36, gpu (6,400/s) not filled.
        let (o, n) = procure(1500.0, 10.0, &offers, &CONFIG).unwrap();
        assert_eq!((o.instance_type.as_str(), n), ("big", 2));
        // 6,400 req/s fills the GPU: $0.20 beats big × 8 = $1.44.
        let (o, n) = procure(6400.0, 10.0, &offers, &CONFIG).unwrap();
        assert_eq!((o.instance_type.as_str(), n), ("gpu", 1));
    }

    #[test]
    fn popular_pools_get_capacity_in_proportion_to_their_weight() {
        // 1,000 req/s predicted; a is in 90 % of requests, b in 10 %. Each has 200 req/s.
        let pools = [pool("a", 900, 1, 0.0), pool("b", 100, 1, 0.0)];
        let decisions = plan(1000.0, 1000, &pools, &offers, &CONFIG);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let d = &decisions[0];
        assert_eq!(d.pool, "a");
        assert!((d.weight - 0.9).abs() < 1e-9 && (d.demand - 900.0).abs() < 1e-9);
        // 700 req/s more: small × 4 = $0.20 vs big × 1 = $0.18.
        assert!(
            matches!(&d.action, Action::Launch { instance_type, count: 1, .. } if instance_type == "big")
        );
        assert!(d.reason.contains("weight 0.90"), "{}", d.reason);
    }

    #[test]
    fn idle_instances_are_recycled_down_to_what_demand_and_the_minimum_need() {
        // 4 idle instances of 200 req/s; demand 300 req/s keeps two.
        let pools = [pool("a", 10, 4, 900.0)];
        let decisions = plan(300.0, 10, &pools, &offers, &CONFIG);
        let terminated: Vec<_> = decisions
            .iter()
            .filter(|d| matches!(d.action, Action::Terminate { .. }))
            .collect();
        assert_eq!(terminated.len(), 2, "{decisions:?}");
        // No demand at all: down to the minimum of one.
        let decisions = plan(0.0, 0, &[pool("a", 0, 4, 900.0)], &offers, &CONFIG);
        assert_eq!(decisions.len(), 3);
        // Busy instances stay.
        assert!(plan(0.0, 0, &[pool("a", 0, 4, 10.0)], &offers, &CONFIG).is_empty());
        // An empty pool gets its minimum back.
        let decisions = plan(0.0, 0, &[pool("a", 0, 0, 0.0)], &offers, &CONFIG);
        assert!(matches!(
            &decisions[0].action,
            Action::Launch { count: 1, .. }
        ));
    }

    #[test]
    fn slo_violations_add_an_instance_at_once() {
        let mut hot = pool("a", 10, 1, 0.0);
        hot.slo_violations = 0.2;
        let decisions = react(&[hot, pool("b", 10, 1, 0.0)], &offers, &CONFIG);
        assert_eq!(decisions.len(), 1);
        assert_eq!(decisions[0].pool, "a");
        assert!(decisions[0].reason.contains("20.0 %"));
    }
    #[test]
    fn mark_covers_the_forecast_cheapest_per_request_and_reuses_running_instances() {
        let offers = vec![
            ("small".to_owned(), 100.0, 0.10),
            ("big".to_owned(), 400.0, 0.30),
        ];
        // 350 req/s for 5 steps of a minute: one big (0.30/h) beats four smalls (0.40/h).
        let plan = mark_plan(&[350.0; 5], &[], &offers, 60.0, 60.0);
        assert_eq!(plan.launch, vec!["big".to_owned()]);
        // A running small is kept at no launch cost; the rest is covered by new ones.
        let running = vec![
            ("i-1".to_owned(), 100.0, 0.10),
            ("i-2".to_owned(), 100.0, 0.10),
        ];
        let plan = mark_plan(&[150.0; 5], &running, &offers, 60.0, 60.0);
        assert_eq!(plan.keep.len(), 2, "{plan:?}");
        assert!(plan.launch.is_empty() && plan.surplus.is_empty());
        // Load falls: one running instance is surplus.
        let plan = mark_plan(&[80.0; 5], &running, &offers, 60.0, 60.0);
        assert_eq!((plan.keep.len(), plan.surplus.len()), (1, 1));
        // A short spike late in the window is covered only for its steps.
        let plan = mark_plan(
            &[50.0, 50.0, 50.0, 500.0],
            &running[..1],
            &offers,
            60.0,
            60.0,
        );
        assert_eq!(plan.keep.len(), 1);
        assert!(!plan.launch.is_empty());
        assert!(
            mark_plan(&[0.0; 3], &[], &offers, 60.0, 60.0)
                .launch
                .is_empty()
        );
    }

    #[test]
    fn alternates_buy_the_same_capacity_in_the_same_market() {
        let offer = |name: &str, pf: u32, price: f64, spot: bool, gpu: bool| Offer {
            instance_type: name.into(),
            packing_factor: pf,
            price_per_hour: price,
            spot,
            gpu,
            on_demand_per_hour: price,
            burstable: false,
        };
        let chosen = offer("c5.xlarge", 8, 0.08, true, false);
        let offers = vec![
            chosen.clone(),
            offer("c5.2xlarge", 16, 0.15, true, false),
            offer("m5.xlarge", 8, 0.095, true, false),
            offer("r5.xlarge", 8, 0.2, true, false),
            offer("c6i.xlarge", 8, 0.07, false, false),
            offer("g4dn.xlarge", 64, 0.3, true, true),
        ];
        assert_eq!(
            alternates(&chosen, &offers, 3),
            vec![
                ("c5.2xlarge".to_owned(), 2.0),
                ("m5.xlarge".to_owned(), 1.0)
            ]
        );
        assert_eq!(alternates(&chosen, &offers, 1).len(), 1);
    }
}
