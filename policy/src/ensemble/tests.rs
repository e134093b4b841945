use super::*;

/// A candidate with packing factor 1.
fn model(latency_ms: f64, accuracy: f64) -> Candidate {
    Candidate {
        latency_ms,
        accuracy,
        packing_factor: 1,
    }
}
use crate::selection::Objective;
use crate::tracking::Reselect;

/// One labelled item of class 0 per row of `answers` (each member's class, in
/// member order); the ensemble answers class 0 when half or more of them do.
fn window(e: &mut Ensemble, answers: &[&[usize]]) {
    for row in answers {
        let classes: Vec<Option<usize>> = row.iter().map(|&c| Some(c)).collect();
        let right = row.iter().filter(|&&c| c == 0).count();
        let ensemble = usize::from(2 * right < row.len());
        e.record(e.generation, &classes, ensemble, row.len(), 0);
    }
}

#[test]
fn an_addition_the_next_window_does_not_confirm_is_reverted_and_not_tried_again() {
    let models = [
        model(1.0, 0.80),
        model(1.0, 0.85),
        model(1.0, 0.86),
        model(1.0, 0.87),
    ];
    let config = SelectionConfig {
        accuracy_margin: 0.0,
        rule: Rule::Cocktail,
    };
    let constraint = Constraint {
        latency_ms: 1.0,
        accuracy: 0.9,
        objective: Objective::Accuracy,
    };
    // Generation 1: past O1's first interval (which would choose again).
    let mut e = Ensemble::new(&models, constraint, vec![1], 1);
    window(&mut e, &[&[0], &[1]]);
    assert_eq!(
        e.revisit(&models, &config, None),
        Some(Adjustment::Add(vec![3]))
    );
    assert_eq!(e.members, [1, 3]);
    // Model 3 answers as model 1 does: no item is right that was not right without
    // it, so it is taken back, for good (even though this window is the better one).
    window(&mut e, &[&[0, 0], &[0, 0], &[1, 1]]);
    assert_eq!(
        e.revisit(&models, &config, None),
        Some(Adjustment::Revert(vec![3]))
    );
    assert_eq!((e.members.as_slice(), e.generation), (&[1][..], 3));
    window(&mut e, &[&[0], &[1]]);
    assert_eq!(
        e.revisit(&models, &config, None),
        Some(Adjustment::Add(vec![2]))
    );
    // Model 2 is right where 1 is not and, more accurate, wins the tie: it stays.
    window(&mut e, &[&[0, 0], &[1, 0], &[1, 1]]);
    assert_eq!(
        e.revisit(&models, &config, None),
        Some(Adjustment::Add(vec![0]))
    );
    assert_eq!(e.members, [1, 2, 0]);
}

#[test]
fn a_member_whose_predicted_response_no_longer_fits_makes_o1_choose_again() {
    let constraint = Constraint {
        latency_ms: 1.0,
        accuracy: 0.85,
        objective: Objective::Accuracy,
    };
    let config = SelectionConfig::default();
    // Before any call is measured, the profiles alone: model 1 fits and suffices.
    let profiled = [model(0.2, 0.80), model(0.6, 0.88), model(0.3, 0.86)];
    let mut e = Ensemble::select(&profiled, constraint, None);
    assert_eq!(e.members, [1]);
    // The calls turn out to take 0.5 ms more than inference: model 1 is predicted
    // at 1.1 ms and no longer fits; O1 chooses again, without waiting for labels.
    let measured = crate::response::predicted(&profiled, &[], &[], Some(0.5));
    assert_eq!(
        e.revisit(&measured, &config, None),
        Some(Adjustment::Refit(vec![2]))
    );
    assert_eq!((e.members.as_slice(), e.generation), (&[2][..], 1));
    assert_eq!(e.pool, [0, 2]);
    // Nothing fits at all: the members stay (their late answers are violations).
    let slow = crate::response::predicted(&profiled, &[], &[], Some(5.0));
    assert_eq!(e.revisit(&slow, &config, None), None);
    assert_eq!(e.members, [2]);
}

#[test]
fn o1s_first_choice_is_made_again_when_a_model_it_could_not_take_fits() {
    let constraint = Constraint {
        latency_ms: 10.0,
        accuracy: 0.85,
        objective: Objective::Accuracy,
    };
    let config = SelectionConfig::default();
    // At the first request the accurate model's pool has answered a few calls slowly
    // (a starting cluster), and a weak model's too: only model 0 fits, and O1 takes it.
    let starting = [model(4.0, 0.86), model(30.0, 0.92), model(30.0, 0.70)];
    let mut e = Ensemble::select(&starting, constraint, None);
    assert_eq!(e.members, [0]);
    // By the end of the interval its calls take 6 ms: O1 chooses again, though
    // the member still fits and no label has come.
    let settled = [model(4.0, 0.86), model(6.0, 0.92), model(30.0, 0.70)];
    assert_eq!(
        e.revisit(&settled, &config, None),
        Some(Adjustment::Refit(vec![1]))
    );
    assert_eq!((e.members.as_slice(), e.generation), (&[1][..], 1));
    // The same at a later interval: a pool never called is predicted on the fleet's
    // estimate, which may take a while to settle.
    let mut later = Ensemble::select(&starting, constraint, None);
    assert_eq!(later.revisit(&starting, &config, None), None);
    assert_eq!(
        later.revisit(&settled, &config, None),
        Some(Adjustment::Refit(vec![1]))
    );
    // Only ranked otherwise: the fastest that meets 0.85 is now model 1, but both
    // fitted already and O1's choice stays (the hop's noise reorders models within
    // milliseconds of each other), though the weak model joined: O1 would not take it.
    let fastest = Constraint {
        objective: Objective::Latency,
        ..constraint
    };
    let mut quick = Ensemble::select(&settled, fastest, None);
    assert_eq!(quick.members, [0]);
    let reordered = [model(7.0, 0.86), model(6.0, 0.92), model(5.0, 0.70)];
    assert_eq!(quick.revisit(&reordered, &config, None), None);
    assert_eq!(quick.members, [0]);
}

#[test]
fn a_model_o1_could_not_take_is_taken_between_intervals_as_soon_as_it_fits() {
    let constraint = Constraint {
        latency_ms: 10.0,
        accuracy: 0.85,
        objective: Objective::Accuracy,
    };
    let starting = [model(4.0, 0.86), model(30.0, 0.92), model(30.0, 0.70)];
    let mut e = Ensemble::select(&starting, constraint, None);
    assert!(e.waits());
    // Nothing fits that did not: nothing changes, and the models still wait.
    assert_eq!(e.take_waiting(&starting, None), None);
    assert_eq!((e.members.as_slice(), e.generation), (&[0][..], 0));
    // The accurate model's calls settle: O1 takes it at once, no interval's end needed.
    let settled = [model(4.0, 0.86), model(6.0, 0.92), model(30.0, 0.70)];
    assert_eq!(
        e.take_waiting(&settled, None),
        Some(Adjustment::Refit(vec![1]))
    );
    assert_eq!((e.members.as_slice(), e.generation), (&[1][..], 1));
    // A member that no longer fits is O2's business at the interval's end, not this.
    let slow = [model(4.0, 0.86), model(12.0, 0.92), model(30.0, 0.70)];
    assert_eq!(e.take_waiting(&slow, None), None);
    assert_eq!(e.members, [1]);
    // A weak model that joins, which O1 would not take, stops waiting; nothing changes.
    let mut quick = Ensemble::select(&starting, constraint, None);
    let weak_fits = [model(4.0, 0.86), model(30.0, 0.92), model(5.0, 0.70)];
    assert_eq!(quick.take_waiting(&weak_fits, None), None);
    assert_eq!((quick.members.as_slice(), quick.generation), (&[0][..], 0));
    assert_eq!(
        quick.take_waiting(&settled, None),
        Some(Adjustment::Refit(vec![1])),
        "model 1 still waited"
    );
}

#[test]
fn a_model_o1s_second_choice_could_not_take_is_taken_once_it_fits() {
    let constraint = Constraint {
        latency_ms: 10.0,
        accuracy: 0.85,
        objective: Objective::Accuracy,
    };
    let config = SelectionConfig::default();
    // On the profiles all three fit, and O1 takes the most accurate, model 1.
    let profiled = [model(2.0, 0.86), model(5.0, 0.92), model(4.0, 0.90)];
    let mut e = Ensemble::select(&profiled, constraint, None);
    assert_eq!(e.members, [1]);
    // Measured, model 1 does not fit, and model 2, never called, is predicted on a
    // cold start's estimate that does not fit either: O1 chooses model 0.
    let starting = [model(3.0, 0.86), model(12.0, 0.92), model(15.0, 0.90)];
    assert_eq!(
        e.revisit(&starting, &config, None),
        Some(Adjustment::Refit(vec![0]))
    );
    // Model 2 fits once the estimate settles: O1 chooses again and takes it, though
    // no member stopped fitting and no label has come.
    let settled = [model(3.0, 0.86), model(12.0, 0.92), model(6.0, 0.90)];
    assert_eq!(
        e.revisit(&settled, &config, None),
        Some(Adjustment::Refit(vec![2]))
    );
    assert_eq!((e.members.as_slice(), e.generation), (&[2][..], 2));
    // Once for each: the same estimates again change nothing.
    assert_eq!(e.revisit(&settled, &config, None), None);
}

#[test]
fn a_tracking_ensemble_follows_its_tracker_and_o2_stands_aside() {
    // Model 0 is cheap, model 1 slow and the most accurate by profile.
    let models = [model(1.0, 0.80), model(5.0, 0.90)];
    let constraint = Constraint {
        latency_ms: 10.0,
        accuracy: 0.85,
        objective: Objective::Accuracy,
    };
    let mut e = Ensemble::new(&models, constraint, vec![1], 0);
    e.track(crate::tracking::TrackingConfig::serving(
        crate::estimate::Rule::Majority,
        Some(100),
        crate::tracking::Knobs {
            pace: false,
            ..Default::default()
        },
    ));
    // On this traffic the cheap model is always right and the accurate one never.
    let item = Labelled {
        label: 0,
        answers: vec![Some(0), Some(1)],
        probabilities: Vec::new(),
    };
    let serve = |e: &mut Ensemble, labelled: bool| {
        if labelled {
            e.remember(item.clone());
        }
        e.served(&models)
    };
    for _ in 0..49 {
        assert_eq!(serve(&mut e, true), None);
    }
    assert_eq!(e.remembered(), 49, "the items went to the tracker");
    // 50 labels show the served model falling short: it chooses again at once.
    assert_eq!(
        serve(&mut e, true),
        Some(Adjustment::Tracked(vec![0], Reselect::Shift))
    );
    assert_eq!((e.members.as_slice(), e.generation), (&[0][..], 1));
    // O2's interval passes without a change: the tracker chooses.
    assert_eq!(e.revisit(&models, &SelectionConfig::default(), None), None);
    assert_eq!(e.members, [0]);
    // Another master's choice through the cache is adopted, until the tracker's
    // interval ends (request 100) and it chooses on its window again.
    e.replace(vec![1], 2);
    assert_eq!(serve(&mut e, false), None);
    for _ in 0..48 {
        assert_eq!(serve(&mut e, true), None);
    }
    assert_eq!(e.members, [1]);
    assert_eq!(
        serve(&mut e, true),
        Some(Adjustment::Tracked(vec![0], Reselect::Interval))
    );
    assert_eq!(e.generation, 3);
}

#[test]
fn a_paced_mix_takes_turns_without_a_new_generation() {
    // The cheap model is right on 75 % of the items, the slow one on 95 %: a mix of
    // the two meets the target (with Cocktail's margin) for less than the slow one.
    let models = [model(1.0, 0.80), model(5.0, 0.90)];
    let constraint = Constraint {
        latency_ms: 10.0,
        accuracy: 0.8,
        objective: Objective::Accuracy,
    };
    let mut e = Ensemble::new(&models, constraint, vec![1], 0);
    e.track(crate::tracking::TrackingConfig::serving(
        crate::estimate::Rule::Majority,
        Some(100),
        crate::tracking::Knobs {
            pace: true,
            ..Default::default()
        },
    ));
    let item = |k: usize| Labelled {
        label: 0,
        answers: vec![
            Some(u16::from(k.is_multiple_of(4))),
            Some(u16::from(k.is_multiple_of(20))),
        ],
        probabilities: Vec::new(),
    };
    let mut changes = Vec::new();
    let mut served = Vec::new();
    for k in 0..300 {
        e.remember(item(k));
        changes.extend(e.served(&models));
        served.push(e.members.clone());
    }
    // One choice, the mix, at the first interval; its turns are no new generation.
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(e.generation, 1);
    let last = &served[100..];
    let slow = last.iter().filter(|m| *m == &[1]).count();
    assert!(last.iter().all(|m| m == &[0] || m == &[1]));
    assert!((50..150).contains(&slow), "{slow} of {}", last.len());
    // Both sides are in use (their pools stay) whichever serves now.
    assert_eq!(
        e.mix().map(|(lo, hi, _)| (lo, hi)),
        Some((&[0][..], &[1][..]))
    );
    let mut in_use = e.in_use();
    in_use.sort_unstable();
    assert_eq!(in_use, [0, 1]);
}

#[test]
fn measured_selection_chooses_from_the_buffer_once_it_is_big_enough() {
    let model = |accuracy| Candidate {
        latency_ms: 1.0,
        accuracy,
        packing_factor: 1,
    };
    let models = [model(0.90), model(0.88), model(0.87)];
    let constraint = Constraint {
        latency_ms: 1.0,
        accuracy: 0.95,
        objective: Objective::Accuracy,
    };
    let config = SelectionConfig {
        rule: Rule::Measured,
        ..SelectionConfig::default()
    };
    let mut e = Ensemble::select(&models, constraint, None);
    assert_eq!(
        e.members,
        [0, 1, 2],
        "O1: independent errors would make three 96 %"
    );
    // Model 0 is always right; 1 and 2 err together on a tenth of the items, where
    // they outvote it: the vote of three is worse than model 0 alone.
    let item = |i: usize| Labelled {
        label: 0,
        answers: vec![
            Some(0),
            Some(u16::from(i % 10 == 1)),
            Some(u16::from(i % 10 == 1)),
        ],
        probabilities: Vec::new(),
    };
    for i in 0..measured::MIN_ITEMS - 1 {
        e.remember(item(i));
    }
    assert_eq!(e.revisit(&models, &config, None), None, "O1 stands");
    e.remember(item(99));
    assert_eq!(
        e.revisit(&models, &config, None),
        Some(Adjustment::Measured(vec![0]))
    );
    assert_eq!(e.remembered(), measured::MIN_ITEMS);
    assert_eq!(
        e.revisit(&models, &config, None),
        None,
        "no change: no new generation"
    );
    assert_eq!(e.generation, 1);
}

#[test]
fn a_models_target_is_the_tightest_of_the_ensembles_using_it() {
    let a = [0, 1];
    let b = [1, 2];
    let targets = tightest_targets([(30.0, &a[..]), (10.0, &b[..])], 4);
    assert_eq!(targets, [Some(30.0), Some(10.0), Some(10.0), None]);
}
