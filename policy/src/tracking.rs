//! Selection that follows the traffic (issue 34): when the inputs drift (a new domain,
//! other classes), the models' accuracies change and an ensemble chosen once, or on a
//! long window, serves the old traffic's best choice. A [`Tracker`] keeps one
//! constraint's recent labelled items with every candidate's answer (as measured
//! selection's buffer does) and re-selects on them:
//!
//! - at every interval it re-estimates each candidate's and each odd-sized vote's
//!   accuracy on the window and serves the cheapest (least summed latency) that meets the
//!   target with room for the window's sampling error; when none does, the most accurate
//!   on the window. So a member that stopped helping is dropped, a slower, more accurate
//!   model comes in when the cheap ones fall short, and it goes when they suffice again;
//! - it watches the served ensemble on the latest labelled items: when they fall clearly
//!   below the target (a shift), it forgets the items from before and re-selects at once
//!   on what came after, instead of waiting for the window to turn over;
//! - labels older than a set number of requests are forgotten, so with sparse labels the
//!   window does not reach back into traffic long gone; with too few labels to tell, it
//!   serves the most accurate candidate (the safe choice a static pick would make);
//! - with [`TrackingConfig::pace`], it may serve two choices in turn instead of one: the
//!   cheapest mix that meets the target costs no more than the cheapest single choice
//!   that does, and holds no more room above the target than asked for.
//!
//! [`TrackingConfig::plain`] is the plain windowed re-selection the issue compares
//! against: the same search on the last 200 labels every 100 requests, with none of the
//! above.

use std::collections::VecDeque;

use crate::estimate::{Rule, combinations, majority_vote, soft_vote};
use crate::measured::Labelled;
use crate::selection::{self, Candidate, Constraint};

/// How a [`Tracker`] follows the traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackingConfig {
    /// Labelled items re-selection looks at, at most.
    pub window: usize,
    /// Requests between two re-selections.
    pub interval: u64,
    /// Standard errors (of the window's accuracy at the target) a choice must clear the
    /// target by; 0: the target itself.
    pub margin_z: f64,
    /// Latest labelled items the shift check looks at; 0: no shift check.
    pub recent: usize,
    /// Standard errors below the target on the `recent` items that make a shift.
    pub shift_z: f64,
    /// Labels served more than this many requests ago are forgotten; `None`: never.
    pub max_age: Option<u64>,
    /// Fewer labelled items than this: serve the most accurate candidate.
    pub min_items: usize,
    /// Members a vote has at most (odd sizes only: an even vote is decided by ties).
    pub max_members: usize,
    /// When no choice meets the target: serve the most accurate candidate by profile if
    /// it is within this many standard errors of the most accurate on the window;
    /// `None`: the most accurate on the window.
    pub prefer_profile_z: Option<f64>,
    /// The rule its votes are voted with, and so scored with.
    pub rule: Rule,
    /// Serve two choices in turn, a cheaper one short of the target (with its margin)
    /// and a dearer one above it, in the shares whose mix meets it at the least cost,
    /// when that is cheaper than the cheapest single choice that meets it. A window of
    /// requests served by the mix is as accurate as the shares say, so the target is met
    /// with no more room than the margin, where a single choice meets it with whatever
    /// room the next dearer choice happens to have.
    pub pace: bool,
}

impl TrackingConfig {
    /// Cocktail's tracking. The numbers are chosen from first principles, not tuned on
    /// results: 1.645 standard errors is a one-sided 95 % bound; a shift is an
    /// accuracy one standard error below the target on the last 50 labels (a quarter of
    /// the window, so it shows within half an interval at full labelling); labels older
    /// than 1,000 requests are forgotten (a third of a phase of the drift schedules).
    /// `prefer_profile_z` was added after the first drift results (Cocktail lost the NYT
    /// phase to lucky cheap votes after its shift re-selections on 50 labels); the page
    /// says so.
    pub fn cocktail() -> Self {
        Self {
            window: 200,
            interval: 100,
            margin_z: 1.645,
            recent: 50,
            shift_z: 1.0,
            max_age: Some(1000),
            min_items: 30,
            max_members: 5,
            prefer_profile_z: Some(1.0),
            rule: Rule::Majority,
            pace: false,
        }
    }

    /// Cocktail's tracking as the master and the simulator serve with it
    /// (`--selection tracking`): votes scored by `rule`, the one they are voted with,
    /// a re-selection every `interval` requests (Cocktail's 100 when `None`), and the
    /// margin, shift check and pacing an operator set (`knobs`).
    pub fn serving(rule: Rule, interval: Option<u64>, knobs: Knobs) -> Self {
        let cocktail = Self::cocktail();
        Self {
            rule,
            pace: knobs.pace,
            margin_z: knobs.margin_z,
            recent: if knobs.shift_check {
                cocktail.recent
            } else {
                0
            },
            interval: interval.map_or(cocktail.interval, |n| n.max(1)),
            ..cocktail
        }
    }

    /// Plain re-selection: the last 200 labels, every 100 requests, the cheapest choice
    /// that meets the target on them.
    pub fn plain() -> Self {
        Self {
            window: 200,
            interval: 100,
            margin_z: 0.0,
            recent: 0,
            shift_z: 0.0,
            max_age: None,
            min_items: 1,
            max_members: 5,
            prefer_profile_z: None,
            rule: Rule::Majority,
            pace: false,
        }
    }
}

/// What an operator sets of a tracker (the master's `--tracking-margin`,
/// `--no-shift-check` and `--pace`); the rest is [`TrackingConfig::cocktail`]'s. The drift
/// replay tunes them on a held-out half of the test set (`benches/src/sim/tuning.rs`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Knobs {
    /// [`TrackingConfig::margin_z`].
    pub margin_z: f64,
    /// Whether the shift check runs (on [`TrackingConfig::cocktail`]'s `recent` items).
    pub shift_check: bool,
    /// [`TrackingConfig::pace`].
    pub pace: bool,
}

impl Knobs {
    /// The largest margin an operator may set: beyond 10 standard errors no choice ever
    /// clears the target on a window of 200, and the tracker serves the most accurate.
    pub const MAX_MARGIN_Z: f64 = 10.0;

    /// An operator's settings, the margin checked (`--tracking-margin`: 0 to
    /// [`Knobs::MAX_MARGIN_Z`], a number).
    pub fn new(margin_z: f64, shift_check: bool, pace: bool) -> Result<Self, MarginOutOfRange> {
        if !(0.0..=Self::MAX_MARGIN_Z).contains(&margin_z) {
            return Err(MarginOutOfRange(margin_z));
        }
        Ok(Self {
            margin_z,
            shift_check,
            pace,
        })
    }
}

/// A `--tracking-margin` outside 0 to [`Knobs::MAX_MARGIN_Z`] (or not a number).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MarginOutOfRange(pub f64);

impl std::fmt::Display for MarginOutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`--tracking-margin` must be 0 to {} standard errors; given {}",
            Knobs::MAX_MARGIN_Z,
            self.0
        )
    }
}

impl std::error::Error for MarginOutOfRange {}

impl Default for Knobs {
    /// Cocktail's: its margin, the shift check, no pacing.
    fn default() -> Self {
        Self {
            margin_z: TrackingConfig::cocktail().margin_z,
            shift_check: true,
            pace: false,
        }
    }
}

impl std::fmt::Display for Knobs {
    /// As the master's flags that set them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--tracking-margin {}", self.margin_z)?;
        if !self.shift_check {
            f.write_str(" --no-shift-check")?;
        }
        if self.pace {
            f.write_str(" --pace")?;
        }
        Ok(())
    }
}

/// Why the members changed (or were checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reselect {
    /// The interval ended.
    Interval,
    /// The latest labels showed the served ensemble falling short.
    Shift,
}

/// One constraint's tracking state.
#[derive(Debug, Clone)]
pub struct Tracker {
    config: TrackingConfig,
    /// (the request it was served at, the item), oldest first.
    items: VecDeque<(u64, Labelled)>,
    members: Vec<usize>,
    /// Under `pace`, the two choices served in turn.
    mix: Option<Mix>,
    requests: u64,
    /// Labels in since the last shift check fired (a check needs `recent` new ones).
    fresh: usize,
    pub shifts: u64,
}

impl Tracker {
    /// A tracker serving `members` until it knows better.
    pub fn new(config: TrackingConfig, members: Vec<usize>) -> Self {
        Self {
            config,
            items: VecDeque::new(),
            members,
            mix: None,
            requests: 0,
            fresh: 0,
            shifts: 0,
        }
    }

    /// The ensemble to serve now.
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    /// Under [`TrackingConfig::pace`], the mix served now: (the cheaper choice, the
    /// dearer one, the dearer one's share of the requests).
    pub fn mix(&self) -> Option<(&[usize], &[usize], f64)> {
        self.mix
            .as_ref()
            .map(|m| (m.lo.as_slice(), m.hi.as_slice(), m.share))
    }

    /// Requests served so far (what [`Tracker::label`]'s `served_at` counts).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Serves `members` from now on, chosen elsewhere (another master, through the
    /// shared cache); the next re-selection may choose again.
    pub fn adopt(&mut self, members: &[usize]) {
        if self
            .mix
            .as_ref()
            .is_some_and(|m| m.lo != members && m.hi != members)
        {
            self.mix = None;
        }
        members.clone_into(&mut self.members);
    }

    /// The labelled items it holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// A label came in for the request served at `served_at` (a request count, as
    /// [`Tracker::served`] counts them), with every candidate's answer on it.
    pub fn label(&mut self, served_at: u64, item: Labelled) {
        if self.items.len() == self.config.window.max(1) {
            self.items.pop_front();
        }
        self.items.push_back((served_at, item));
        self.fresh += 1;
    }

    /// One more request was served. Re-selects when the interval ends or the latest
    /// labels show a shift; returns why, if that changed the choice. Under
    /// [`TrackingConfig::pace`] the members can change without a new choice: the mix's
    /// turn of its other side.
    pub fn served(&mut self, models: &[Candidate], constraint: &Constraint) -> Option<Reselect> {
        self.requests += 1;
        if let Some(age) = self.config.max_age {
            let oldest = self.requests.saturating_sub(age);
            while self.items.front().is_some_and(|(at, _)| *at < oldest) {
                self.items.pop_front();
            }
        }
        let why = if self.shifted(models, constraint.accuracy) {
            // Forget what came before the shift: the latest items are the new traffic.
            let keep = self.config.recent;
            while self.items.len() > keep {
                self.items.pop_front();
            }
            self.fresh = 0;
            self.shifts += 1;
            Some(Reselect::Shift)
        } else if self.requests.is_multiple_of(self.config.interval.max(1)) {
            Some(Reselect::Interval)
        } else {
            None
        };
        let changed = match why.map(|_| self.choose(models, constraint)) {
            None => false,
            Some(Choice::One(members)) => {
                let changed = self.mix.is_some() || members != self.members;
                self.mix = None;
                self.members = members;
                changed
            }
            Some(Choice::Mix(mix)) => match &mut self.mix {
                // The same pair in new shares: its turns go on.
                Some(old) if old.lo == mix.lo && old.hi == mix.hi => {
                    old.share = mix.share;
                    false
                }
                _ => {
                    self.mix = Some(mix);
                    true
                }
            },
        };
        if let Some(mix) = &mut self.mix {
            let next = mix.next();
            if next != self.members {
                next.clone_into(&mut self.members);
            }
        }
        why.filter(|_| changed)
    }

    /// Whether the served ensemble's majority on the latest `recent` items fell more
    /// than `shift_z` standard errors below `target`.
    fn shifted(&self, models: &[Candidate], target: f64) -> bool {
        let recent = self.config.recent;
        if recent == 0 || self.fresh < recent || self.items.len() < recent {
            return false;
        }
        let on_latest = |members: &[usize]| {
            let latest = self.items.iter().skip(self.items.len() - recent);
            vote_accuracy(latest.map(|(_, i)| i), members, models, self.config.rule)
        };
        let accuracy = match &self.mix {
            None => on_latest(&self.members),
            Some(mix) => on_latest(&mix.lo)
                .zip(on_latest(&mix.hi))
                .map(|(lo, hi)| lo + mix.share * (hi - lo)),
        };
        let Some(accuracy) = accuracy else {
            return false;
        };
        accuracy < target - self.config.shift_z * standard_error(target, recent)
    }

    /// The cheapest candidate or odd vote that meets the target on the window with room
    /// for its sampling error; else the most accurate on it; the most accurate candidate
    /// by profile while the window holds fewer than `min_items`.
    fn choose(&self, models: &[Candidate], constraint: &Constraint) -> Choice {
        let pool = selection::candidates(models, constraint);
        let by_profile = pool
            .iter()
            .copied()
            .max_by(|&a, &b| models[a].accuracy.total_cmp(&models[b].accuracy));
        if self.items.len() < self.config.min_items.max(1) {
            return Choice::One(by_profile.map_or_else(|| self.members.clone(), |m| vec![m]));
        }
        let needed = constraint.accuracy
            + self.config.margin_z * standard_error(constraint.accuracy, self.items.len());
        let cost =
            |members: &[usize]| -> f64 { members.iter().map(|&m| models[m].latency_ms).sum() };
        let mut best: Option<(Vec<usize>, f64)> = None;
        let mut cheapest_meeting: Option<(Vec<usize>, f64)> = None;
        let mut scored: Vec<(Vec<usize>, f64, f64)> = Vec::new();
        for size in (1..=self.config.max_members.min(pool.len())).step_by(2) {
            for members in combinations(&pool, size) {
                let Some(accuracy) = vote_accuracy(
                    self.items.iter().map(|(_, i)| i),
                    &members,
                    models,
                    self.config.rule,
                ) else {
                    continue;
                };
                let c = cost(&members);
                if self.config.pace {
                    scored.push((members.clone(), c, accuracy));
                }
                // Cheapest; ties to the more accurate (two models can profile alike).
                if accuracy >= needed
                    && cheapest_meeting.as_ref().is_none_or(|(m, a)| {
                        c.total_cmp(&cost(m)).then(a.total_cmp(&accuracy)).is_lt()
                    })
                {
                    cheapest_meeting = Some((members.clone(), accuracy));
                }
                // Most accurate; ties to the cheaper.
                if best
                    .as_ref()
                    .is_none_or(|(m, a)| a.total_cmp(&accuracy).then(c.total_cmp(&cost(m))).is_lt())
                {
                    best = Some((members, accuracy));
                }
            }
        }
        if let Some((members, _)) = cheapest_meeting {
            let alone = cost(&members);
            return Mix::cheapest(&scored, needed, alone).map_or(Choice::One(members), Choice::Mix);
        }
        // Nothing meets it. Out of 32 or more choices, the one most accurate on a window
        // of 50 to 200 items is often a cheap vote that was lucky on it; when the window
        // cannot tell the most accurate model by profile from it, that model serves.
        if let (Some(z), Some(m), Some((_, top))) =
            (self.config.prefer_profile_z, by_profile, &best)
        {
            let within = top - z * standard_error(*top, self.items.len());
            if vote_accuracy(
                self.items.iter().map(|(_, i)| i),
                &[m],
                models,
                self.config.rule,
            )
            .is_some_and(|a| a >= within)
            {
                return Choice::One(vec![m]);
            }
        }
        Choice::One(best.map(|(m, _)| m).unwrap_or_else(|| self.members.clone()))
    }
}

/// What a re-selection chose.
#[derive(Debug, Clone, PartialEq)]
enum Choice {
    One(Vec<usize>),
    Mix(Mix),
}

/// Two choices served in turn: `hi` for a `share` of the requests, `lo` for the rest,
/// spread evenly (each request adds `share` to a credit; a whole unit serves `hi`), so
/// every run of requests holds about that share.
#[derive(Debug, Clone, PartialEq)]
struct Mix {
    lo: Vec<usize>,
    hi: Vec<usize>,
    share: f64,
    credit: f64,
}

impl Mix {
    /// Of `scored` (members, cost, accuracy on the window), the pair of a choice short of
    /// `needed` and one that meets it whose mix reaches `needed` at the least cost, when
    /// that is cheaper than `alone`, the cost of the cheapest choice meeting it.
    fn cheapest(scored: &[(Vec<usize>, f64, f64)], needed: f64, alone: f64) -> Option<Self> {
        let mut best: Option<(f64, &Vec<usize>, &Vec<usize>, f64)> = None;
        for (hi, c_hi, a_hi) in scored.iter().filter(|(_, _, a)| *a >= needed) {
            for (lo, c_lo, a_lo) in scored.iter().filter(|(_, c, a)| *a < needed && c < c_hi) {
                let share = (needed - a_lo) / (a_hi - a_lo);
                let cost = c_lo + share * (c_hi - c_lo);
                if cost < alone && best.is_none_or(|(b, ..)| cost < b) {
                    best = Some((cost, lo, hi, share));
                }
            }
        }
        let (_, lo, hi, share) = best?;
        Some(Self {
            lo: lo.clone(),
            hi: hi.clone(),
            share,
            credit: 0.0,
        })
    }

    /// The choice the next request is served by.
    fn next(&mut self) -> &[usize] {
        self.credit += self.share;
        if self.credit >= 1.0 {
            self.credit -= 1.0;
            &self.hi
        } else {
            &self.lo
        }
    }
}

/// The standard error of an accuracy `p` measured on `n` items.
fn standard_error(p: f64, n: usize) -> f64 {
    (p * (1.0 - p) / n.max(1) as f64).sqrt()
}

/// The share of `items` on which the vote of `members` under `rule` is right (a plain
/// majority breaks ties to the voter most accurate by profile), among those every member
/// answered (with its probability vector, for a soft vote); `None` if none.
pub fn vote_accuracy<'a>(
    items: impl Iterator<Item = &'a Labelled>,
    members: &[usize],
    models: &[Candidate],
    rule: Rule,
) -> Option<f64> {
    if members.is_empty() {
        return None;
    }
    let mut tally = Vec::with_capacity(members.len());
    let mut votes = Vec::with_capacity(members.len());
    let mut sums = Vec::new();
    let mut ballots: Vec<(&[f32], u16, f64)> = Vec::with_capacity(members.len());
    let (mut counted, mut right) = (0_usize, 0_usize);
    for item in items {
        let answered = match rule {
            Rule::Majority => {
                votes.clear();
                votes.extend(members.iter().map_while(|&m| {
                    let class = item.answers.get(m).copied().flatten()?;
                    Some((class, models.get(m).map_or(0.0, |c| c.accuracy)))
                }));
                (votes.len() == members.len())
                    .then(|| majority_vote(votes.iter().copied(), &mut tally))
                    .flatten()
            }
            Rule::Soft => {
                ballots.clear();
                ballots.extend(members.iter().map_while(|&m| {
                    let row = item.probabilities.get(m)?.as_deref()?;
                    let class = item.answers.get(m).copied().flatten()?;
                    Some((row, class, models.get(m).map_or(0.0, |c| c.accuracy)))
                }));
                (ballots.len() == members.len())
                    .then(|| soft_vote(ballots.iter().copied(), &mut sums))
                    .flatten()
                    .and_then(|c| u16::try_from(c).ok())
            }
        };
        let Some(class) = answered else {
            continue;
        };
        counted += 1;
        right += usize::from(class == item.label);
    }
    (counted > 0).then(|| right as f64 / counted as f64)
}

#[cfg(test)]
mod tests {
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
            (vote_accuracy(items.iter(), &[2], &models, Rule::Soft).unwrap() - 1.0 / 3.0).abs()
                < 1e-9
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
        let first = |members: Vec<Vec<usize>>| members.iter().position(|m| m == &vec![2]);
        let tracked = first(run(&mut cocktail, 600, 400, HARD)).unwrap();
        let plainly = first(run(&mut plain, 600, 400, HARD)).unwrap();
        // The shift check fires within the recent 50 labels; the plain window needs
        // enough hard items to pull its average below the target.
        assert!(tracked <= 50, "{tracked}");
        assert!(tracked < plainly, "{tracked} vs {plainly}");
        assert_eq!(cocktail.shifts, 1);
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
        const CLOSE: [fn(usize) -> bool; 3] =
            [|k| k % 100 < 77, |k| k % 100 < 77, |k| k % 100 >= 25];
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
}
