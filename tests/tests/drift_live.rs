//! A drift schedule through the live system (issue 34, point 6): a shortened
//! `sentiment-domains` (movie, NYT, tweets, Amazon), sent by `cocktail loadgen --drift`'s
//! code to a real master with every sentiment model on real workers, every request
//! labelled, against the drift replay of the same requests (`cocktail sim --drift`).
//! Once with the paper's selection, O1 on the recorded answers then O2 on the window
//! every 100 requests, against the replay's `Cocktail (O1/O2)`; once with
//! `--selection tracking` (every request also asked of every candidate), against the
//! replay's `Cocktail (tracking)`; once more with `--pace` (two choices served in
//! turn), against `Cocktail (tracking, paced)`; and with `--tracking-price` (each choice
//! weighed by how surely it meets the target against its inference), against the same
//! tracking replayed with that price. Either way the same policy code chooses,
//! and they agree on accuracy met within 3 points and on models per request within 10 %
//! (a tracker's with its replay at one of the label lags a live run can have: see the
//! priced tracker's test).
//!
//! O1's replay chooses among the response times this master predicts (each model's
//! inference plus the hop its readiness probe measured), as the simulator takes the live
//! system's measured hop; a tracker, live and replayed, among the inference times alone
//! (the hop moves with the load: see `Master::tracked`). O1 serves the fastest model that
//! meets the target, and `gru` and `cnn` are profiled 23 µs apart, less than the noise of
//! a measured hop. On profiles alone the replay started from `gru` while the master, in
//! two of three runs on a fresh clone, started from `cnn` and took another O2 path (67.8 %
//! of requests meeting the target live against 92.8 % replayed).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::sync::Arc;
use std::time::Duration;

use cocktail_benches::loadgen::{self, DriftLoad, LoadgenConfig};
use cocktail_benches::sim::World;
use cocktail_benches::sim::drift::{
    DriftResult, DriftScheme, DriftWorld, Feedback, run, run_tracking,
};
use cocktail_benches::workload::Mix;
use cocktail_benches::workload::drift::{SENTIMENT_DOMAINS, Schedule};
use cocktail_common::Zoo;
use cocktail_policy::estimate::Rule;
use cocktail_policy::tracking::{Knobs, TrackingConfig};
use cocktail_tests::cluster::{Cluster, eventually, task_models};
use cocktail_tests::load;
use cocktail_tests::zoo_manifest;

/// `sentiment-domains` at a tenth of its length: 300 requests per domain with 40-request
/// blends, once round (1,200 requests), at the rate the live run sends them.
static SHORT: Schedule = Schedule {
    phase_requests: 300,
    blend_requests: 40,
    rounds: 1,
    rate: RATE,
    ..SENTIMENT_DOMAINS
};

const SEED: u64 = 5;
/// Requests per second: MiniLM takes about 25 ms of a core per sentence here.
const RATE: f64 = 20.0;
/// The schedules ask for accuracy at any latency; this one every model meets.
const LATENCY_MS: f64 = 10_000.0;

/// The label lags, in requests, a tracker's live run is checked against: a label joins
/// the live window once its request's shadow calls are back, and arrivals can overtake
/// them (see `a_priced_tracking_master_meets_its_target_as_often_as_its_replay`).
const LABEL_LAGS: u32 = 6;

/// One live run at a time: the replay chooses among the response times the master's
/// probes measured, and three clusters of every sentiment model on two cores measured
/// hops of about 5 ms where one alone measures 1.8 ms, which reorders the cheap models
/// (the paced run then met the target on 79.7 % of requests live against 89.7 %
/// replayed).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Each sentiment model's predicted response time (`/v2/models`' `predicted_ms`), once
/// every pool's readiness probe has answered (`overhead_ms`: the probes' median hop,
/// until a member call is measured): what O1 chooses among at the first request. With
/// `inference_only`, the part of it that is inference (less `overhead_ms`): what a
/// priced tracker weighs.
async fn predicted_response_times(
    cluster: &Cluster,
    models: usize,
    inference_only: bool,
) -> Vec<(String, f64)> {
    eventually(
        "every pool's probe measured its hop",
        Duration::from_secs(30),
        || async {
            let measured = task_models(cluster, "sentiment")
                .await
                .iter()
                .filter(|m| m["overhead_ms"].is_number())
                .count();
            measured == models
        },
    )
    .await;
    task_models(cluster, "sentiment")
        .await
        .iter()
        .map(|m| {
            let overhead = if inference_only {
                m["overhead_ms"].as_f64().unwrap()
            } else {
                0.0
            };
            (
                m["name"].as_str().unwrap().to_owned(),
                m["predicted_ms"].as_f64().unwrap() - overhead,
            )
        })
        .collect()
}

/// The shortened schedule through a master started with `flags` (beside the replay's
/// interval and no pseudo-labels), and its replay under `scheme` (a tracker with
/// `tracking`'s settings when given): the live run's
/// report, the replay, the master's ensembles at the end and the requests it answered
/// by a paced mix (`cocktail_master_paced_requests_total`).
async fn live_and_replayed(
    flags: &[&str],
    scheme: DriftScheme,
    tracking: Option<TrackingConfig>,
) -> (loadgen::LoadReport, DriftResult, serde_json::Value, f64) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let zoo = Zoo::load(zoo_manifest()).unwrap();
    let world = World::load(&zoo, "sentiment").unwrap();
    let models: Vec<&str> = world.models.iter().map(String::as_str).collect();
    // The replay re-selects every 100 requests and learns from no pseudo-label.
    let mut args = vec!["--interval-requests", "100", "--pseudo-label-every", "0"];
    args.extend_from_slice(flags);
    let cluster = Cluster::start(&args, &models).await;
    let tracks = tracking.is_some()
        || matches!(
            scheme,
            DriftScheme::Cocktail | DriftScheme::CocktailSoft | DriftScheme::CocktailPaced
        );
    // A tracker weighs the models' predicted inference alone, live and replayed.
    let predicted = predicted_response_times(&cluster, models.len(), tracks).await;
    let timed = world.with_response_times(&predicted).unwrap();
    let dw = DriftWorld::new(&zoo, &timed, &SHORT).unwrap();
    // Every label is in the request. O2's window learns it before the request is counted,
    // as the replay's labels with no delay; a tracker's window takes the item once the
    // shadow calls' answers are back, after the request was counted and before the next
    // one comes: a label one request late in the replay. (Replayed with no delay, the
    // paced tracker met the target 3 points more often than live in one run of three;
    // one request late, within 0.2–1.2 points.)
    let full = Feedback {
        fraction: 1.0,
        delay_s: if tracks { 1.0 / RATE } else { 0.0 },
    };
    let replay = |feedback| match tracking {
        Some(config) => run_tracking(&dw, config, feedback, SEED),
        None => run(&dw, scheme, feedback, SEED),
    };
    let replayed = replay(full);

    let (items, labelled) = dw.requests(SEED, full.fraction);
    let seconds = (items.len() as f64 / RATE).ceil() as usize + 1;
    let drift = DriftLoad {
        name: SHORT.name.to_owned(),
        items,
        labelled,
        latency_ms: LATENCY_MS,
        accuracy: SHORT.target,
        objective: dw.constraint().objective,
        delay: Duration::ZERO,
    };
    let types = drift.types();
    let config = LoadgenConfig {
        // One request at a time, as the replay serves them: each label is in the
        // master's window before the next request arrives. (With requests in flight
        // when O2 revisits, their labels fall into the next generation's window and are
        // dropped; on CI's machine at 20 req/s open loop that sent O2 down another path.)
        max_in_flight: 1,
        timeout: Duration::from_secs(30),
        drift: Some(Arc::new(drift)),
        // The mix is not used: the drift load has its own constraint.
        ..LoadgenConfig::steady(
            &cluster.master.url,
            "sentiment",
            RATE,
            seconds,
            Mix::Strict,
            SEED,
        )
    };
    let (inputs, labels) = loadgen::inputs(&zoo, "sentiment").unwrap();
    let live = loadgen::run(&config, &types, Arc::new(inputs), Arc::new(labels), None)
        .await
        .unwrap();
    let ensembles = cluster.get("/v1/ensembles").await;
    // What the hop grew to under the load (a tracker does not weigh it).
    let after = predicted_response_times(&cluster, models.len(), false).await;
    let paced = cluster.metric("cocktail_master_paced_requests_total").await;
    eprintln!(
        "{}: predicted response times: {predicted:?}\n\
         with the hop, after the run: {after:?}\n\
         live: {} requests, accuracy met {:.4}, accuracy {:.4}, models/request {:.3}; ensembles {ensembles}\n\
         replayed: {} requests, accuracy met {:.4}, accuracy {:.4}, models/request {:.3}, shifts {}\n\
         paced: {paced} live, {} replayed",
        scheme.name(),
        live.sent,
        live.accuracy_met,
        live.accuracy,
        live.models_per_request,
        replayed.requests,
        replayed.accuracy_met,
        replayed.accuracy,
        replayed.models_per_request,
        replayed.shifts,
        replayed.paced,
    );
    if tracks {
        // A tracker's live run agrees with its replay at one of the label lags it can
        // have (`replayed` is the replay with labels one request late).
        load::assert_all_answered(&live, replayed.requests);
        let later: Vec<DriftResult> = (2..=LABEL_LAGS)
            .map(|late| {
                replay(Feedback {
                    delay_s: f64::from(late) / RATE,
                    ..full
                })
            })
            .collect();
        let lagged: Vec<(f64, f64)> = std::iter::once(&replayed)
            .chain(&later)
            .map(|r| (r.accuracy_met, r.models_per_request))
            .collect();
        assert!(
            lagged.iter().any(|&(met, models)| {
                (live.accuracy_met - met).abs() <= 0.03
                    && load::models_agree(live.models_per_request, models)
            }),
            "accuracy met and models per request: live ({}, {}) vs replayed with labels \
             1 to {LABEL_LAGS} requests late {lagged:?}",
            live.accuracy_met,
            live.models_per_request
        );
    } else {
        load::assert_agrees(
            &live,
            replayed.requests,
            replayed.accuracy_met,
            replayed.models_per_request,
        );
    }
    (live, replayed, ensembles, paced)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shortened_sentiment_domains_meets_its_target_live_as_often_as_replayed() {
    let (_, replayed, ensembles, _) = live_and_replayed(&[], DriftScheme::CocktailO2, None).await;
    // O1 serves the fastest model that meets the target by its profile; O2 adds to it
    // where a domain falls short, live as replayed.
    assert!(replayed.models_per_request > 1.0, "{replayed:?}");
    assert!(
        ensembles["ensembles"][0]["generation"].as_u64() > Some(0),
        "{ensembles}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracking_master_follows_the_domains_as_its_replay_does() {
    let (live, replayed, ensembles, _) = live_and_replayed(
        &["--selection", "tracking", "--shadow-every", "1"],
        DriftScheme::Cocktail,
        None,
    )
    .await;
    // The tracker changed the members as the domains changed, live as replayed.
    assert!(replayed.models_per_request > 1.0, "{replayed:?}");
    assert!(
        ensembles["ensembles"][0]["generation"].as_u64() > Some(1),
        "{ensembles}"
    );
    assert!(live.models_per_request > 1.0, "{live:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_tracking_master_mixes_two_choices_as_its_replay_does() {
    let (_, replayed, _, paced) = live_and_replayed(
        &["--selection", "tracking", "--pace", "--shadow-every", "1"],
        DriftScheme::CocktailPaced,
        None,
    )
    .await;
    // The replay served some requests by a mix of two choices, and so did the master.
    assert!(replayed.paced > 0, "{replayed:?}");
    assert!(paced > 0.0, "{paced}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priced_tracking_master_meets_its_target_as_often_as_its_replay() {
    // The setting the page's tuning chose with every label (`Cocktail (tracking, tuned)`).
    // Accuracy met agrees (63.3–63.4 % live, 63.4 % replayed, in thirteen runs on
    // 2026-12-05); models per request do not always: 1.50 live against 1.33 replayed in
    // five of them, equal in the other eight, so a tracker's run is checked against the
    // replays with labels 1 to `LABEL_LAGS` requests late. The first re-selection (request
    // 100) decides it, on the labels in by then. The replay gives it those of requests
    // 1–99; live, a label joins the window once its request's shadow calls are back, and
    // Poisson arrivals that come while the first requests are slow can overtake them (the
    // master logs how many labels a change was decided on: `measured_items=98` or `99` in
    // the runs that agreed). On the movie items every cheap choice meets the target almost
    // surely, so `boe_mlp` alone and the vote of `boe_tiny`, `boe` and `boe_mlp` are within
    // 0.0007 of worth, the price of their 20 µs of difference, and a few labels tip it:
    // replayed with labels 0–2 requests late `boe_mlp` serves requests 100–200 (1.33 models
    // per request), 3 or 4 late the vote does (1.50, accuracy met 62.4 %), as in those five
    // live runs; from request 200 on they choose alike. (A rule that called two choices
    // within one label's worth equal, the cheaper serving, kept the replay at 1.33 but lost
    // 7 points of accuracy met on the page's tuned row: not kept.)
    let knobs = Knobs {
        shift_check: false,
        ..Knobs::default()
    }
    .priced(Some(0.035))
    .unwrap();
    let (live, replayed, ensembles, _) = live_and_replayed(
        &[
            "--selection",
            "tracking",
            "--no-shift-check",
            "--tracking-price",
            "0.035",
            "--shadow-every",
            "1",
        ],
        DriftScheme::Cocktail,
        Some(TrackingConfig::serving(Rule::Majority, None, knobs)),
    )
    .await;
    // The priced tracker changed the members as the domains changed, live as replayed.
    assert!(
        ensembles["ensembles"][0]["generation"].as_u64() > Some(1),
        "{ensembles}"
    );
    assert!(replayed.models_per_request >= 1.0, "{replayed:?}");
    assert!(live.models_per_request >= 1.0, "{live:?}");
}
