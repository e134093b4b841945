use super::*;
use crate::predict::Ewma;

fn offer(name: &str, pf: u32, price: f64, burstable: bool) -> Offer {
    Offer {
        instance_type: name.into(),
        packing_factor: pf,
        price_per_hour: price * 0.3,
        on_demand_per_hour: price,
        spot: true,
        gpu: false,
        burstable,
        latency_ms: if burstable { 40.0 } else { 10.0 },
    }
}

fn pool(model: &str, calls: u64, misses: u64, instances: usize) -> PoolMeasure {
    PoolMeasure {
        model: model.into(),
        latency_ms: 10.0,
        calls,
        misses,
        recent_miss_share: None,
        instances: (0..instances)
            .map(|k| InstanceState {
                id: format!("{model}-{k}"),
                instance_type: "c5.large".into(),
                spot: true,
                packing_factor: 2,
                idle_s: 0.0,
                price_per_hour: 0.03,
            })
            .collect(),
        booting: false,
        in_use: true,
        slo_ms: None,
        offers: vec![
            offer("c5.large", 2, 0.085, false),
            offer("t3.medium", 1, 0.04, true),
        ],
    }
}

fn control(policy: Policy) -> Control {
    let config = ControlConfig {
        policy,
        ..ControlConfig::default()
    };
    Control::new(config, Box::new(Ewma::new(0.5)), 0.0)
}

fn launches(step: &Step, trigger: Trigger) -> u32 {
    step.decisions
        .iter()
        .filter(|(t, _)| *t == trigger)
        .map(|(_, d)| match d.action {
            Action::Launch { count, .. } => count,
            _ => 0,
        })
        .sum()
}

#[test]
fn reactive_check_comes_first_and_counts_only_its_own_interval() {
    let mut control = control(Policy::Cocktail);
    assert_eq!(control.next_due(), 10.0);
    assert!(!control.due(9.9));
    // 20 % of the first 10 s missed: one more instance.
    let m = Measurements {
        requests: 100,
        pools: vec![pool("a", 100, 20, 1)],
        ..Measurements::default()
    };
    let step = control.step(&m, 10.0);
    assert_eq!(launches(&step, Trigger::Reactive), 1);
    assert!(step.interval.is_none());
    // No new misses in the next 10 s: nothing, although the total share is still 10 %.
    let m = Measurements {
        requests: 200,
        pools: vec![pool("a", 200, 20, 2)],
        ..Measurements::default()
    };
    assert!(control.step(&m, 20.0).decisions.is_empty());
    // A booting pool is not asked again.
    let mut booting = pool("a", 300, 120, 2);
    booting.booting = true;
    let m = Measurements {
        requests: 300,
        pools: vec![booting],
        ..Measurements::default()
    };
    assert!(control.step(&m, 30.0).decisions.is_empty());
}

#[test]
fn at_a_shared_tick_the_reactive_check_runs_then_the_interval() {
    let mut control = control(Policy::Cocktail);
    for t in [10.0, 20.0, 30.0, 40.0, 50.0] {
        control.step(&Measurements::default(), t);
    }
    let m = Measurements {
        requests: 60_000,
        pools: vec![pool("a", 60_000, 0, 1)],
        ..Measurements::default()
    };
    let first = control.step(&m, 60.0);
    assert!(first.interval.is_none());
    assert!(control.due(60.0));
    let second = control.step(&m, 60.0);
    let report = second.interval.as_ref().expect("the interval closes");
    assert_eq!(report.requests, 60_000);
    assert!((report.rate - 1000.0).abs() < 1e-9);
    assert_eq!(report.pools[0].weight, 1.0);
    // 1,000 req/s of a 10 ms model: one c5.large (Pf 2) serves 190.
    assert!(launches(&second, Trigger::Predictive) > 0);
    assert!(!control.due(60.0));
    assert_eq!(control.next_due(), 70.0);
}

#[test]
fn target_tracking_buys_twice_the_load_and_never_reacts() {
    // Reactive sized to use all its capacity, to compare with twice the load; one
    // type may hold the whole pool.
    let autoscale = AutoscaleConfig {
        target_utilisation: 1.0,
        spot_type_share: 1.0,
        ..AutoscaleConfig::default()
    };
    let with = |policy| {
        let config = ControlConfig {
            policy,
            autoscale,
            ..ControlConfig::default()
        };
        Control::new(config, Box::new(Ewma::new(0.5)), 0.0)
    };
    let mut reactive = with(Policy::Reactive);
    let mut tracking = with(Policy::TargetTracking);
    assert_eq!(tracking.next_due(), 60.0);
    let m = Measurements {
        requests: 6000,
        pools: vec![pool("a", 6000, 3000, 0)],
        ..Measurements::default()
    };
    let mut r = Step::default();
    while reactive.due(60.0) {
        r = reactive.step(&m, 60.0);
    }
    let t = tracking.step(&m, 60.0);
    let (r, t) = (
        launches(&r, Trigger::Predictive),
        launches(&t, Trigger::Predictive),
    );
    assert!(t >= 2 * r - 1 && t <= 2 * r + 1, "{t} vs {r}");
}

#[test]
fn interruptions_are_replaced_on_demand_by_the_cheapest_burstable_type() {
    let mut control = control(Policy::Cocktail);
    let m = Measurements {
        pools: vec![pool("a", 0, 0, 2)],
        interruptions: vec![Interruption {
            id: "a-0".into(),
            pool: "a".into(),
            instance_type: "c5.large".into(),
            reason: "price above the bid".into(),
        }],
        ..Measurements::default()
    };
    let step = control.step(&m, 1.0);
    let [(Trigger::Interruption, decision)] = step.decisions.as_slice() else {
        panic!("{:?}", step.decisions);
    };
    assert_eq!(
        decision.action,
        Action::Launch {
            instance_type: "t3.medium".into(),
            count: 1,
            spot: false,
            price_per_hour: 0.04
        }
    );
}

#[test]
fn types_too_slow_for_the_pools_latency_target_are_not_bought() {
    // t3.medium is cheaper per request but takes 40 ms: a pool serving a 20 ms target
    // buys c5.large; with no target, or a 50 ms one, the cheaper type.
    let bought = |slo_ms: Option<f64>| {
        let control = control(Policy::Reactive);
        let mut a = pool("a", 0, 0, 0);
        a.slo_ms = slo_ms;
        a.offers[1].price_per_hour = 0.001;
        let m = Measurements {
            pools: vec![a],
            ..Measurements::default()
        };
        match &control.warm_start(&m)[..] {
            [
                Decision {
                    action: Action::Launch { instance_type, .. },
                    ..
                },
            ] => instance_type.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(bought(Some(20.0)), "c5.large");
    assert_eq!(bought(Some(50.0)), "t3.medium");
    assert_eq!(bought(None), "t3.medium");
    // No type fits 5 ms: the fastest still serves.
    assert_eq!(bought(Some(5.0)), "c5.large");
}

#[test]
fn pools_out_of_use_get_no_minimum_and_their_idle_instances_go() {
    let mut control = control(Policy::Cocktail);
    let mut unused = pool("b", 0, 0, 2);
    unused.in_use = false;
    unused.instances[0].idle_s = 601.0;
    let mut empty = pool("c", 0, 0, 0);
    empty.in_use = false;
    let m = Measurements {
        pools: vec![unused, empty],
        ..Measurements::default()
    };
    assert!(control.warm_start(&m).is_empty());
    let mut step = Step::default();
    while control.due(60.0) {
        step = control.step(&m, 60.0);
    }
    let actions: Vec<&Action> = step.decisions.iter().map(|(_, d)| &d.action).collect();
    assert_eq!(actions, [&Action::Terminate { id: "b-0".into() }]);
}

/// Closes one predictive interval at `t` with `rate` req/s through pool "a".
fn interval(control: &mut Control, received: &mut u64, rate: f64, t: f64) -> Step {
    *received += (rate * 60.0) as u64;
    let mut a = pool("a", *received, 0, 4);
    for i in &mut a.instances {
        i.idle_s = 120.0;
    }
    let m = Measurements {
        requests: *received,
        pools: vec![a],
        ..Measurements::default()
    };
    let mut step = Step::default();
    while control.due(t) {
        let s = control.step(&m, t);
        if s.interval.is_some() {
            step = s;
        }
    }
    step
}

#[test]
fn the_plan_covers_a_quantile_of_the_load_once_the_forecast_has_been_wrong() {
    // A load alternating 100 and 300 req/s: EWMA forecasts about 200, and misses by
    // up to ±100. Once it has been wrong often enough, the plan covers the upper
    // errors, not the mean.
    let mut c = control(Policy::Cocktail);
    let mut received = 0;
    let mut last = None;
    for k in 1..=40 {
        let rate = if k % 2 == 0 { 300.0 } else { 100.0 };
        let step = interval(&mut c, &mut received, rate, 60.0 * k as f64);
        last = step.interval;
    }
    let report = last.expect("an interval closed");
    assert!(
        (150.0..=250.0).contains(&report.forecast),
        "{}",
        report.forecast
    );
    assert!(
        report.predicted > report.forecast + 50.0,
        "planned {} for a forecast of {}",
        report.predicted,
        report.forecast
    );
    // Capacity wanted: the planned load over the 80 % target utilisation.
    let demand = report.pools[0].demand;
    assert!(
        (demand - report.predicted / 0.8).abs() < 1e-6,
        "{demand} vs {}",
        report.predicted
    );
}

#[test]
fn a_start_before_the_load_is_no_forecast_error() {
    // The loop starts a minute before the load, which arrives 40 s into the second
    // interval and then holds at 90 req/s: the intervals before a whole one of load are
    // no observations, so the plan is the steady load's, with no margin for the ramp.
    // Counted, the ramp's relative errors (from 0, and from a third of the rate) were
    // the record's largest, and its 90th percentile planned 1.7 times the forecast.
    let mut c = control(Policy::Cocktail);
    let mut received = 0;
    let mut last = None;
    for (k, rate) in [0.0, 30.0].into_iter().chain([90.0; 20]).enumerate() {
        let step = interval(&mut c, &mut received, rate, 60.0 * (k + 1) as f64);
        last = step.interval;
    }
    let report = last.expect("an interval closed");
    assert!(
        (report.forecast - 90.0).abs() < 1e-6 && (report.predicted - 90.0).abs() < 1e-6,
        "forecast {}, planned {}",
        report.forecast,
        report.predicted
    );
}

#[test]
fn the_first_interval_with_load_plans_for_its_rate_and_the_next_starts_the_forecast() {
    // Load from the start: the first interval may still have begun without it, so it
    // plans for its own rate and EWMA starts from the second.
    let mut c = control(Policy::Cocktail);
    let mut received = 0;
    let mut forecasts = Vec::new();
    for (k, rate) in [90.0, 50.0, 70.0].into_iter().enumerate() {
        let step = interval(&mut c, &mut received, rate, 60.0 * (k + 1) as f64);
        forecasts.push(step.interval.expect("an interval closed").forecast);
    }
    assert_eq!(forecasts, [90.0, 50.0, 60.0]);
}

#[test]
fn idle_capacity_goes_when_the_forecast_does_not_need_it_and_tracking_waits() {
    // Four instances of 190 req/s idle for two minutes, and a load of 20 req/s for
    // 20 minutes: Cocktail keeps what the forecast needs (its minimum), target
    // tracking keeps the highest load of the last 15 minutes over 0.7.
    let mut cocktail = control(Policy::Cocktail);
    let mut tracking = control(Policy::TargetTracking70);
    let (mut a, mut b) = (0, 0);
    for k in 1..=20 {
        interval(&mut cocktail, &mut a, 20.0, 60.0 * k as f64);
        interval(&mut tracking, &mut b, 20.0, 60.0 * k as f64);
    }
    let terminations = |step: &Step| {
        step.decisions
            .iter()
            .filter(|(_, d)| matches!(d.action, Action::Terminate { .. }))
            .count()
    };
    let c = interval(&mut cocktail, &mut a, 20.0, 60.0 * 21.0);
    assert_eq!(terminations(&c), 3, "down to the minimum: {c:?}");
    // A burst 10 minutes ago: tracking keeps capacity for it.
    let mut tracking = control(Policy::TargetTracking70);
    let mut b = 0;
    for k in 1..=20 {
        let rate = if k == 10 { 500.0 } else { 20.0 };
        interval(&mut tracking, &mut b, rate, 60.0 * k as f64);
    }
    let t = interval(&mut tracking, &mut b, 20.0, 60.0 * 21.0);
    assert_eq!(terminations(&t), 0, "500 / 0.7 needs all four: {t:?}");
    let first = (22..=30).find(|&k| {
        let step = interval(&mut tracking, &mut b, 20.0, 60.0 * k as f64);
        terminations(&step) > 0
    });
    assert_eq!(
        first,
        Some(25),
        "15 minutes after the burst's minute it scales in"
    );
}
