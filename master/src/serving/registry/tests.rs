//! The registry's pools, slots and health signals.

use cocktail_common::catalog::Catalog;
use cocktail_common::latency::BatchLatency;

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
    registry.register(&registration("a", 2)).unwrap();
    registry.register(&registration("b", 2)).unwrap();
    let pool = registry.pool("m").unwrap();
    let soon = Instant::now() + Duration::from_millis(50);
    let first = pool.acquire(soon, &[], 1).await.unwrap();
    let second = pool.acquire(soon, &[], 1).await.unwrap();
    // The first instance fills before the second is used.
    assert_eq!(first.instance.id, second.instance.id);
    let third = pool.acquire(soon, &[], 1).await.unwrap();
    let fourth = pool.acquire(soon, &[], 1).await.unwrap();
    // Free slots are taken at once: no call waited (a late answer is not the pool's miss).
    assert!(![&first, &second, &third, &fourth].iter().any(|l| l.queued));
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
                .map(|l| (l.instance.id.clone(), l.queued))
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    drop(fourth);
    // It waited for its slot: were it late, the pool's capacity would be why.
    assert_eq!(
        waiter.await.unwrap().unwrap(),
        (third.instance.id.clone(), true)
    );
    drop((first, second));
}

#[tokio::test]
async fn waiting_calls_get_slots_first_come_first_served_except_where_excluded() {
    let registry = Registry::default();
    registry.register(&registration("a", 1)).unwrap();
    registry.register(&registration("b", 1)).unwrap();
    let pool = registry.pool("m").unwrap();
    let later = || Instant::now() + Duration::from_secs(5);
    let on_a = pool.acquire(later(), &[], 1).await.unwrap();
    let on_b = pool.acquire(later(), &[], 1).await.unwrap();
    let a = Arc::clone(&on_a.instance);
    // Four calls wait, in this order; the third already tried `a`. Each holds its slot
    // 100 ms.
    let (served, mut order) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for k in 0..4 {
        let (pool, served) = (Arc::clone(&pool), served.clone());
        let exclude = if k == 2 { vec![Arc::clone(&a)] } else { vec![] };
        waiters.push(tokio::spawn(async move {
            let lease = pool.acquire(later(), &exclude, 1).await.unwrap();
            served.send((k, lease.instance.id.clone())).unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // `a` is given back, and a new call comes before the waiters could look: it does
    // not jump the line.
    drop(on_a);
    let newcomer = tokio::time::timeout(Duration::from_millis(5), pool.acquire(later(), &[], 1));
    assert!(
        newcomer.await.is_err(),
        "a new call took the slot an older one waits for"
    );
    assert_eq!(order.recv().await.unwrap(), (0, "a".to_owned()));
    // `b` 50 ms later: the second; `a` again: the fourth, as the third cannot use it;
    // `b` again: the third.
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(on_b);
    let mut rest = Vec::new();
    for _ in 0..3 {
        rest.push(order.recv().await.unwrap());
    }
    let expected = [(1, "b"), (3, "a"), (2, "b")].map(|(k, i)| (k, i.to_owned()));
    assert_eq!(rest, expected);
    for w in waiters {
        w.await.unwrap();
    }
}

#[tokio::test]
async fn requests_spill_to_burst_instances_only_when_the_regular_ones_are_full() {
    let registry = Registry::default();
    registry
        .register(&Registration {
            burst: true,
            ..registration("lambda", 4)
        })
        .unwrap();
    registry.register(&registration("a", 1)).unwrap();
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
    registry.register(&registration("a", 1)).unwrap();
    registry.register(&registration("b", 1)).unwrap();
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
    registry.register(&registration("a", 4)).unwrap();
    let pool = registry.pool("m").unwrap();
    let soon = Instant::now() + Duration::from_millis(20);
    for _ in 0..UNANSWERED_LIMIT - 1 {
        let mut lease = pool.acquire(soon, &[], 1).await.unwrap();
        lease.sent(); // ... and dropped without an answer (timed out, or hedged)
    }
    // An answer resets the count; a lease never used for a call counts nothing.
    let mut answered = pool.acquire(soon, &[], 1).await.unwrap();
    answered.sent();
    answered.answered(true);
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

/// A pool of a GPU and a small CPU instance (Kairos Fig. 5): a large batch is
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
    registry
        .register(&Registration {
            instance_type: Some("r5n.large".into()),
            ..registration("cpu", 1)
        })
        .unwrap();
    registry
        .register(&Registration {
            instance_type: Some("g4dn.xlarge".into()),
            ..registration("gpu", 1)
        })
        .unwrap();
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

#[test]
fn a_url_that_cannot_be_called_is_refused_naming_the_field() {
    let registry = Registry::default();
    let mut bad = registration("a", 1);
    for url in ["not a url", "ftp://a", "unix:/run/worker.sock"] {
        bad.url = url.into();
        let error = registry.register(&bad).unwrap_err().to_string();
        assert!(error.contains("`url`") && error.contains(url), "{error}");
    }
    assert!(registry.pool("m").is_none());
    registry.register(&registration("a", 1)).unwrap();
    let pool = registry.pool("m").unwrap();
    let instance = &pool.instances()[0];
    assert_eq!(instance.infer_url.to_string(), "http://a/v2/models/m/infer");
}

/// With the hop counted, an instance of a quick model takes as many calls at once as fit
/// within the packing slack, hop included; a slow model, or no hop, keeps the packing
/// factor.
#[test]
fn the_registry_counts_the_hop_for_quick_models() {
    let catalog = Arc::new(Catalog::embedded().unwrap());
    let speed = |fixed_us, per_item_us| {
        Arc::new(Speed {
            latency: BatchLatency {
                fixed_us,
                per_item_us,
            },
            catalog: Arc::clone(&catalog),
        })
    };
    let speeds = HashMap::from([
        // dwsep-like: 30 µs alone, 42 µs for two; its profile packs one call.
        ("quick".to_owned(), speed(18.0, 12.0)),
        // 5 ms per item: over the linger.
        ("slow".to_owned(), speed(100.0, 5000.0)),
    ]);
    let slots = |registry: &Registry, model: &str| {
        registry
            .register(&Registration {
                model: model.into(),
                ..registration(model, 1)
            })
            .unwrap();
        registry
            .view()
            .iter()
            .find(|i| i.id == model)
            .unwrap()
            .packing_factor
    };
    let off = Registry::with_speeds(speeds.clone());
    assert_eq!(slots(&off, "quick"), 1, "no hop counted");
    let counting = Registry::with_speeds(speeds).counting_hop(HopSlots {
        linger_ms: 0.2,
        hop_ms: 0.3,
    });
    // 18 + 12 b + 300 ≤ 1.5 × (30 + 300) + 200: b ≤ 31.4.
    assert_eq!(slots(&counting, "quick"), 31);
    assert_eq!(slots(&counting, "slow"), 1, "not quick");
}

/// A profile of 1 ms of inference per item on the host.
fn one_ms_per_item() -> Arc<Speed> {
    Arc::new(Speed {
        latency: BatchLatency {
            fixed_us: 0.0,
            per_item_us: 1000.0,
        },
        catalog: Arc::new(Catalog::embedded().unwrap()),
    })
}

/// A member answer joins its pool's overhead, counted from when its call asked for a
/// slot, when in time, or late on a slot it had at once (its request stopped waiting,
/// but the hop was the pool's); not a late one that waited for its slot (the pool's
/// backlog), nor an error answer.
#[tokio::test]
async fn late_answers_count_towards_the_overhead_unless_they_queued() {
    let registry = Registry::with_speeds(HashMap::from([("m".to_owned(), one_ms_per_item())]));
    registry.register(&registration("a", 1)).unwrap();
    let pool = registry.pool("m").unwrap();
    let later = || Instant::now() + Duration::from_secs(5);
    let call = |lease: &mut Lease| {
        let now = Instant::now();
        lease.measure(now, 1, now + Duration::from_millis(1));
        lease.sent();
    };
    let mut error = pool.acquire(later(), &[], 1).await.unwrap();
    call(&mut error);
    error.answered(false);
    drop(error);
    assert_eq!(pool.overhead_ms(), None, "an error answer is no measure");
    // Late on a slot it had at once, while another call waits for the slot.
    let mut late = pool.acquire(later(), &[], 1).await.unwrap();
    call(&mut late);
    let queued = tokio::spawn({
        let pool = Arc::clone(&pool);
        async move { pool.acquire(later(), &[], 1).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    late.answered(true);
    let overhead = pool.overhead_ms().unwrap();
    assert!(
        overhead >= 29.0,
        "30 ms from asking, 1 ms of it inference: {overhead} ms"
    );
    drop(late);
    let mut queued = queued.await.unwrap();
    assert!(queued.queued);
    call(&mut queued);
    tokio::time::sleep(Duration::from_millis(5)).await;
    queued.answered(true);
    assert_eq!(
        pool.overhead_ms(),
        Some(overhead),
        "a late answer that waited for its slot is the backlog's"
    );
}

/// A readiness probe is one round trip, taken as a worker starts (often while others
/// load): before any member call the probes' median is every probed pool's overhead, and
/// once calls were measured a pool without calls of its own counts the measured pools'
/// median, not its probe.
#[test]
fn probes_stand_in_for_the_fleets_hop_only_until_calls_are_measured() {
    let registry = Registry::with_speeds(HashMap::from([("a".to_owned(), one_ms_per_item())]));
    for model in ["a", "b", "c"] {
        registry
            .register(&Registration {
                model: model.into(),
                ..registration(model, 1)
            })
            .unwrap();
    }
    let models: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let pool = |m: &str| registry.pool(m).unwrap();
    assert_eq!(registry.overheads(&models), [None, None, None]);
    pool("a").observe_probe(Duration::from_millis(2));
    pool("b").observe_probe(Duration::from_millis(150));
    let times = registry.response_times(&models);
    assert_eq!(
        times.overhead_ms,
        [None, None, None],
        "a probe is no estimate"
    );
    assert_eq!(times.prior, Some(150.0), "the probes' median (upper)");
    assert_eq!(
        registry.overheads(&models),
        [Some(150.0), Some(150.0), None]
    );
    // A call measured on `a`, 7 ms over its inference: `b`'s cold-start probe no
    // longer counts.
    let instance = Arc::clone(&pool("a").instances()[0]);
    pool("a").observe_member_call(&instance, 1, Duration::from_millis(8));
    assert_eq!(
        registry.overheads(&models),
        [Some(7.0), Some(7.0), None],
        "measured, then the measured pools' median"
    );
}
