//! `cocktail sim --drift`: the selection schemes on a drift schedule
//! ([`crate::workload::drift`]), replayed request by request on the zoo's recorded answers,
//! with labels that come back for a share of the requests after a delay (issue 34).
//!
//! What it models: one constraint (an accuracy target, a latency every model meets), the
//! scheme's choice of members per request, their vote (a plain majority, or the mean of
//! their probability vectors for the soft scheme), the §6.1 window of
//! 200 answers for "accuracy met", and feedback. What it leaves out: instances, queueing
//! and prices (the trace simulator, [`super::run`], has those); cost here is the
//! members' summed profiled inference time per request. The tracking schemes and
//! measured selection need every candidate's answer on a labelled request (the master's
//! shadow calls): that inference is reported apart, as `shadow`, and not in
//! `models/request`. What each learning scheme keeps between requests is in
//! [`super::learner`].

use std::collections::{HashMap, VecDeque};

use cocktail_policy::estimate::{Rule, combinations};
use cocktail_policy::selection::{self, SelectionConfig};
use cocktail_policy::tracking::{Knobs, Tracker, TrackingConfig};
use serde::Serialize;

use super::World;
pub use super::drift_world::DriftWorld;
use super::drift_world::vote_right;
use super::learner::{Learner, Pending};
use super::result::Outcomes;
use super::schemes::infaas_choice;
use crate::workload::drift::Schedule;

/// Requests after each phase change that [`DriftResult::accuracy_met_after_shifts`]
/// counts: a third of a phase, five windows of 200.
pub const AFTER_SHIFT: usize = 1000;

/// Largest vote the oracle and the trackers consider.
pub const MAX_MEMBERS: usize = 5;

/// The schemes compared on a drift schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum DriftScheme {
    /// One model chosen once from the profile (InFaaS).
    #[value(name = "InFaaS")]
    Infaas,
    /// Always the most accurate model by profile.
    #[value(name = "always-best")]
    AlwaysBest,
    /// Every model, their probabilities averaged (Clipper's default ensemble).
    #[value(name = "Clipper")]
    Clipper,
    /// The paper's O1, then O2 on the window every 100 requests (Cocktail §4.1), as the
    /// live master runs it by default (every 30 s: 100 requests at the schedules' rate).
    #[value(name = "Cocktail-O2")]
    CocktailO2,
    /// Measured selection (`policy::measured`, `--selection measured`) every 100 requests.
    #[value(name = "Cocktail-M")]
    CocktailM,
    /// Re-selection every 100 requests on the last 200 labels, no more.
    #[value(name = "plain")]
    Plain,
    /// `policy::tracking` with Cocktail's settings.
    #[value(name = "Cocktail")]
    Cocktail,
    /// The same, voting and scoring its choices by the mean of the members' probability
    /// vectors (soft voting).
    #[value(name = "Cocktail-soft")]
    CocktailSoft,
    /// The same by majority, pacing a mix of two choices in the shares that meet the
    /// target at the least cost (`TrackingConfig::pace`, `--pace`).
    #[value(name = "Cocktail-paced")]
    CocktailPaced,
    /// The same by majority, its margin, shift check and pacing tuned on the held-out
    /// first half of the test set to meet the target most often within plain
    /// re-selection's inference ([`super::tuning`]).
    #[value(name = "Cocktail-tuned")]
    CocktailTuned,
    /// Knows each phase and serves its cheapest single model or vote that meets the
    /// target on the phase's scored items.
    #[value(name = "oracle")]
    Oracle,
}

impl DriftScheme {
    pub const ALL: [Self; 11] = [
        Self::Infaas,
        Self::AlwaysBest,
        Self::Clipper,
        Self::CocktailO2,
        Self::CocktailM,
        Self::Plain,
        Self::Cocktail,
        Self::CocktailSoft,
        Self::CocktailPaced,
        Self::CocktailTuned,
        Self::Oracle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Infaas => "InFaaS",
            Self::AlwaysBest => "always-best",
            Self::Clipper => "Clipper (every model, averaged)",
            Self::CocktailO2 => "Cocktail (O1/O2)",
            Self::CocktailM => "Cocktail-M (measured)",
            Self::Plain => "plain re-selection",
            Self::Cocktail => "Cocktail (tracking)",
            Self::CocktailSoft => "Cocktail (tracking, soft)",
            Self::CocktailPaced => "Cocktail (tracking, paced)",
            Self::CocktailTuned => "Cocktail (tracking, tuned)",
            Self::Oracle => "oracle",
        }
    }

    /// The rule its votes are voted with.
    pub fn rule(self) -> Rule {
        match self {
            Self::CocktailSoft | Self::Clipper => Rule::Soft,
            _ => Rule::Majority,
        }
    }

    /// Whether [`compare`] runs it on `schedule`: the tuned tracker only on the schedule
    /// whose goals compare Cocktail with plain re-selection at its inference
    /// (`sentiment-domains`, which has a held-out half to tune on). Elsewhere its 174
    /// held-out runs per schedule would cost more than the rest of the replay (on
    /// `class-skew`'s fashion zoo, 4 of its 5 minutes) for no goal.
    pub fn runs_on(self, schedule: &Schedule) -> bool {
        self != Self::CocktailTuned
            || (schedule.name == crate::workload::drift::SENTIMENT_DOMAINS.name
                && schedule.has_held_out())
    }

    /// Whether it learns from labels (and so runs once per label setting).
    pub fn learns(self) -> bool {
        matches!(
            self,
            Self::Plain
                | Self::Cocktail
                | Self::CocktailSoft
                | Self::CocktailPaced
                | Self::CocktailTuned
                | Self::CocktailO2
                | Self::CocktailM
        )
    }
}

/// Which labels come back, and when.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Feedback {
    /// The share of requests that get a label.
    pub fraction: f64,
    /// Seconds from a request to its label (at the schedule's rate).
    pub delay_s: f64,
}

/// The label settings issue 34 asks to report.
pub const FEEDBACK: [Feedback; 6] = [
    Feedback {
        fraction: 1.0,
        delay_s: 0.0,
    },
    Feedback {
        fraction: 1.0,
        delay_s: 60.0,
    },
    Feedback {
        fraction: 0.1,
        delay_s: 0.0,
    },
    Feedback {
        fraction: 0.1,
        delay_s: 60.0,
    },
    Feedback {
        fraction: 0.01,
        delay_s: 0.0,
    },
    Feedback {
        fraction: 0.01,
        delay_s: 60.0,
    },
];

/// One phase's figures (all its occurrences together).
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub name: String,
    pub accuracy: f64,
    pub accuracy_met: f64,
    pub models_per_request: f64,
}

/// One scheme's run on a schedule.
#[derive(Debug, Clone, Serialize)]
pub struct DriftResult {
    pub schedule: String,
    pub scheme: String,
    pub feedback: Feedback,
    pub requests: u64,
    pub accuracy: f64,
    /// The share of requests whose last 200 answers met the target.
    pub accuracy_met: f64,
    pub models_per_request: f64,
    /// The members' summed profiled inference time per request (µs).
    pub inference_us: f64,
    /// Inference of the shadow calls on labelled requests, per request (µs).
    pub shadow_us: f64,
    /// Accuracy met over the first [`AFTER_SHIFT`] requests of every phase but the very
    /// first: how well a scheme gets through the shifts.
    pub accuracy_met_after_shifts: f64,
    /// Re-selections the shift check started.
    pub shifts: u64,
    /// Requests served while a paced mix of two choices was in place
    /// (`TrackingConfig::pace`).
    pub paced: u64,
    /// The settings [`DriftScheme::CocktailTuned`] was tuned to, as the master's flags.
    pub tuned: Option<Knobs>,
    /// Per phase change (every phase but the very first): the requests from the change
    /// until the scheme first served a choice adapted to the new phase (one whose accuracy
    /// on the phase's items meets the target, or is within a point of the best any choice
    /// reaches there when none does), its adaptation lag; the phase's length when it
    /// never did; 0 when what it served at the change already was.
    pub lags: Vec<u64>,
    pub phases: Vec<PhaseResult>,
    /// Per 100 requests: (request, window accuracy, models per request).
    pub series: Vec<(u64, f64, f64)>,
}

/// Runs `scheme` on the schedule with `feedback`. Every scheme sees the same requests
/// and the same labelled ones for the same seed.
pub fn run(dw: &DriftWorld<'_>, scheme: DriftScheme, feedback: Feedback, seed: u64) -> DriftResult {
    if scheme != DriftScheme::CocktailTuned {
        return replay(dw, scheme, None, feedback, seed);
    }
    let knobs = super::tuning::tune(dw, feedback, seed);
    let config = TrackingConfig::serving(Rule::Majority, None, knobs);
    DriftResult {
        tuned: Some(knobs),
        ..replay(dw, scheme, Some(config), feedback, seed)
    }
}

/// Runs Cocktail's tracking set by `config` instead of by its settings (what each of its
/// rules costs: `drift_rules`).
pub fn run_tracking(
    dw: &DriftWorld<'_>,
    config: TrackingConfig,
    feedback: Feedback,
    seed: u64,
) -> DriftResult {
    replay(dw, DriftScheme::Cocktail, Some(config), feedback, seed)
}

/// [`run`], with `tracking_config` in place of the tracking schemes' settings when given.
fn replay(
    dw: &DriftWorld<'_>,
    scheme: DriftScheme,
    tracking_config: Option<TrackingConfig>,
    feedback: Feedback,
    seed: u64,
) -> DriftResult {
    let world: &World = &dw.world;
    let schedule = dw.drift.schedule;
    let models = &world.candidates;
    let constraint = dw.constraint();
    let (items, labelled) = dw.requests(seed, feedback.fraction);
    let delay = (feedback.delay_s * schedule.rate).ceil() as u64;
    let best = selection::candidates(models, &constraint)
        .into_iter()
        .max_by(|&a, &b| models[a].accuracy.total_cmp(&models[b].accuracy))
        .unwrap_or(0);
    let oracle = dw.oracle();
    let first = match scheme {
        DriftScheme::Infaas => vec![infaas_choice(models, &constraint)],
        DriftScheme::Oracle => oracle.first().cloned().unwrap_or_default(),
        // The trackers start where O1 would: nothing labelled yet.
        _ => selection::initial(models, &constraint, Some(&world.recorded)),
    };
    let rule = scheme.rule();
    let tracking = |config| {
        Some(Learner::Tracker(Box::new(Tracker::new(
            config,
            first.clone(),
        ))))
    };
    // O2 and measured selection on the tracker's interval.
    let adjusting = |rule| {
        let config = SelectionConfig {
            rule,
            ..SelectionConfig::default()
        };
        let interval = TrackingConfig::cocktail().interval;
        Some(Learner::ensemble(
            models,
            constraint,
            &world.recorded,
            config,
            interval,
        ))
    };
    let mut learner = match scheme {
        DriftScheme::Plain => tracking(TrackingConfig::plain()),
        DriftScheme::Cocktail
        | DriftScheme::CocktailSoft
        | DriftScheme::CocktailPaced
        | DriftScheme::CocktailTuned => tracking(tracking_config.unwrap_or(TrackingConfig {
            rule,
            pace: scheme == DriftScheme::CocktailPaced,
            ..TrackingConfig::cocktail()
        })),
        DriftScheme::CocktailO2 => adjusting(selection::Rule::Cocktail),
        DriftScheme::CocktailM => adjusting(selection::Rule::Measured),
        _ => None,
    };
    let all: Vec<usize> = selection::candidates(models, &constraint);
    let shadow_cost: f64 = all.iter().map(|&m| models[m].latency_ms).sum();
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut window = Outcomes::default();
    let n_phases = schedule.phases.len();
    let mut phase_tally = vec![(0_u64, 0_u64, 0_u64, 0_u64); n_phases];
    let (mut correct_total, mut met_total, mut models_total) = (0_u64, 0_u64, 0_u64);
    let (mut inference_ms, mut shadow_ms) = (0.0, 0.0);
    let mut series = Vec::new();
    let mut bucket_models = 0_u64;
    // (requests, of which met) in the first requests after each phase change.
    let mut after_shifts = (0_u64, 0_u64);
    // When the served choice first adapted to this phase (see `DriftWorld::adapted`).
    let mut adapted_at: Option<u64> = None;
    let mut adapted = HashMap::new();
    let mut lags = Vec::new();
    let mut paced = 0;
    let total = schedule.requests() as u64;
    let phase_len = schedule.phase_requests.max(1) as u64;
    for (k, (&item, &labelled)) in (0..total).zip(items.iter().zip(&labelled)) {
        let phase = schedule.phase_of(k as usize);
        // Labels due by now reach the learner before this request is served.
        if let Some(l) = &mut learner {
            l.deliver(&mut pending, k, world, &all);
        }
        paced += u64::from(learner.as_ref().is_some_and(Learner::paced));
        let members: Vec<usize> = match (scheme, &learner) {
            (_, Some(l)) => l.members().to_vec(),
            (DriftScheme::Infaas, _) => first.clone(),
            (DriftScheme::AlwaysBest, _) => vec![best],
            (DriftScheme::Clipper, _) => all.clone(),
            _ => oracle.get(phase).cloned().unwrap_or_default(),
        };
        let into = k % phase_len;
        if into == 0 {
            adapted_at = None;
        }
        if k >= phase_len {
            if adapted_at.is_none() && dw.adapted(phase, &members, rule, &mut adapted) {
                adapted_at = Some(into);
            }
            if into + 1 == phase_len {
                lags.push(adapted_at.unwrap_or(phase_len));
            }
        }
        let correct = vote_right(world, &members, item, rule);
        window.push(correct);
        let met = window.accuracy() >= constraint.accuracy;
        correct_total += u64::from(correct);
        met_total += u64::from(met);
        models_total += members.len() as u64;
        bucket_models += members.len() as u64;
        inference_ms += members.iter().map(|&m| models[m].latency_ms).sum::<f64>();
        if k >= phase_len && into < AFTER_SHIFT as u64 {
            after_shifts.0 += 1;
            after_shifts.1 += u64::from(met);
        }
        if let Some(p) = phase_tally.get_mut(phase) {
            p.0 += 1;
            p.1 += u64::from(correct);
            p.2 += u64::from(met);
            p.3 += members.len() as u64;
        }
        // Served: request k is number k + 1.
        let served_at = k + 1;
        if let Some(l) = &mut learner {
            if labelled {
                if l.shadows() {
                    shadow_ms += shadow_cost;
                }
                pending.push_back(l.pending(k + delay, served_at, item));
            }
            // A label with no delay is in before the next request.
            l.deliver(&mut pending, k, world, &all);
            l.served(models, &constraint, &world.recorded);
        }
        if served_at.is_multiple_of(100) {
            series.push((served_at, window.accuracy(), bucket_models as f64 / 100.0));
            bucket_models = 0;
        }
    }
    let n = total.max(1) as f64;
    DriftResult {
        schedule: schedule.name.to_owned(),
        scheme: scheme.name().to_owned(),
        feedback,
        requests: total,
        accuracy: correct_total as f64 / n,
        accuracy_met: met_total as f64 / n,
        models_per_request: models_total as f64 / n,
        inference_us: inference_ms * 1000.0 / n,
        shadow_us: shadow_ms * 1000.0 / n,
        accuracy_met_after_shifts: after_shifts.1 as f64 / after_shifts.0.max(1) as f64,
        shifts: learner.as_ref().map_or(0, Learner::shifts),
        paced,
        tuned: None,
        lags,
        phases: schedule
            .phases
            .iter()
            .zip(&phase_tally)
            .map(|(p, &(requests, correct, met, members))| {
                let r = requests.max(1) as f64;
                PhaseResult {
                    name: p.name.to_owned(),
                    accuracy: correct as f64 / r,
                    accuracy_met: met as f64 / r,
                    models_per_request: members as f64 / r,
                }
            })
            .collect(),
        series,
    }
}

/// A choice served throughout a schedule, as a static deployment serves it.
#[derive(Debug, Clone, Serialize)]
pub struct StaticChoice {
    pub members: Vec<usize>,
    /// Whether the members' vote is soft (the mean of their probability vectors) rather
    /// than a plain majority.
    pub soft: bool,
    /// The share of requests whose last 200 answers met the target.
    pub accuracy_met: f64,
    /// The members' summed profiled inference time per request (µs).
    pub inference_us: f64,
    /// Per run of a phase (each round's apart, in the schedule's order): the requests
    /// whose last 200 answers met the target ([`super::drift_bound::Frontier`]).
    #[serde(skip)]
    pub met_per_run: Vec<u64>,
}

/// The share of requests meeting the target that the best of `statics` reaches (0 with
/// none).
pub fn best_static_met(statics: &[StaticChoice]) -> f64 {
    statics.iter().map(|c| c.accuracy_met).fold(0.0, f64::max)
}

/// The static choices issue 34's cost goal compares Cocktail with: every single model,
/// and every odd vote of 3 or 5 among the nine models most accurate by profile (C(9, 3) +
/// C(9, 5) = 210 votes, as `ensemble_gain` searches), as a plain majority and, when the
/// vectors are recorded, as a soft vote, each served throughout the requests every scheme
/// sees for `seed`. Cheapest first.
pub fn static_choices(dw: &DriftWorld<'_>, seed: u64) -> Vec<StaticChoice> {
    let world: &World = &dw.world;
    let (items, _) = dw.requests(seed, 0.0);
    let choices = static_candidates(world);
    let mut served = crate::parallel::map_counted(&choices, None, |(members, rule)| {
        serve_throughout(dw, &items, members, *rule)
    });
    served.sort_by(|a, b| a.inference_us.total_cmp(&b.inference_us));
    served
}

/// `members` voting by `rule`, served throughout `items` (the requests of `dw`'s
/// schedule).
pub(super) fn serve_throughout(
    dw: &DriftWorld<'_>,
    items: &[usize],
    members: &[usize],
    rule: Rule,
) -> StaticChoice {
    let world: &World = &dw.world;
    let schedule = dw.drift.schedule;
    let per_run = schedule.phase_requests.max(1);
    let mut window = Outcomes::default();
    let mut met_per_run = vec![0_u64; items.len().div_ceil(per_run)];
    for (k, &item) in items.iter().enumerate() {
        window.push(vote_right(world, members, item, rule));
        if window.accuracy() >= schedule.target {
            met_per_run[k / per_run] += 1;
        }
    }
    StaticChoice {
        members: members.to_vec(),
        soft: rule == Rule::Soft,
        accuracy_met: met_per_run.iter().sum::<u64>() as f64 / items.len().max(1) as f64,
        inference_us: members
            .iter()
            .map(|&m| world.candidates[m].latency_ms * 1000.0)
            .sum(),
        met_per_run,
    }
}

/// The members and rule of each of [`static_choices`].
fn static_candidates(world: &World) -> Vec<(Vec<usize>, Rule)> {
    let models = &world.candidates;
    let mut accurate: Vec<usize> = (0..models.len()).collect();
    accurate.sort_by(|&a, &b| models[b].accuracy.total_cmp(&models[a].accuracy));
    accurate.truncate(9);
    let mut choices: Vec<(Vec<usize>, Rule)> = (0..models.len())
        .map(|m| (vec![m], Rule::Majority))
        .collect();
    let rules: &[Rule] = if world.probabilities.is_some() {
        &[Rule::Majority, Rule::Soft]
    } else {
        &[Rule::Majority]
    };
    for size in [3, 5] {
        for members in combinations(&accurate, size) {
            choices.extend(rules.iter().map(|&rule| (members.clone(), rule)));
        }
    }
    choices
}

/// Every scheme under every label setting of [`FEEDBACK`] (the label-free schemes once,
/// as labels do not change them), advancing `bar` per run.
pub fn compare(
    dw: &DriftWorld<'_>,
    seed: u64,
    bar: Option<&indicatif::ProgressBar>,
) -> Vec<DriftResult> {
    // Every scheme with full feedback, and the learning ones with the sparser feedbacks
    // too; run one per core, in this order.
    let jobs: Vec<(DriftScheme, Feedback)> = FEEDBACK
        .iter()
        .enumerate()
        .flat_map(|(k, &feedback)| {
            DriftScheme::ALL
                .into_iter()
                .filter(move |scheme| k == 0 || scheme.learns())
                .filter(|&scheme| scheme.runs_on(dw.drift.schedule))
                .map(move |scheme| (scheme, feedback))
        })
        .collect();
    if let Some(bar) = bar {
        bar.set_message(dw.drift.schedule.name);
    }
    crate::parallel::map_counted(&jobs, bar, |&(scheme, feedback)| {
        run(dw, scheme, feedback, seed)
    })
}

/// Runs in [`compare`] of `schedule`.
pub fn runs(schedule: &Schedule) -> u64 {
    let schemes = || DriftScheme::ALL.into_iter().filter(|s| s.runs_on(schedule));
    let learning = schemes().filter(|s| s.learns()).count();
    (schemes().count() + learning * (FEEDBACK.len() - 1)) as u64
}

/// The names of `members`, joined with `+`.
pub fn names(world: &World, members: &[usize]) -> String {
    members
        .iter()
        .map(|&m| world.models.get(m).map_or("?", String::as_str))
        .collect::<Vec<_>>()
        .join("+")
}

#[cfg(test)]
mod tests {
    use cocktail_common::Zoo;

    use super::*;
    use crate::workload::drift::{CLEAN, FASHION_CORRUPTIONS, GroupBy, SENTIMENT_DOMAINS};

    #[test]
    fn labels_come_for_their_fraction_and_after_their_delay() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "sentiment").unwrap();
        let dw = DriftWorld::new(&zoo, &world, &SENTIMENT_DOMAINS).unwrap();
        let every: f64 = world.candidates.iter().map(|c| c.latency_ms * 1000.0).sum();
        let plain =
            |fraction, delay_s| run(&dw, DriftScheme::Plain, Feedback { fraction, delay_s }, 1);
        // A tenth of the requests are labelled (each costs a shadow call to every model).
        let tenth = plain(0.1, 0.0);
        assert!(
            (tenth.shadow_us / every - 0.1).abs() < 0.01,
            "{}",
            tenth.shadow_us / every
        );
        // No labels, or labels that come after the run: the first choice serves
        // throughout, and differs from what labels in time make of it.
        let none = plain(0.0, 0.0);
        let late = plain(1.0, 1e9);
        let first = none.series.first().map(|s| s.2);
        assert!(none.series.iter().all(|s| Some(s.2) == first));
        assert_eq!(late.accuracy_met, none.accuracy_met);
        assert_eq!(late.inference_us, none.inference_us);
        let prompt = plain(1.0, 0.0);
        assert_ne!(prompt.accuracy_met, none.accuracy_met);
        // A 60 s delay changes what the tracker saw, so its choices.
        assert_ne!(plain(1.0, 60.0).inference_us, prompt.inference_us);
        // O2 learns from its own members' outcomes (no shadow calls), measured selection
        // from every candidate's answers; without labels both serve O1's choice.
        let learn = |scheme, fraction| {
            run(
                &dw,
                scheme,
                Feedback {
                    fraction,
                    delay_s: 0.0,
                },
                1,
            )
        };
        for scheme in [DriftScheme::CocktailO2, DriftScheme::CocktailM] {
            let blind = learn(scheme, 0.0);
            let first = blind.series.first().map(|s| s.2);
            assert!(
                blind.series.iter().all(|s| Some(s.2) == first),
                "{scheme:?}"
            );
            let taught = learn(scheme, 1.0);
            assert_ne!(taught.inference_us, blind.inference_us, "{scheme:?}");
            let shadows = if scheme == DriftScheme::CocktailM {
                every
            } else {
                0.0
            };
            assert!(
                (taught.shadow_us - shadows).abs() < 1e-6 * every,
                "{scheme:?}"
            );
        }
        // Clipper asks every model.
        let clipper = run(&dw, DriftScheme::Clipper, FEEDBACK[0], 1);
        assert_eq!(clipper.models_per_request, world.models.len() as f64);
        // The oracle serves one choice per phase, the phase's.
        let oracle = dw.oracle();
        assert_eq!(oracle.len(), SENTIMENT_DOMAINS.phases.len());
        assert!(oracle.iter().all(|m| !m.is_empty()));
        // A static choice served throughout sees the requests every scheme sees: InFaaS's
        // model among them meets the target exactly as often as InFaaS does.
        let statics = static_choices(&dw, 1);
        assert_eq!(
            statics.len(),
            6 + 2 * (20 + 6),
            "singles, and votes of 3 and 5 of 6, by majority and soft"
        );
        assert!(statics.is_sorted_by(|a, b| a.inference_us <= b.inference_us));
        let infaas = run(&dw, DriftScheme::Infaas, FEEDBACK[0], 1);
        let model = infaas_choice(&world.candidates, &dw.constraint());
        let alone = statics.iter().find(|x| x.members == [model]).unwrap();
        assert_eq!(alone.accuracy_met, infaas.accuracy_met);
        assert!((alone.inference_us - infaas.inference_us).abs() < 1e-6);
    }

    #[test]
    fn a_shifted_schedule_draws_the_corrupted_copies_after_the_clean_half() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "fashion").unwrap();
        let dw = DriftWorld::new(&zoo, &world, &FASHION_CORRUPTIONS).unwrap();
        // The clean scored half keeps its items; each corrupted copy of it follows, with
        // the same labels in the same order.
        let (first, n) = world.scored_items();
        assert_eq!(dw.world.scored_items(), (first, n));
        assert_eq!(dw.groups[0].0, CLEAN);
        assert!(dw.groups[0].1 == (first..first + n).collect::<Vec<_>>());
        let clean_labels = &world.labels[first..first + n];
        for (k, (group, items)) in dw.groups.iter().enumerate().skip(1) {
            let start = first + n * k;
            assert!(*items == (start..start + n).collect::<Vec<_>>(), "{group}");
            assert!(
                &dw.world.labels[start..start + n] == clean_labels,
                "{group}"
            );
        }
        assert_eq!(dw.world.labels.len(), world.labels.len() + 5 * n);
        // What selection estimates on stays the clean first half.
        assert_eq!(dw.world.recorded, world.recorded);
        // Inversion is a shift the models feel: every one of them is worse on it.
        let inverse = &dw.groups[5].1;
        for m in 0..world.models.len() {
            let right = |items: &[usize]| {
                items
                    .iter()
                    .filter(|&&i| dw.world.answers[m][i] == dw.world.labels[i])
                    .count()
            };
            assert!(
                right(inverse) < right(&dw.groups[0].1),
                "{}",
                world.models[m]
            );
        }
        // Adaptation lags: the oracle serves each phase's choice from its first request;
        // InFaaS's one model never adapts to the inversion, and is adapted to clean
        // images again the moment they return.
        let full = FEEDBACK[0];
        let oracle = run(&dw, DriftScheme::Oracle, full, 1);
        assert_eq!(oracle.lags, [0; 6]);
        let infaas = run(&dw, DriftScheme::Infaas, full, 1);
        let phase = FASHION_CORRUPTIONS.phase_requests as u64;
        assert_eq!(
            (infaas.lags[4], infaas.lags[5]),
            (phase, 0),
            "{:?}",
            infaas.lags
        );
        // Recorded answers that are not there are refused, naming the file and what
        // makes it.
        static ELSEWHERE: Schedule = Schedule {
            group_by: GroupBy::Shifted("predictions/elsewhere"),
            ..FASHION_CORRUPTIONS
        };
        let error = format!(
            "{:#}",
            DriftWorld::new(&zoo, &world, &ELSEWHERE).unwrap_err()
        );
        assert!(
            error.contains("predictions/elsewhere/shot_noise-1.tsv.gz"),
            "{error}"
        );
        assert!(error.contains("build-zoo.sh"), "{error}");
    }
}
