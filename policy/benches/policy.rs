//! The master's per-request policy work, for a 10-model ensemble and 10 classes: choosing
//! the ensemble (O1: candidates and the Poisson-binomial prefix) and combining the
//! members' answers by per-class weighted voting. Target (issue 4): at most 5 µs together;
//! the Cocktail paper reports 0.7 ms for selection and 0.5 ms for voting. O2 (`adjust`)
//! runs once per interval, not per request, and is measured alone.
//!
//! `cargo bench -p cocktail-policy --bench policy`

use std::hint::black_box;

use cocktail_policy::estimate::Recorded;
use cocktail_policy::selection::{self, Candidate, Constraint, Objective, SelectionConfig, Window};
use cocktail_policy::voting::{Ballot, ClassWeights, Scheme, vote};
use criterion::{Criterion, criterion_group, criterion_main};

const MODELS: usize = 10;
const CLASSES: usize = 10;

/// Ten candidates from 0.80 to 0.935 accuracy, 1 to 10 ms, packing factors 1 to 8.
fn candidates() -> Vec<Candidate> {
    (0..MODELS)
        .map(|i| Candidate {
            latency_ms: 1.0 + i as f64,
            accuracy: 0.80 + 0.015 * i as f64,
            packing_factor: 8 - (i as u32 % 8),
        })
        .collect()
}

/// A constraint no single model meets, so the whole O1 prefix search runs.
fn constraint() -> Constraint {
    Constraint {
        latency_ms: 20.0,
        accuracy: 0.9999,
        objective: Objective::Accuracy,
    }
}

/// Per-class accuracies around each model's overall accuracy.
fn weights(models: &[Candidate]) -> ClassWeights {
    let table: Vec<Vec<f64>> = models
        .iter()
        .enumerate()
        .map(|(m, c)| {
            (0..CLASSES)
                .map(|k| (c.accuracy + 0.01 * ((m + k) % 5) as f64 - 0.02).clamp(0.0, 1.0))
                .collect()
        })
        .collect();
    ClassWeights::seeded(&table, 100.0)
}

/// Each member's probabilities: peaked on a class that most members agree on.
fn probabilities() -> Vec<Vec<f32>> {
    (0..MODELS)
        .map(|m| {
            let winner = if m % 3 == 0 { 4 } else { 7 };
            (0..CLASSES)
                .map(|k| if k == winner { 0.82 } else { 0.02 })
                .collect()
        })
        .collect()
}

fn ballots<'a>(probabilities: &'a [Vec<f32>]) -> Vec<Ballot<'a>> {
    probabilities
        .iter()
        .enumerate()
        .map(|(model, p)| Ballot {
            model,
            class: p
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(k, _)| k),
            probabilities: p,
        })
        .collect()
}

/// 10,000 recorded items: each model right with its accuracy, wrong on a class of its
/// own otherwise (a fixed pseudo-random pattern).
fn recorded(models: &[Candidate]) -> Recorded {
    const ITEMS: usize = 10_000;
    let labels: Vec<u16> = (0..ITEMS).map(|i| (i % CLASSES) as u16).collect();
    let answers = models
        .iter()
        .enumerate()
        .map(|(m, c)| {
            let answers = labels
                .iter()
                .enumerate()
                .map(|(i, &l)| {
                    let u = ((i * 7919 + m * 104_729) % 1000) as f64 / 1000.0;
                    if u < c.accuracy {
                        l
                    } else {
                        (l + 1 + m as u16) % CLASSES as u16
                    }
                })
                .collect();
            Some(answers)
        })
        .collect();
    Recorded::new(answers, labels)
}

fn policy(c: &mut Criterion) {
    let models = candidates();
    let constraint = constraint();
    let weights = weights(&models);
    let accuracy: Vec<f64> = models.iter().map(|m| m.accuracy).collect();
    let probabilities = probabilities();

    c.bench_function("select_and_vote/weighted_10x10", |b| {
        b.iter(|| {
            let members = selection::initial(black_box(&models), black_box(&constraint), None);
            // One ballot per answering member, as the master builds them per item.
            let answers = ballots(&probabilities);
            let ballots: Vec<Ballot<'_>> = members.iter().map(|&m| answers[m]).collect();
            black_box(vote(
                Scheme::Weighted,
                &ballots,
                black_box(&weights),
                &accuracy,
                CLASSES,
            ))
        });
    });

    c.bench_function("select/initial_10", |b| {
        b.iter(|| selection::initial(black_box(&models), black_box(&constraint), None));
    });

    // O1 counted on 10,000 recorded items (a new constraint key, not every request).
    let recorded = recorded(&models);
    c.bench_function("select/initial_10_recorded_10k", |b| {
        b.iter(|| selection::initial(black_box(&models), black_box(&constraint), Some(&recorded)));
    });

    // The substitutes of a 3-member ensemble in a pool of 6, which the master lists only
    // when a member fails or is hedged (it did for every request before issue 35).
    let pool: Vec<usize> = (0..6).collect();
    let three = [1, 3, 5];
    c.bench_function("select/substitutes_10", |b| {
        b.iter(|| {
            selection::substitutes(black_box(&models), black_box(&pool), &three, &constraint)
        });
    });

    let all = ballots(&probabilities);
    for (name, scheme) in [
        ("vote/weighted_10x10", Scheme::Weighted),
        ("vote/majority_10x10", Scheme::Majority),
        ("vote/average_10x10", Scheme::Average),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| {
                vote(
                    scheme,
                    black_box(&all),
                    black_box(&weights),
                    &accuracy,
                    CLASSES,
                )
            });
        });
    }

    let members: Vec<usize> = (0..MODELS).collect();
    let window = Window {
        labelled: 1000,
        correct: 990,
        member_correct: (0..MODELS).map(|m| 900 + 5 * m).collect(),
        winning_votes: (0..=MODELS)
            .map(|v| if v == MODELS { 800 } else { 20 })
            .collect(),
    };
    let config = SelectionConfig::default();
    c.bench_function("o2/adjust_10", |b| {
        b.iter(|| {
            selection::adjust(
                black_box(&models),
                black_box(&members),
                &members,
                black_box(&window),
                0.95,
                &config,
                None,
            )
        });
    });
}

criterion_group!(benches, policy);
criterion_main!(benches);
