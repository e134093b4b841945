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
        latency_ms: 10.0,
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
    target_utilisation: 1.0,
    spot_type_share: 1.0,
};

/// Buys and keeps `rate`; releases after the recycling timeout.
fn steady(rate: f64) -> Target {
    Target::steady(rate, CONFIG.idle_timeout_s)
}

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
        booting: false,
        spot_calm: true,
    }
}

#[test]
fn an_on_demand_stand_in_is_traded_for_spot_once_the_spot_cover_is_up() {
    // Two spot instances and an on-demand stand-in ($0.15/h) serving 300 req/s of a
    // 500 req/s load: no need to buy or release; a spot cover of the stand-in (one
    // small, $0.05/h) is cheaper, so it is launched.
    let mut p = pool("m", 10, 2, 0.0);
    p.instances.push(InstanceState {
        id: "m-od".into(),
        instance_type: "small".into(),
        spot: false,
        packing_factor: 2,
        idle_s: 0.0,
        price_per_hour: 0.15,
    });
    let offers = |_: &PoolState| vec![offer("small", 2, 0.05, false)];
    let plan_for = |p: &PoolState| {
        plan(
            &steady(500.0),
            10,
            std::slice::from_ref(p),
            &offers,
            &CONFIG,
        )
    };
    let launched = plan_for(&p);
    assert!(
        matches!(
            launched.as_slice(),
            [Decision {
                action: Action::Launch {
                    count: 1,
                    spot: true,
                    ..
                },
                ..
            }]
        ),
        "{launched:?}"
    );
    // Not while the pool's spot instances are being interrupted.
    p.spot_calm = false;
    assert!(plan_for(&p).is_empty());
    p.spot_calm = true;
    // While the cover boots, nothing more.
    p.booting = true;
    p.instances.push(InstanceState {
        id: "m-cover".into(),
        ..p.instances[0].clone()
    });
    assert!(plan_for(&p).is_empty());
    // Once it serves, the rest covers the load: the stand-in goes.
    p.booting = false;
    let traded = plan_for(&p);
    assert_eq!(
        traded.iter().map(|d| &d.action).collect::<Vec<_>>(),
        [&Action::Terminate { id: "m-od".into() }]
    );
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
    let decisions = plan(&steady(1000.0), 1000, &pools, &offers, &CONFIG);
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
    let decisions = plan(&steady(300.0), 10, &pools, &offers, &CONFIG);
    let terminated: Vec<_> = decisions
        .iter()
        .filter(|d| matches!(d.action, Action::Terminate { .. }))
        .collect();
    assert_eq!(terminated.len(), 2, "{decisions:?}");
    // No demand at all: down to the minimum of one.
    let decisions = plan(&steady(0.0), 0, &[pool("a", 0, 4, 900.0)], &offers, &CONFIG);
    assert_eq!(decisions.len(), 3);
    // Busy instances stay.
    assert!(plan(&steady(0.0), 0, &[pool("a", 0, 4, 10.0)], &offers, &CONFIG).is_empty());
    // An empty pool gets its minimum back.
    let decisions = plan(&steady(0.0), 0, &[pool("a", 0, 0, 0.0)], &offers, &CONFIG);
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
fn alternates_buy_the_same_capacity_in_the_same_market() {
    let offer = |name: &str, pf: u32, price: f64, spot: bool, gpu: bool| Offer {
        instance_type: name.into(),
        packing_factor: pf,
        price_per_hour: price,
        spot,
        gpu,
        on_demand_per_hour: price,
        burstable: false,
        latency_ms: 1.0,
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

#[test]
fn instances_idle_for_the_release_time_go_down_to_what_the_forecast_keeps() {
    // 4 instances of 200 req/s idle for 2 minutes; buy 100 req/s now, keep 500.
    let pools = [pool("a", 10, 4, 120.0)];
    let target = Target {
        buy: 100.0,
        keep: 500.0,
        release_idle_s: 60.0,
    };
    let decisions = plan(&target, 10, &pools, &offers, &CONFIG);
    assert_eq!(
        decisions.len(),
        1,
        "800 − 200 still keeps 500: {decisions:?}"
    );
    assert!(decisions[0].reason.contains("500.0 req/s to keep"));
    // Not idle long enough: nothing goes.
    let target = Target {
        release_idle_s: 121.0,
        ..target
    };
    assert!(plan(&target, 10, &pools, &offers, &CONFIG).is_empty());
}

#[test]
fn one_spot_type_holds_at_most_its_share_of_a_pool() {
    let config = AutoscaleConfig {
        spot_type_share: 0.5,
        ..CONFIG
    };
    // One small (200 req/s) serves; 500 more: small × 3 would make 4 of 4 smalls, so
    // one small (2 of 4) and the rest on the next cheapest type.
    let pools = [pool("a", 10, 1, 0.0)];
    let decisions = plan(&steady(700.0), 10, &pools, &offers, &config);
    let bought: Vec<(String, u32)> = decisions
        .iter()
        .filter_map(|d| match &d.action {
            Action::Launch {
                instance_type,
                count,
                ..
            } => Some((instance_type.clone(), *count)),
            _ => None,
        })
        .collect();
    assert_eq!(
        bought,
        [("small".to_owned(), 1), ("big".to_owned(), 1)],
        "{decisions:?}"
    );
    // No limit: all small.
    let decisions = plan(&steady(700.0), 10, &pools, &offers, &CONFIG);
    assert!(matches!(
        &decisions[..],
        [Decision { action: Action::Launch { count: 3, instance_type, .. }, .. }] if instance_type == "small"
    ));
    // A pool's first instance is never split.
    let decisions = plan(
        &steady(100.0),
        10,
        &[pool("a", 10, 0, 0.0)],
        &offers,
        &config,
    );
    assert_eq!(decisions.len(), 1);
}
