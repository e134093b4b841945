//! Drift schedules (issue 34): traffic whose inputs change over time, defined once here
//! and used by `cocktail sim --drift` and the results page.
//!
//! A schedule is a sequence of phases; each phase says how often each *group* of test
//! items is drawn: a domain of the sentiment test set (its `source` column), a class, or a
//! version of the items (clean, or a corrupted copy of them). Requests are drawn, as for
//! the stationary mixes, from the second half of the test set (the half selection never
//! estimates on) or its copies, restricted to the phase's groups. Between
//! two phases the first [`Schedule::blend_requests`] requests of the new phase move
//! linearly from the old phase's shares to the new one's, so a shift is quick but not a
//! step. The whole sequence runs [`Schedule::rounds`] times.
//!
//! The schedules were fixed here before any result was looked at (issue 34 asks for
//! that), from the issue's own description: movie → NYT → tweets → Amazon, 3,000
//! requests per phase, twice round.

use rand::Rng;

/// What a schedule's groups are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The test item's `source` column (the sentiment test set's domains).
    Source,
    /// The test item's true class, by class name.
    Class,
    /// The test item's version: `clean` (the test set itself) or a shifted copy of its
    /// scored half, such as a corruption, whose every model's recorded answers are in
    /// `<folder>/<group>.tsv.gz` (the folder relative to the zoo's manifest).
    Shifted(&'static str),
}

/// The group of a [`GroupBy::Shifted`] schedule's unshifted items: the test set itself.
pub const CLEAN: &str = "clean";

/// One phase: each group's share of the requests (shares need not sum to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: &'static str,
    pub shares: &'static [(&'static str, f64)],
}

/// A named drift schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub name: &'static str,
    /// The task whose test set it draws from.
    pub task: &'static str,
    pub group_by: GroupBy,
    pub phases: &'static [Phase],
    /// Requests per phase, blend included.
    pub phase_requests: usize,
    /// The first requests of every phase but the very first that still draw partly from
    /// the previous phase (linearly less).
    pub blend_requests: usize,
    /// Times the sequence of phases runs.
    pub rounds: usize,
    /// Requests per second: sets the time a label's delay stands for.
    pub rate: f64,
    /// The accuracy target of its one constraint (any model's latency).
    pub target: f64,
}

/// Movie snippets, NYT editorials, tweets, Amazon reviews, one after the other: the
/// sentiment zoo's models rank differently on each (issue 34). 3,000 requests in 15
/// minutes per phase, 2-minute blends (400 requests), twice round: 24,000 requests in
/// two hours.
pub const SENTIMENT_DOMAINS: Schedule = Schedule {
    name: "sentiment-domains",
    task: "sentiment",
    group_by: GroupBy::Source,
    phases: &[
        Phase {
            name: "movie",
            shares: &[("movie", 1.0)],
        },
        Phase {
            name: "nyt",
            shares: &[("nyt", 1.0)],
        },
        Phase {
            name: "tweets",
            shares: &[("tweets", 1.0)],
        },
        Phase {
            name: "amazon",
            shares: &[("amazon", 1.0)],
        },
    ],
    phase_requests: 3000,
    blend_requests: 400,
    rounds: 2,
    rate: 3000.0 / 900.0,
    // Issue 34's replay: `gru` (0.802) is a static pick for it.
    target: 0.80,
};

/// `sentiment-domains` as a day goes: the four domains are always all there, in shares
/// that follow the time of day (tweets at night, the news in the morning, reviews in the
/// afternoon, films in the evening), each time of day turning into the next over its
/// whole length rather than in a 2-minute blend. 3,000 requests per time of day, two
/// days: the same 24,000 requests and rate as `sentiment-domains`, so that the two
/// compare. Fixed here, like the others, before any result was looked at.
pub const SENTIMENT_DAY: Schedule = Schedule {
    name: "sentiment-day",
    task: "sentiment",
    group_by: GroupBy::Source,
    phases: &[
        Phase {
            name: "night",
            shares: &[
                ("tweets", 0.6),
                ("movie", 0.2),
                ("amazon", 0.1),
                ("nyt", 0.1),
            ],
        },
        Phase {
            name: "morning",
            shares: &[
                ("nyt", 0.6),
                ("tweets", 0.2),
                ("amazon", 0.1),
                ("movie", 0.1),
            ],
        },
        Phase {
            name: "afternoon",
            shares: &[
                ("amazon", 0.6),
                ("nyt", 0.2),
                ("tweets", 0.1),
                ("movie", 0.1),
            ],
        },
        Phase {
            name: "evening",
            shares: &[
                ("movie", 0.6),
                ("tweets", 0.2),
                ("amazon", 0.1),
                ("nyt", 0.1),
            ],
        },
    ],
    phase_requests: 3000,
    // The whole phase: the shares move from one time of day to the next all along.
    blend_requests: 3000,
    rounds: 2,
    rate: 3000.0 / 900.0,
    target: 0.80,
};

/// Fashion-MNIST traffic in which a few classes dominate each phase (80 % of requests
/// from three classes, the rest spread over all ten): the upper-body garments the models
/// confuse, then footwear and bags they rarely miss, then mixed; twice round. The case
/// per-class weights were made for.
pub const CLASS_SKEW: Schedule = Schedule {
    name: "class-skew",
    task: "fashion",
    group_by: GroupBy::Class,
    phases: &[
        Phase {
            name: "tops",
            shares: &[
                ("T-shirt/top", 0.8 / 3.0 + 0.02),
                ("Pullover", 0.8 / 3.0 + 0.02),
                ("Shirt", 0.8 / 3.0 + 0.02),
                ("Trouser", 0.02),
                ("Dress", 0.02),
                ("Coat", 0.02),
                ("Sandal", 0.02),
                ("Sneaker", 0.02),
                ("Bag", 0.02),
                ("Ankle boot", 0.02),
            ],
        },
        Phase {
            name: "shoes and bags",
            shares: &[
                ("Sandal", 0.8 / 3.0 + 0.02),
                ("Sneaker", 0.8 / 3.0 + 0.02),
                ("Bag", 0.8 / 3.0 + 0.02),
                ("T-shirt/top", 0.02),
                ("Trouser", 0.02),
                ("Pullover", 0.02),
                ("Dress", 0.02),
                ("Coat", 0.02),
                ("Shirt", 0.02),
                ("Ankle boot", 0.02),
            ],
        },
        Phase {
            name: "coats and dresses",
            shares: &[
                ("Coat", 0.8 / 3.0 + 0.02),
                ("Dress", 0.8 / 3.0 + 0.02),
                ("Shirt", 0.8 / 3.0 + 0.02),
                ("T-shirt/top", 0.02),
                ("Trouser", 0.02),
                ("Pullover", 0.02),
                ("Sandal", 0.02),
                ("Sneaker", 0.02),
                ("Bag", 0.02),
                ("Ankle boot", 0.02),
            ],
        },
    ],
    phase_requests: 3000,
    blend_requests: 400,
    rounds: 2,
    rate: 3000.0 / 900.0,
    // Every fashion model but two meets 0.80 on the whole set; 0.90 is met by the
    // middle of the zoo's frontier (cnn_shift 0.902 up to resnet 0.928), not by the cheap
    // end, so the choice matters.
    target: 0.90,
};

/// Clean Fashion-MNIST, then MNIST-C corruptions at rising severity (noise 1, blur 2,
/// brightness 3, rotation 4, then inversion, which changes every pixel), then clean again:
/// a camera that degrades and is replaced. The corrupted copies of the scored half are
/// made by `models/train/corrupt.py` (MNIST-C's parameters, seeded) into
/// `models/data/fashion-c/`; `models/build-zoo.sh` records every model's answers on them
/// into `models/predictions/fashion-c/`. One round, 3,000 requests per phase, 2-minute
/// blends.
pub const FASHION_CORRUPTIONS: Schedule = Schedule {
    name: "fashion-corruptions",
    task: "fashion",
    group_by: GroupBy::Shifted("predictions/fashion-c"),
    phases: &[
        Phase {
            name: "clean",
            shares: &[(CLEAN, 1.0)],
        },
        Phase {
            name: "shot noise 1",
            shares: &[("shot_noise-1", 1.0)],
        },
        Phase {
            name: "motion blur 2",
            shares: &[("motion_blur-2", 1.0)],
        },
        Phase {
            name: "brightness 3",
            shares: &[("brightness-3", 1.0)],
        },
        Phase {
            name: "rotate 4",
            shares: &[("rotate-4", 1.0)],
        },
        Phase {
            name: "inverse",
            shares: &[("inverse", 1.0)],
        },
        Phase {
            name: "clean again",
            shares: &[(CLEAN, 1.0)],
        },
    ],
    phase_requests: 3000,
    blend_requests: 400,
    rounds: 1,
    rate: 3000.0 / 900.0,
    // On the clean set 0.85 is met by the middle of the zoo (dwsep 0.876 and up), not by
    // its cheapest models (linear 0.839, lenet 0.847), so the choice matters from the start.
    target: 0.85,
};

/// Every named schedule.
pub const ALL: [&Schedule; 4] = [
    &SENTIMENT_DOMAINS,
    &SENTIMENT_DAY,
    &CLASS_SKEW,
    &FASHION_CORRUPTIONS,
];

/// The schedule named `name`.
pub fn named(name: &str) -> Option<&'static Schedule> {
    ALL.into_iter().find(|s| s.name == name)
}

/// A schedule that cannot be drawn from this test set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DriftError {
    #[error("schedule `{schedule}`: no scored test item of group `{group}`")]
    EmptyGroup {
        schedule: &'static str,
        group: &'static str,
    },
}

impl Schedule {
    /// The groups its phases draw from, each once, in order of first use.
    pub fn groups(&self) -> Vec<&'static str> {
        let mut groups: Vec<&'static str> = Vec::new();
        for &(group, _) in self.phases.iter().flat_map(|p| p.shares) {
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        groups
    }

    /// Whether the schedule can also be drawn from the held-out first half of the test
    /// set (to tune on): not a [`GroupBy::Shifted`] one, whose shifted copies are of the
    /// scored half only.
    pub fn has_held_out(&self) -> bool {
        !matches!(self.group_by, GroupBy::Shifted(_))
    }

    /// Requests in the whole schedule.
    pub fn requests(&self) -> usize {
        self.phase_requests * self.phases.len() * self.rounds
    }

    /// The phase (index into `phases`) request `k` belongs to.
    pub fn phase_of(&self, k: usize) -> usize {
        (k / self.phase_requests.max(1)) % self.phases.len().max(1)
    }

    /// The weight of each phase in request `k`'s draw: `(current, previous, share of
    /// previous)`. The share of the previous phase falls linearly to 0 over the blend.
    fn blend(&self, k: usize) -> (usize, Option<(usize, f64)>) {
        let phase = self.phase_of(k);
        let into = k % self.phase_requests.max(1);
        if k < self.phase_requests || into >= self.blend_requests {
            return (phase, None);
        }
        let previous = (phase + self.phases.len() - 1) % self.phases.len();
        let old = 1.0 - (into as f64 + 0.5) / self.blend_requests as f64;
        (phase, Some((previous, old)))
    }
}

/// A schedule bound to one test set: per phase, the items of each of its groups.
#[derive(Debug, Clone)]
pub struct Drift {
    pub schedule: &'static Schedule,
    /// `pools[phase]`: (cumulative share, the scored items of that group).
    pools: Vec<Vec<(f64, Vec<usize>)>>,
}

impl Drift {
    /// Binds `schedule` to a test set whose scored items are `scored` (indices) and
    /// whose item `i` is in group `group_of(i)`.
    pub fn new(
        schedule: &'static Schedule,
        scored: std::ops::Range<usize>,
        group_of: impl Fn(usize) -> Option<String>,
    ) -> Result<Self, DriftError> {
        let groups: Vec<Option<String>> = scored.clone().map(&group_of).collect();
        let mut pools = Vec::with_capacity(schedule.phases.len());
        for phase in schedule.phases {
            let total: f64 = phase.shares.iter().map(|(_, s)| s).sum();
            let mut cumulative = 0.0;
            let mut pool = Vec::with_capacity(phase.shares.len());
            for &(group, share) in phase.shares {
                let items: Vec<usize> = scored
                    .clone()
                    .zip(&groups)
                    .filter(|(_, g)| g.as_deref() == Some(group))
                    .map(|(i, _)| i)
                    .collect();
                if items.is_empty() {
                    return Err(DriftError::EmptyGroup {
                        schedule: schedule.name,
                        group,
                    });
                }
                cumulative += share / total;
                pool.push((cumulative, items));
            }
            pools.push(pool);
        }
        Ok(Self { schedule, pools })
    }

    /// Request `k`'s test item.
    pub fn draw(&self, rng: &mut impl Rng, k: usize) -> usize {
        let (phase, blend) = self.schedule.blend(k);
        let phase = match blend {
            Some((previous, old)) if rng.random::<f64>() < old => previous,
            _ => phase,
        };
        let Some(pool) = self.pools.get(phase) else {
            return 0;
        };
        let u = rng.random::<f64>();
        let group = pool
            .iter()
            .position(|(c, _)| u < *c)
            .unwrap_or(pool.len().saturating_sub(1));
        pool.get(group)
            .and_then(|(_, items)| items.get(rng.random_range(0..items.len().max(1))))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    /// The sentiment test set's domains; item `i` is of `DOMAINS[i % 4]`.
    const DOMAINS: [&str; 4] = ["movie", "nyt", "tweets", "amazon"];

    /// `s` on 16 items that alternate between the four domains; the scored half is 8..16.
    fn by_domain(s: &'static Schedule) -> Drift {
        Drift::new(s, 8..16, |i| Some(DOMAINS[i % 4].to_owned())).unwrap()
    }

    #[test]
    fn sentiment_domains_visits_the_domains_in_order_twice() {
        let s = &SENTIMENT_DOMAINS;
        let drift = by_domain(s);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut visited: Vec<&str> = Vec::new();
        let mut blended = 0;
        for k in 0..s.requests() {
            let item = drift.draw(&mut rng, k);
            assert!((8..16).contains(&item), "scored half only: {item}");
            let domain = DOMAINS[item % 4];
            let into = k % s.phase_requests;
            if k >= s.phase_requests && into < s.blend_requests {
                blended += usize::from(domain != s.phases[s.phase_of(k)].name);
                continue;
            }
            assert_eq!(domain, s.phases[s.phase_of(k)].name, "request {k}");
            if visited.last() != Some(&domain) {
                visited.push(domain);
            }
        }
        assert_eq!(visited, [DOMAINS, DOMAINS].concat());
        // Half of a blend, on average, still comes from the previous domain.
        let blends = s.phases.len() * s.rounds - 1;
        let share = blended as f64 / (blends * s.blend_requests) as f64;
        assert!((0.4..0.6).contains(&share), "{share}");
        assert_eq!(s.requests(), 24_000);
    }

    #[test]
    fn sentiment_day_moves_its_shares_smoothly_from_one_time_of_day_to_the_next() {
        let s = &SENTIMENT_DAY;
        let drift = by_domain(s);
        let mut rng = SmallRng::seed_from_u64(5);
        // The share of NYT editorials in each tenth of the morning of the second day: it
        // climbs from the night's 0.1 to the morning's 0.6.
        let tenth = s.phase_requests / 10;
        let morning = s.phases.len() * s.phase_requests + s.phase_requests;
        let nyt: Vec<f64> = (0..10)
            .map(|t| {
                let from = morning + t * tenth;
                let hits = (from..from + tenth)
                    .filter(|&k| DOMAINS[drift.draw(&mut rng, k) % 4] == "nyt")
                    .count();
                hits as f64 / tenth as f64
            })
            .collect();
        assert!((0.05..0.2).contains(&nyt[0]), "{nyt:?}");
        assert!((0.5..0.7).contains(&nyt[9]), "{nyt:?}");
        // No step: neighbouring tenths differ by about a tenth of the climb.
        for pair in nyt.windows(2) {
            assert!((pair[1] - pair[0]).abs() < 0.15, "{nyt:?}");
        }
        // Every domain is drawn at every time of day.
        for phase in 0..s.phases.len() {
            let from = s.phase_requests * phase;
            let seen: std::collections::BTreeSet<&str> = (from..from + s.phase_requests)
                .map(|k| DOMAINS[drift.draw(&mut rng, k) % 4])
                .collect();
            assert_eq!(seen.len(), 4, "{}", s.phases[phase].name);
        }
        assert_eq!(s.requests(), SENTIMENT_DOMAINS.requests());
    }

    #[test]
    fn fashion_corruptions_goes_from_clean_through_every_corruption_back_to_clean() {
        let s = &FASHION_CORRUPTIONS;
        // Issue 34: at least one noise, one blur, brightness or contrast, one geometric
        // corruption and an inversion or flip, at rising severity, between clean phases.
        let groups = s.groups();
        assert_eq!(
            groups,
            [
                "clean",
                "shot_noise-1",
                "motion_blur-2",
                "brightness-3",
                "rotate-4",
                "inverse"
            ]
        );
        let severities: Vec<u32> = groups
            .iter()
            .filter_map(|g| g.rsplit_once('-')?.1.parse().ok())
            .collect();
        assert!(severities.is_sorted(), "{severities:?}");
        assert_eq!(
            s.phases.first().map(|p| p.shares),
            Some(&[("clean", 1.0)][..])
        );
        assert_eq!(
            s.phases.last().map(|p| p.shares),
            Some(&[("clean", 1.0)][..])
        );
        // Items 8..16 are clean, 16..24 a copy per corruption: each phase draws its own.
        let group = |i: usize| groups[(i / 8).saturating_sub(1) % groups.len()];
        let drift = Drift::new(s, 8..56, |i| Some(group(i).to_owned())).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        for k in 0..s.requests() {
            if k % s.phase_requests < s.blend_requests && k >= s.phase_requests {
                continue;
            }
            let phase = &s.phases[s.phase_of(k)];
            assert_eq!(
                group(drift.draw(&mut rng, k)),
                phase.shares[0].0,
                "request {k}"
            );
        }
        assert_eq!(s.requests(), 21_000);
    }

    #[test]
    fn a_group_without_items_is_an_error_and_every_schedule_is_named() {
        let error = Drift::new(&SENTIMENT_DOMAINS, 0..4, |_| Some("movie".to_owned()));
        assert_eq!(
            error.unwrap_err(),
            DriftError::EmptyGroup {
                schedule: "sentiment-domains",
                group: "nyt"
            }
        );
        for s in ALL {
            assert_eq!(named(s.name), Some(s));
        }
        assert_eq!(named("nope"), None);
    }
}
