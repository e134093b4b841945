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
//! - choices that cost about as little as the cheapest one that meets the target (within
//!   [`TrackingConfig::cost_tier`] of it) count as equally cheap, and the most accurate
//!   of them on the window serves: of many cheap choices, the cheapest that meets the
//!   target on a window is often one that was lucky on it;
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
    /// Choices costing at most this many times the cheapest that meets the target (with
    /// its margin) count as equally cheap: the most accurate of them on the window
    /// serves (ties to the cheaper). 1: the cheapest serves. The cheapest choice that
    /// meets the target on a window is the cheapest of many (single models and votes of
    /// cheap models cost alike) that cleared it there, and the one that cleared it by
    /// luck is the likeliest; the most accurate of those that cost alike is the least
    /// likely to. A choice that costs much more (a slow model among fast ones) is never
    /// in the tier, so the rule spends next to nothing.
    pub cost_tier: f64,
    /// Serve two choices in turn, a cheaper one short of the target (with its margin)
    /// and a dearer one above it, in the shares whose mix meets it at the least cost,
    /// when that is cheaper than the cheapest single choice that meets it. A window of
    /// requests served by the mix is as accurate as the shares say, so the target is met
    /// with no more room than the margin, where a single choice meets it with whatever
    /// room the next dearer choice happens to have.
    pub pace: bool,
    /// What a millisecond of inference per request is worth, in chance of meeting the
    /// target: when set, a re-selection serves the choice with the most `p - price *
    /// cost`, where `p` is the chance that a window of its answers meets the target (its
    /// accuracy on the window against the target, in standard errors of the window,
    /// through the normal distribution) and `cost` its inference per request in ms; the
    /// margin, the cost tier and pacing then play no part. Where the cheapest choice that
    /// meets the target serves one that clears it barely and a dearer one that clears it
    /// surely alike, the price weighs how surely against what it costs, across phases: a
    /// cheap vote that clears the target by a margin is worth its few microseconds, a slow
    /// model is taken only where nothing cheap comes near. `None`: the cheapest choice
    /// that meets the target with its margin.
    pub price: Option<f64>,
}

impl TrackingConfig {
    /// Cocktail's tracking. The numbers are chosen from first principles, not tuned on
    /// results: 1.645 standard errors is a one-sided 95 % bound; a shift is an
    /// accuracy one standard error below the target on the last 50 labels (a quarter of
    /// the window, so it shows within half an interval at full labelling); labels older
    /// than 1,000 requests are forgotten (a third of a phase of the drift schedules).
    /// `prefer_profile_z` was added after the first drift results (Cocktail lost the NYT
    /// phase to lucky cheap votes after its shift re-selections on 50 labels), and
    /// `cost_tier` after the rules' sweep on `sentiment-domains` (the cheapest choice
    /// meeting the target on the window was often a lucky cheap one); its 1.5 is
    /// Cocktail's own "about as fast" (a packing factor is the largest batch within 1.5x
    /// one item's latency, §2.3.2). The page says so.
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
            cost_tier: 1.5,
            pace: false,
            price: None,
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
            price: knobs.price,
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
            cost_tier: 1.0,
            pace: false,
            price: None,
        }
    }
}

/// What an operator sets of a tracker (the master's `--tracking-margin`,
/// `--no-shift-check`, `--pace` and `--tracking-price`); the rest is
/// [`TrackingConfig::cocktail`]'s. The drift replay tunes them on a held-out half of the
/// test set (`benches/src/sim/tuning.rs`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Knobs {
    /// [`TrackingConfig::margin_z`].
    pub margin_z: f64,
    /// Whether the shift check runs (on [`TrackingConfig::cocktail`]'s `recent` items).
    pub shift_check: bool,
    /// [`TrackingConfig::pace`].
    pub pace: bool,
    /// [`TrackingConfig::price`].
    pub price: Option<f64>,
}

impl Knobs {
    /// The largest margin an operator may set: beyond 10 standard errors no choice ever
    /// clears the target on a window of 200, and the tracker serves the most accurate.
    pub const MAX_MARGIN_Z: f64 = 10.0;

    /// An operator's settings, the margin checked (`--tracking-margin`: 0 to
    /// [`Knobs::MAX_MARGIN_Z`], a number).
    pub fn new(margin_z: f64, shift_check: bool, pace: bool) -> Result<Self, KnobError> {
        if !(0.0..=Self::MAX_MARGIN_Z).contains(&margin_z) {
            return Err(KnobError::Margin(margin_z));
        }
        Ok(Self {
            margin_z,
            shift_check,
            pace,
            price: None,
        })
    }

    /// With a price of inference (`--tracking-price`: 0 to [`Knobs::MAX_PRICE`] per ms, a
    /// number), or none.
    pub fn priced(self, price: Option<f64>) -> Result<Self, KnobError> {
        match price {
            Some(p) if !(0.0..=Self::MAX_PRICE).contains(&p) => Err(KnobError::Price(p)),
            price => Ok(Self { price, ..self }),
        }
    }

    /// The largest price an operator may set: a millisecond worth a whole chance of
    /// meeting the target, beyond which every choice's worth is its cost alone.
    pub const MAX_PRICE: f64 = 1.0;
}

/// An operator's tracker setting out of its range (or not a number).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KnobError {
    /// A `--tracking-margin` outside 0 to [`Knobs::MAX_MARGIN_Z`].
    Margin(f64),
    /// A `--tracking-price` outside 0 to [`Knobs::MAX_PRICE`].
    Price(f64),
}

impl std::fmt::Display for KnobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (flag, max, unit, given) = match *self {
            Self::Margin(given) => (
                "--tracking-margin",
                Knobs::MAX_MARGIN_Z,
                "standard errors",
                given,
            ),
            Self::Price(given) => (
                "--tracking-price",
                Knobs::MAX_PRICE,
                "per ms of inference",
                given,
            ),
        };
        write!(f, "`{flag}` must be 0 to {max} {unit}; given {given}")
    }
}

impl std::error::Error for KnobError {}

impl Default for Knobs {
    /// Cocktail's: its margin, the shift check, no pacing.
    fn default() -> Self {
        Self {
            margin_z: TrackingConfig::cocktail().margin_z,
            shift_check: true,
            pace: false,
            price: None,
        }
    }
}

impl std::fmt::Display for Knobs {
    /// As the master's flags that set them (a price's without the margin and pacing,
    /// which play no part beside it).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.price {
            Some(price) => write!(f, "--tracking-price {price}")?,
            None => write!(f, "--tracking-margin {}", self.margin_z)?,
        }
        if !self.shift_check {
            f.write_str(" --no-shift-check")?;
        }
        if self.pace && self.price.is_none() {
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

    /// The most accurate on the window of the candidates and odd votes that meet the
    /// target on it with room for its sampling error and cost about as little as the
    /// cheapest that does (`cost_tier`); else the most accurate on it; the most accurate
    /// candidate by profile while the window holds fewer than `min_items`.
    fn choose(&self, models: &[Candidate], constraint: &Constraint) -> Choice {
        let pool = selection::candidates(models, constraint);
        let by_profile = selection::most_accurate(models, &pool);
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
                scored.push((members.clone(), c, accuracy));
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
        if let Some(price) = self.config.price {
            let n = self.items.len();
            let value = |cost: f64, accuracy: f64| {
                met_chance(accuracy, constraint.accuracy, n) - price * cost
            };
            // The most worth; of equal worth, the cheaper.
            if let Some((members, ..)) = scored.iter().max_by(|(_, c1, a1), (_, c2, a2)| {
                value(*c1, *a1)
                    .total_cmp(&value(*c2, *a2))
                    .then(c2.total_cmp(c1))
            }) {
                return Choice::One(members.clone());
            }
        }
        if let Some((members, accuracy)) = cheapest_meeting {
            let alone = cost(&members);
            if self.config.pace
                && let Some(mix) = Mix::cheapest(&scored, needed, alone)
            {
                return Choice::Mix(mix);
            }
            // The most accurate of the tier, ties to the cheaper, then to the cheapest
            // meeting the target (so a tier of 1 serves it, as plain re-selection does).
            let tier = alone * self.config.cost_tier.max(1.0);
            let mut chosen = (members, alone, accuracy);
            for (m, c, a) in scored {
                if c <= tier && a.total_cmp(&chosen.2).then(chosen.1.total_cmp(&c)).is_gt() {
                    chosen = (m, c, a);
                }
            }
            return Choice::One(chosen.0);
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

/// The chance that a window of answers from a choice `accuracy` accurate on `n` items
/// meets `target`: the normal approximation of the window's accuracy around it (its
/// standard error kept off zero, so that a choice right on every item of a small window
/// is not taken for certain).
fn met_chance(accuracy: f64, target: f64, n: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF as _, Normal};
    let se = standard_error(accuracy.clamp(0.02, 0.98), n);
    Normal::standard().cdf((accuracy - target) / se)
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
mod tests;
