//! MArk's provisioning (MArk §4.3, Algorithm 1): cover the forecast of the next steps
//! at the least cost per request served.

use super::{Action, AutoscaleConfig, Decision, Offer, PoolState, capacity};

/// MArk's provisioning (MArk §4.3, Algorithm 1) for one pool: cover the forecast of
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

/// MArk's provisioning step for every pool (MArk Algorithm 1, through [`mark_plan`]):
/// each pool's share of the `forecast` (one rate per step of `step_s`) is covered at the
/// least cost per request; running instances the plan leaves out are terminated once idle,
/// and on-demand stand-ins are traded back for spot as [`super::plan`] does.
/// `offers` prices each pool's instance types as [`super::plan`] does. Surplus instances
/// go once idle for `release_idle_s`.
#[allow(clippy::too_many_arguments)]
pub fn mark(
    forecast: &[f64],
    total_requests: u64,
    pools: &[PoolState],
    offers: &dyn Fn(&PoolState) -> Vec<Offer>,
    config: &AutoscaleConfig,
    step_s: f64,
    launch_s: f64,
    release_idle_s: f64,
) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for pool in pools {
        let before = decisions.len();
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
            if idle < release_idle_s || kept <= config.min_instances {
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
        if decisions.len() == before {
            decisions.extend(super::trade_to_spot(
                pool, weight, demand, &available, config,
            ));
        }
    }
    decisions
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
