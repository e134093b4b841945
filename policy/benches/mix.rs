//! The optimisers of mixed-type pools against issue 7's targets:
//! - Kairos' matching, 20 queries × 20 instances in at most 20 µs and 200 × 200 in at
//!   most 2 ms (Kairos §6: 0.05 ms for 20 × 20, network included);
//! - upper bounds for 1,000 configurations in at most 5 ms;
//! - one Ribbon step (fit the GP, expected improvement everywhere) over up to 5,000
//!   configurations in at most 50 ms.
//!
//! `cargo bench -p cocktail-policy --bench mix`

use std::hint::black_box;

use cocktail_policy::kairos::{self, Server, Waiting};
use cocktail_policy::mix::Space;
use cocktail_policy::ribbon::{Ribbon, Settings};
use criterion::{Criterion, criterion_group, criterion_main};

/// A fixed pseudo-random sequence, so every run measures the same inputs.
fn sequence(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1_u64 << 53) as f64
    }
}

/// Four types (a GPU and three CPUs), batch latency `fixed + per_item × batch`.
fn latency(t: usize, batch: usize) -> f64 {
    let (fixed, per_item) = [(1.0, 0.01), (0.05, 0.06), (0.06, 0.11), (0.08, 0.16)][t % 4];
    fixed + per_item * batch as f64
}

fn matching(c: &mut Criterion) {
    for n in [20, 200] {
        let mut next = sequence(n as u64);
        let queries: Vec<Waiting> = (0..n)
            .map(|_| Waiting {
                batch: 1 + (next() * next() * 200.0) as usize,
                waited_ms: next() * 5.0,
            })
            .collect();
        let servers: Vec<Server> = (0..n)
            .map(|i| Server {
                type_index: i % 4,
                busy_ms: next() * 10.0,
            })
            .collect();
        let largest: Vec<f64> = (0..4).map(|t| latency(t, 200)).collect();
        let coefficients = kairos::coefficients(&largest);
        c.bench_function(&format!("kairos/match_{n}x{n}"), |b| {
            b.iter(|| {
                kairos::distribute(
                    black_box(&queries),
                    black_box(&servers),
                    &coefficients,
                    latency,
                    25.0,
                )
            });
        });
    }
}

fn bounds(c: &mut Criterion) {
    let mut next = sequence(7);
    let batches: Vec<usize> = (0..10_000)
        .map(|_| 1 + (next() * next() * 200.0) as usize)
        .collect();
    let (base, rates) = kairos::type_rates(&batches, 4, latency, 25.0);
    // 1,000 configurations: up to 9 GPUs and 0..=9 of each of three CPU types... less
    // the empty one, 9,999; the first 1,000 of them.
    let space = Space {
        types: vec!["g".into(), "c".into(), "r".into(), "t".into()],
        prices: vec![0.526, 0.432, 0.149, 0.1664],
        max: vec![9, 9, 9, 9],
    };
    let configs: Vec<_> = space.configs().into_iter().take(1000).collect();
    c.bench_function("kairos/upper_bounds_1000", |b| {
        b.iter(|| kairos::rank(black_box(&configs), base, &rates));
    });
}

fn ribbon_step(c: &mut Criterion) {
    // 3 types with 0..=24, 0..=13 and 0..=13 instances: 25 × 14 × 14 − 1 = 4,899.
    let space = Space {
        types: vec!["c5a".into(), "m5".into(), "t3".into()],
        prices: vec![0.308, 0.192, 0.1664],
        max: vec![24, 13, 13],
    };
    let mut ribbon = Ribbon::new(space, Settings::default());
    assert!(ribbon.size() <= 5000);
    // 30 measurements first, as a search in progress has.
    let satisfaction = |c: &[u32]| {
        let capacity = 3.0 * f64::from(c[0]) + 2.0 * f64::from(c[1]) + 1.2 * f64::from(c[2]);
        (capacity / 40.0).min(1.0)
    };
    for _ in 0..30 {
        let Some(config) = ribbon.suggest() else {
            break;
        };
        ribbon.observe(&config, satisfaction(&config));
    }
    println!(
        "ribbon: {} configurations, {} measured, {} still open",
        ribbon.size(),
        ribbon.record().len(),
        ribbon.open()
    );
    c.bench_function("ribbon/step_after_30", |b| {
        b.iter(|| black_box(&ribbon).suggest());
    });
    // The worst case: 30 measurements that prune nothing (each just short of the
    // target), so expected improvement runs over all 4,899 configurations.
    let mut open = Ribbon::new(ribbon.space().clone(), Settings::default());
    let mut next = sequence(3);
    for _ in 0..30 {
        let config: Vec<u32> = open
            .space()
            .max
            .iter()
            .map(|&m| (next() * f64::from(m + 1)) as u32)
            .collect();
        open.observe(&config, 0.981 + 0.008 * next());
    }
    println!("ribbon: {} of {} still open", open.open(), open.size());
    c.bench_function("ribbon/step_5000_open", |b| {
        b.iter(|| black_box(&open).suggest());
    });
}

criterion_group!(benches, matching, bounds, ribbon_step);
criterion_main!(benches, extra);
fn uniform(c: &mut Criterion) {
    let mut next = sequence(11);
    let cost: Vec<f64> = (0..200 * 200).map(|_| next() * 100.0).collect();
    c.bench_function("kairos/assign_uniform_200x200", |b| {
        b.iter(|| kairos::assign(black_box(&cost), 200, 200));
    });
}
criterion_group!(extra, uniform);
