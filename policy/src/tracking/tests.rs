use super::*;
use crate::selection::Objective;

/// Model 0 cheap, 1 cheap, 2 slow and accurate.
fn models() -> Vec<Candidate> {
    [(0.01, 0.80), (0.02, 0.80), (10.0, 0.85)]
        .map(|(latency_ms, accuracy)| Candidate {
            latency_ms,
            accuracy,
            packing_factor: 1,
        })
        .to_vec()
}

fn constraint() -> Constraint {
    Constraint {
        latency_ms: 100.0,
        accuracy: 0.8,
        objective: Objective::Accuracy,
    }
}

/// Item `k` of a phase in which model `m` is right on the items `right[m](k)` says.
fn item(k: usize, right: [fn(usize) -> bool; 3]) -> Labelled {
    Labelled {
        label: 1,
        answers: right.iter().map(|r| Some(u16::from(r(k)))).collect(),
        probabilities: Vec::new(),
    }
}

/// Serves `requests` requests of a phase, every one labelled at once; returns the
/// members after each request.
fn run(
    tracker: &mut Tracker,
    start: usize,
    requests: usize,
    right: [fn(usize) -> bool; 3],
) -> Vec<Vec<usize>> {
    let models = models();
    (start..start + requests)
        .map(|k| {
            tracker.label(k as u64 + 1, item(k, right));
            tracker.served(&models, &constraint());
            tracker.members().to_vec()
        })
        .collect()
}

// Easy phase: both cheap models right 95 % of the time; hard phase: the cheap
// models right 60 % (and never together on the items they miss), the slow one 90 %.
const EASY: [fn(usize) -> bool; 3] = [|k| k % 20 != 0, |k| k % 20 != 1, |k| k % 10 != 0];
const HARD: [fn(usize) -> bool; 3] = [|k| k % 5 < 3, |k| k % 5 > 1, |k| k % 10 != 0];

#[test]
fn a_soft_tracker_scores_its_choices_by_the_vote_it_votes_with() {
    // On every item one model is right and sure (0.95), the other two wrong and
    // unsure (0.55 on class 0): each alone is right on a third of the items, the
    // majority of three on none, their mean probability on all.
    let item = |k: usize| {
        let sure = k % 3;
        let p = |m: usize| {
            if m == sure {
                vec![0.05, 0.95]
            } else {
                vec![0.55, 0.45]
            }
        };
        Labelled {
            label: 1,
            answers: (0..3).map(|m| Some(u16::from(m == sure))).collect(),
            probabilities: (0..3).map(|m| Some(p(m))).collect(),
        }
    };
    // One interval of plain re-selection (100 requests) and a few more.
    let items: Vec<Labelled> = (0..120).map(item).collect();
    let models = models();
    let all = [0, 1, 2];
    assert_eq!(
        vote_accuracy(items.iter(), &all, &models, Rule::Majority),
        Some(0.0)
    );
    assert_eq!(
        vote_accuracy(items.iter(), &all, &models, Rule::Soft),
        Some(1.0)
    );
    assert!(
        (vote_accuracy(items.iter(), &[2], &models, Rule::Soft).unwrap() - 1.0 / 3.0).abs() < 1e-9
    );
    // Nothing meets the target by majority: plain serves the most accurate choice on
    // the window, a tie to the cheapest.
    for (rule, chosen) in [(Rule::Soft, vec![0, 1, 2]), (Rule::Majority, vec![0])] {
        let config = TrackingConfig {
            rule,
            ..TrackingConfig::plain()
        };
        let mut tracker = Tracker::new(config, vec![2]);
        for (k, i) in items.iter().enumerate() {
            tracker.label(k as u64 + 1, i.clone());
            tracker.served(&models, &constraint());
        }
        assert_eq!(tracker.members(), chosen, "{rule:?}");
    }
    // Without vectors a soft vote scores nothing.
    let bare = Labelled {
        probabilities: Vec::new(),
        ..item(0)
    };
    assert_eq!(
        vote_accuracy([bare].iter(), &all, &models, Rule::Soft),
        None
    );
}

#[test]
fn brings_in_the_slow_model_when_the_cheap_ones_fall_short_and_lets_it_go() {
    for config in [TrackingConfig::cocktail(), TrackingConfig::plain()] {
        let mut tracker = Tracker::new(config, vec![0]);
        let easy = run(&mut tracker, 0, 600, EASY);
        assert_eq!(easy.last().unwrap(), &vec![0], "{config:?}");
        // Within two windows of the shift the slow model serves.
        let hard = run(&mut tracker, 600, 600, HARD);
        let brought = hard.iter().position(|m| m == &vec![2]).unwrap();
        assert!(brought < 2 * config.window, "{config:?}: {brought}");
        assert!(hard[2 * config.window..].iter().all(|m| m == &vec![2]));
        // Easy traffic again: the cheap model, within two windows.
        let back = run(&mut tracker, 1200, 600, EASY);
        let gone = back.iter().position(|m| m == &vec![0]).unwrap();
        assert!(gone < 2 * config.window, "{config:?}: {gone}");
    }
}

#[test]
fn a_shift_is_followed_sooner_than_the_window_turns_over() {
    let mut cocktail = Tracker::new(TrackingConfig::cocktail(), vec![0]);
    let mut plain = Tracker::new(TrackingConfig::plain(), vec![0]);
    run(&mut cocktail, 0, 600, EASY);
    run(&mut plain, 0, 600, EASY);
    // The slow model alone, or in a vote that costs about as much and is as accurate.
    let first = |members: Vec<Vec<usize>>| members.iter().position(|m| m.contains(&2));
    let tracked = first(run(&mut cocktail, 600, 400, HARD)).unwrap();
    let plainly = first(run(&mut plain, 600, 400, HARD)).unwrap();
    // The shift check fires within the recent 50 labels; the plain window needs
    // enough hard items to pull its average below the target.
    assert!(tracked <= 50, "{tracked}");
    assert!(tracked < plainly, "{tracked} vs {plainly}");
    assert_eq!(cocktail.shifts, 1);
}

#[test]
fn of_choices_that_cost_alike_the_most_accurate_serves_and_a_dearer_one_does_not() {
    // Model 0 (0.01 ms) is right on 81 items of 100, just over the target; model 1
    // (0.012 ms, within the tier of 1.5x) on 90; the slow model 2 (10 ms) on 95. The
    // cheapest that meets the target is model 0; of those that cost about as much,
    // model 1 is the more accurate, and model 2 costs far more.
    let models: Vec<Candidate> = [(0.01, 0.80), (0.012, 0.80), (10.0, 0.85)]
        .map(|(latency_ms, accuracy)| Candidate {
            latency_ms,
            accuracy,
            packing_factor: 1,
        })
        .to_vec();
    const RIGHT: [fn(usize) -> bool; 3] = [|k| k % 100 < 81, |k| k % 10 != 0, |k| k % 20 != 0];
    let serve = |config: TrackingConfig| {
        let mut tracker = Tracker::new(config, vec![2]);
        for k in 0..400 {
            tracker.label(k as u64 + 1, item(k, RIGHT));
            tracker.served(&models, &constraint());
        }
        tracker.members().to_vec()
    };
    let tiered = TrackingConfig {
        margin_z: 0.0,
        recent: 0,
        ..TrackingConfig::cocktail()
    };
    assert_eq!(serve(tiered), vec![1]);
    let cheapest = TrackingConfig {
        cost_tier: 1.0,
        ..tiered
    };
    assert_eq!(serve(cheapest), vec![0]);
    assert_eq!(serve(TrackingConfig::plain()), vec![0]);
}

#[test]
fn a_member_that_stops_helping_is_dropped() {
    // A vote of all three beats each model while the cheap ones err on different
    // items; once model 1 errs on every item, the slow model alone is better and
    // model 1 goes.
    let mut tracker = Tracker::new(TrackingConfig::plain(), vec![0, 1, 2]);
    const SPLIT: [fn(usize) -> bool; 3] = [|k| k % 4 != 0, |k| k % 4 != 1, |k| k % 4 != 2];
    let before = run(&mut tracker, 0, 400, SPLIT);
    assert_eq!(before.last().unwrap(), &vec![0, 1, 2]);
    const BROKEN: [fn(usize) -> bool; 3] = [|k| k % 4 != 0, |_| false, |k| k % 4 != 2];
    let after = run(&mut tracker, 400, 400, BROKEN);
    let dropped = after.iter().position(|m| !m.contains(&1)).unwrap();
    assert!(dropped < 2 * 200, "{dropped}");
    assert!(!after.last().unwrap().contains(&1));
}

#[test]
fn a_cheap_choice_the_window_cannot_tell_from_the_profile_best_does_not_serve() {
    // Nothing meets 0.8: the cheap models are right on 77 items of 100 (the same
    // ones), the slow one on 75. The window cannot tell 77 from 75 (one standard
    // error is 4 points), so with the rule the slow, by profile more accurate, model
    // serves; without it the cheap one does.
    const CLOSE: [fn(usize) -> bool; 3] = [|k| k % 100 < 77, |k| k % 100 < 77, |k| k % 100 >= 25];
    let chosen = |prefer_profile_z| {
        let config = TrackingConfig {
            prefer_profile_z,
            ..TrackingConfig::plain()
        };
        let mut tracker = Tracker::new(config, vec![0]);
        run(&mut tracker, 0, 100, CLOSE).last().cloned().unwrap()
    };
    assert_eq!(chosen(Some(1.0)), [2]);
    assert_eq!(chosen(None), [0]);
}

#[test]
fn a_paced_tracker_serves_the_cheapest_mix_that_meets_the_target() {
    // The cheap models are right on the same 70 % of the items, the slow one on 90 %:
    // no vote of the cheap ones helps, and a single choice meeting 0.8 is the slow
    // model alone. Half of each, 0.8 on average, costs half as much.
    const MIXED: [fn(usize) -> bool; 3] = [|k| k % 10 < 7, |k| k % 10 < 7, |k| k % 10 != 0];
    let paced = TrackingConfig {
        pace: true,
        ..TrackingConfig::plain()
    };
    let mut plain = Tracker::new(TrackingConfig::plain(), vec![0]);
    assert!(
        run(&mut plain, 0, 400, MIXED)[200..]
            .iter()
            .all(|m| m == &[2])
    );
    let mut tracker = Tracker::new(paced, vec![0]);
    let served = run(&mut tracker, 0, 400, MIXED);
    let last = &served[200..];
    assert!(last.iter().all(|m| m == &[0] || m == &[2]), "{last:?}");
    // Evenly: every run of 10 requests holds 5 of each.
    for run in last.windows(10) {
        assert_eq!(run.iter().filter(|m| *m == &[2]).count(), 5, "{run:?}");
    }
    // A re-selection that keeps the pair is no new choice; the turns go on.
    let models = models();
    let mut changes = 0;
    for k in 400..600 {
        tracker.label(k as u64 + 1, item(k, MIXED));
        changes += usize::from(tracker.served(&models, &constraint()).is_some());
    }
    assert_eq!(changes, 0);
}

#[test]
fn of_two_choices_that_cost_the_same_the_more_accurate_serves() {
    // Models 0 and 1 profile alike; on the window 0 is right on 80 % of the items,
    // 1 on 90 %: both meet 0.8, and 1 serves, whichever of them came first.
    let mut models = models();
    models[1].latency_ms = models[0].latency_ms;
    const ALIKE: [fn(usize) -> bool; 3] = [|k| k % 10 < 8, |k| k % 10 < 9, |k| k % 10 < 9];
    let mut tracker = Tracker::new(TrackingConfig::plain(), vec![2]);
    for k in 0..200 {
        tracker.label(k as u64 + 1, item(k, ALIKE));
        tracker.served(&models, &constraint());
    }
    assert_eq!(tracker.members(), [1]);
}

#[test]
fn a_mix_is_chosen_only_when_it_is_cheaper_than_one_choice() {
    let scored = |rows: &[(usize, f64, f64)]| -> Vec<(Vec<usize>, f64, f64)> {
        rows.iter().map(|&(m, c, a)| (vec![m], c, a)).collect()
    };
    // 0.7 at 1 and 0.9 at 11: a half of each meets 0.8 at 6; 0.81 at 8 alone is
    // dearer than that mix; 0.8 at 5 alone is cheaper, and no mix beats it.
    let mix = Mix::cheapest(
        &scored(&[(0, 1.0, 0.7), (1, 11.0, 0.9), (2, 8.0, 0.81)]),
        0.8,
        8.0,
    );
    let Some(mix) = mix else {
        panic!("{mix:?}");
    };
    assert_eq!((mix.lo.as_slice(), mix.hi.as_slice()), (&[0][..], &[1][..]));
    assert!((mix.share - 0.5).abs() < 1e-9, "{mix:?}");
    assert_eq!(
        Mix::cheapest(
            &scored(&[(0, 1.0, 0.7), (1, 11.0, 0.9), (2, 5.0, 0.8)]),
            0.8,
            5.0
        ),
        None
    );
    // Nothing meets the target: no mix does either.
    assert_eq!(
        Mix::cheapest(&scored(&[(0, 1.0, 0.7)]), 0.8, f64::INFINITY),
        None
    );
}

#[test]
fn too_few_labels_serve_the_most_accurate_and_old_labels_are_forgotten() {
    let models = models();
    let mut tracker = Tracker::new(TrackingConfig::cocktail(), vec![0]);
    for k in 0..10 {
        tracker.label(k + 1, item(k as usize, EASY));
    }
    for _ in 0..100 {
        tracker.served(&models, &constraint());
    }
    assert_eq!(tracker.members(), [2]);
    // 1,000 requests later the ten labels are gone.
    for _ in 0..1000 {
        tracker.served(&models, &constraint());
    }
    assert!(tracker.is_empty());
}

#[test]
fn a_price_weighs_how_surely_a_choice_meets_the_target_against_its_cost() {
    // Target 0.8 on a window of 200. Model 0 (0.01 ms) is right on 81 items of 100:
    // it meets the target on the window, barely (a window of its answers meets it about
    // three times in five). Model 2 (10 ms) is right on 95: surely. The cheapest that
    // meets the target is model 0; a price of 0.01 per ms makes model 2's 10 ms cost a
    // tenth of a chance, less than the surety it adds; a price of 0.1 makes it cost a
    // whole chance, more than that.
    const RIGHT: [fn(usize) -> bool; 3] = [|k| k % 100 < 81, |_| false, |k| k % 20 != 0];
    let serve = |price| {
        let config = TrackingConfig {
            price,
            ..TrackingConfig::plain()
        };
        let mut tracker = Tracker::new(config, vec![0]);
        run(&mut tracker, 0, 400, RIGHT).last().cloned().unwrap()
    };
    assert_eq!(serve(None), vec![0]);
    assert_eq!(serve(Some(0.01)), vec![2]);
    assert_eq!(serve(Some(0.1)), vec![0]);
    // The chance itself: at the target, a half; 0.9 on 100 items is 3.33 of its standard
    // errors (0.03) above 0.8: 0.99957.
    assert!((met_chance(0.8, 0.8, 200) - 0.5).abs() < 1e-9);
    assert!((met_chance(0.9, 0.8, 100) - 0.99957).abs() < 1e-5);
}

#[test]
fn a_price_out_of_range_is_refused_naming_the_flag() {
    let knobs = Knobs::default();
    assert_eq!(knobs.priced(None), Ok(knobs));
    assert_eq!(knobs.priced(Some(0.03)).map(|k| k.price), Ok(Some(0.03)));
    for bad in [-0.1, 1.5, f64::NAN] {
        let error = knobs.priced(Some(bad)).unwrap_err().to_string();
        assert!(
            error.contains("`--tracking-price` must be 0 to 1"),
            "{error}"
        );
    }
    let set = knobs.priced(Some(0.035)).unwrap().to_string();
    assert_eq!(set, "--tracking-price 0.035");
}
