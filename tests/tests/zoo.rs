//! The committed zoo is what the manifest says: every ONNX model, run through the real ONNX
//! Runtime over its task's full committed test set, reproduces the manifest's accuracy
//! within 0.5 points and the recorded predictions on at least 99.5 % of items.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use cocktail_common::{Input, Predictions, TestSet, Zoo};
use cocktail_policy::voting::{Ballot, ClassWeights, Scheme, vote};
use cocktail_tests::zoo_manifest;
use cocktail_worker::preprocess::Preprocessor;
use cocktail_worker::{Backend, OnnxBackend};

const BATCH: usize = 128;

fn check_task(task: &str) {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let test_set = TestSet::load(&zoo, task).unwrap();
    let recorded =
        Predictions::load(&zoo.resolve(zoo.task(task).unwrap().predictions.as_deref().unwrap()))
            .unwrap();
    assert_eq!(
        recorded.len(),
        test_set.len(),
        "{task}: one recorded row per test item"
    );
    let labels: Vec<usize> = recorded.labels.iter().map(|&l| usize::from(l)).collect();
    assert_eq!(
        labels, test_set.labels,
        "{task}: recorded labels are the test labels"
    );

    let models: Vec<_> = zoo.models_for(task).collect();
    assert!(!models.is_empty(), "{task} has models");
    let mut report = Vec::new();
    for model in models {
        let column = recorded
            .model_index(&model.name)
            .unwrap_or_else(|| panic!("{} recorded", model.name));
        let preprocessor = Preprocessor::for_model(&zoo, model).unwrap();
        let mut backend = OnnxBackend::load(&zoo, model, 2, None).unwrap();
        let mut predicted = Vec::with_capacity(test_set.len());
        for chunk in test_set.items.chunks(BATCH) {
            let batch = preprocessor.batch(chunk).unwrap();
            predicted.extend(
                backend
                    .infer(&batch)
                    .unwrap()
                    .top()
                    .into_iter()
                    .map(|(c, _)| c),
            );
        }
        let n = test_set.len() as f64;
        let correct = predicted
            .iter()
            .zip(&test_set.labels)
            .filter(|(p, l)| p == l)
            .count();
        let accuracy = correct as f64 / n;
        let agree = predicted
            .iter()
            .zip(&recorded.classes[column])
            .filter(|(p, r)| **p == usize::from(**r))
            .count() as f64
            / n;
        report.push(format!(
            "{:<14} accuracy {accuracy:.4} (manifest {:.4}), agreement {agree:.4}",
            model.name, model.accuracy
        ));
        assert!(
            (accuracy - model.accuracy).abs() <= 0.005,
            "{}: accuracy {accuracy:.4}, manifest {:.4}",
            model.name,
            model.accuracy
        );
        assert!(
            agree >= 0.995,
            "{}: agrees with the recorded predictions on {agree:.4}",
            model.name
        );
    }
    println!("{task}:\n  {}", report.join("\n  "));
}

#[test]
fn fashion_zoo_reproduces_manifest() {
    check_task("fashion");
}

#[test]
fn sentiment_zoo_reproduces_manifest() {
    check_task("sentiment");
}

#[test]
fn every_task_has_a_varied_zoo() {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    for (task, spec) in zoo.tasks() {
        let models: Vec<_> = zoo.models_for(task).collect();
        let best = models
            .iter()
            .max_by(|a, b| a.accuracy.total_cmp(&b.accuracy))
            .unwrap();
        // Classes on which some other model beats the overall best: what the ensemble exploits.
        let other_winners = (0..spec.labels.len())
            .filter(|&c| {
                models
                    .iter()
                    .any(|m| m.class_accuracy[c] > best.class_accuracy[c])
            })
            .count();
        match task.as_str() {
            "fashion" => {
                assert!(models.len() >= 10, "fashion has {} models", models.len());
                assert!(
                    other_winners >= 3,
                    "only {other_winners} classes are won by another model"
                );
                assert!(models.iter().any(|m| m.accuracy <= 0.80) && best.accuracy >= 0.92);
                assert!(
                    models.iter().any(|m| m.params <= 10_000)
                        && models.iter().any(|m| m.params >= 2_000_000)
                );
            }
            "sentiment" => assert!(models.len() >= 6, "sentiment has {} models", models.len()),
            other => panic!("unexpected task {other}"),
        }
        for m in &models {
            zoo.verify_checksum(m).unwrap();
            assert!(
                m.profile.is_some(),
                "{} has a profile (run `cocktail profile`)",
                m.name
            );
        }
    }
}

/// What Cocktail exploits: under a latency bound that excludes the most accurate model,
/// some three-model vote of the faster models beats the best of them (recorded answers,
/// the master's own voting code).
#[test]
fn a_fast_ensemble_beats_the_best_fast_model() {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let recorded = Predictions::load(
        &zoo.resolve(zoo.task("fashion").unwrap().predictions.as_deref().unwrap()),
    )
    .unwrap();
    let latency =
        |m: &cocktail_common::ModelEntry| m.profile.as_ref().unwrap().latency_us(1, 1).unwrap();
    let models: Vec<_> = zoo.models_for("fashion").collect();
    let best = models
        .iter()
        .max_by(|a, b| a.accuracy.total_cmp(&b.accuracy))
        .unwrap();
    let fast: Vec<_> = models
        .iter()
        .filter(|m| latency(m) < latency(best))
        .collect();
    let best_fast = fast.iter().map(|m| m.accuracy).fold(0.0, f64::max);
    let columns: Vec<usize> = fast
        .iter()
        .map(|m| recorded.model_index(&m.name).unwrap())
        .collect();
    let accuracy: Vec<f64> = fast.iter().map(|m| m.accuracy).collect();
    let weights = ClassWeights::seeded(
        &fast
            .iter()
            .map(|m| m.class_accuracy.clone())
            .collect::<Vec<_>>(),
        1.0,
    );
    let mut best_vote = 0.0_f64;
    for a in 0..fast.len() {
        for b in a + 1..fast.len() {
            for c in b + 1..fast.len() {
                let right = (0..recorded.len())
                    .filter(|&item| {
                        let ballots: Vec<Ballot<'_>> = [a, b, c]
                            .iter()
                            .map(|&m| Ballot {
                                model: m,
                                class: usize::from(recorded.classes[columns[m]][item]),
                                probabilities: &[],
                            })
                            .collect();
                        let outcome =
                            vote(Scheme::Majority, &ballots, &weights, &accuracy, 10).unwrap();
                        outcome.class == usize::from(recorded.labels[item])
                    })
                    .count();
                best_vote = best_vote.max(right as f64 / recorded.len() as f64);
            }
        }
    }
    println!("best fast single {best_fast:.4}, best fast 3-vote {best_vote:.4}");
    assert!(
        best_vote > best_fast + 0.002,
        "3-vote {best_vote:.4} vs single {best_fast:.4}"
    );
}

#[test]
fn test_sets_are_the_committed_sizes() {
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let fashion = TestSet::load(&zoo, "fashion").unwrap();
    assert_eq!(fashion.len(), 10_000);
    assert!(matches!(&fashion.items[0], Input::Image(i) if i.width == 28 && i.height == 28));
    let sentiment = TestSet::load(&zoo, "sentiment").unwrap();
    assert!(sentiment.len() > 3_000);
    assert!(
        sentiment
            .items
            .iter()
            .all(|i| matches!(i, Input::Text(t) if !t.is_empty()))
    );
}
