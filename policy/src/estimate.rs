//! Majority-vote accuracy of an ensemble from its members' accuracies (Cocktail
//! Appendix A). The paper's binomial form assumes one accuracy `a` for every member:
//! `P = Σ_{i=⌊N/2⌋+1..N} C(N,i) aⁱ(1−a)^(N−i)`. With members of different accuracy the
//! number of correct votes is Poisson-binomial; its exact distribution is a small dynamic
//! programme over the members, O(N²).
//!
//! Both assume members err independently, and ours do not: the top three fashion models
//! are 98.0 % by that estimate and 92.1 % by their measured majority. [`Recorded`] counts
//! a subset's majority on the zoo's recorded test-set answers instead, so correlated
//! errors are counted; selection uses it wherever every member has recorded answers.

/// Probability that more than half of the members are correct, treating members as
/// independent with the given accuracies (each clamped to [0, 1]).
pub fn majority_accuracy(accuracies: &[f64]) -> f64 {
    let n = accuracies.len();
    if n == 0 {
        return 0.0;
    }
    // dist[k] = probability that exactly k of the members seen so far are correct.
    let mut dist = vec![0.0_f64; n + 1];
    dist[0] = 1.0;
    for (seen, &a) in accuracies.iter().enumerate() {
        let a = a.clamp(0.0, 1.0);
        for k in (0..=seen + 1).rev() {
            let stay_wrong = dist[k] * (1.0 - a);
            let become_right = if k > 0 { dist[k - 1] * a } else { 0.0 };
            dist[k] = stay_wrong + become_right;
        }
    }
    dist[n / 2 + 1..].iter().sum()
}

/// Every model's recorded answers on its task's test set (`models/predictions/`), in the
/// task's model order: `None` for a model without them. With [`Recorded::soft`], also
/// their probability vectors, and its estimates ([`Recorded::vote`]) count soft votes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    answers: Vec<Option<Vec<u16>>>,
    labels: Vec<u16>,
    soft: Option<Vectors>,
}

/// Each model's probability vectors on the recorded items, `classes` per item.
#[derive(Debug, Clone, PartialEq)]
struct Vectors {
    classes: usize,
    values: Vec<Option<Vec<f32>>>,
}

impl Vectors {
    fn pick(&self, items: &[usize]) -> Self {
        let c = self.classes;
        Self {
            classes: c,
            values: self
                .values
                .iter()
                .map(|v| {
                    v.as_ref().map(|v| {
                        items
                            .iter()
                            .flat_map(|&i| v[i * c..(i + 1) * c].iter().copied())
                            .collect()
                    })
                })
                .collect(),
        }
    }

    fn row(&self, model: usize, item: usize) -> Option<&[f32]> {
        self.values
            .get(model)?
            .as_deref()?
            .get(item * self.classes..(item + 1) * self.classes)
    }
}

impl Recorded {
    /// `answers[model]` must hold one class per label; a model whose answers do not is
    /// treated as unrecorded.
    pub fn new(answers: Vec<Option<Vec<u16>>>, labels: Vec<u16>) -> Self {
        let answers = answers
            .into_iter()
            .map(|a| a.filter(|a| a.len() == labels.len()))
            .collect();
        Self {
            answers,
            labels,
            soft: None,
        }
    }

    /// The same answers with each model's probability vectors (`values[model]`, `classes`
    /// per item, row-major; a model whose vectors do not cover every item is treated as
    /// without them): [`Recorded::vote`] then counts soft votes, as the master votes
    /// with its `average` scheme.
    pub fn soft(self, classes: usize, values: Vec<Option<Vec<f32>>>) -> Self {
        let items = self.labels.len();
        let values = values
            .into_iter()
            .map(|v| v.filter(|v| classes > 0 && v.len() == items * classes))
            .collect();
        Self {
            soft: Some(Vectors { classes, values }),
            ..self
        }
    }

    /// The rule [`Recorded::vote`] counts.
    pub fn rule(&self) -> Rule {
        if self.soft.is_some() {
            Rule::Soft
        } else {
            Rule::Majority
        }
    }

    /// The share of recorded items on which the vote of `members` is right, under
    /// [`Recorded::rule`]: [`Recorded::majority`], or the soft vote of their vectors
    /// ([`soft_vote`]). `None` without items, or when a member has no recorded answers
    /// (or vectors).
    pub fn vote(&self, members: &[usize], accuracy: &[f64]) -> Option<f64> {
        let Some(soft) = &self.soft else {
            return self.majority(members, accuracy);
        };
        if self.labels.is_empty() || members.is_empty() {
            return None;
        }
        let ballots: Vec<(&[u16], usize, f64)> = members
            .iter()
            .map(|&m| {
                soft.values.get(m)?.as_ref()?;
                let a = self.answers.get(m)?.as_deref()?;
                Some((a, m, accuracy.get(m).copied().unwrap_or(0.0)))
            })
            .collect::<Option<_>>()?;
        let mut sums = Vec::new();
        let right = (0..self.labels.len())
            .filter(|&item| {
                let votes = ballots
                    .iter()
                    .filter_map(|&(a, m, acc)| Some((soft.row(m, item)?, *a.get(item)?, acc)));
                soft_vote(votes, &mut sums) == Some(usize::from(self.labels[item]))
            })
            .count();
        Some(right as f64 / self.labels.len() as f64)
    }

    /// The answers selection estimates on: the items before [`scored_items`], so that the
    /// items the simulator and the load generator score requests on are never the ones
    /// selection learned from (live and simulated alike).
    pub fn for_estimates(&self) -> Self {
        self.slice(0..scored_items(self.labels.len()).0)
    }

    /// The same answers on the items `range` only.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Self {
        let range = range.start.min(self.labels.len())..range.end.min(self.labels.len());
        Self {
            answers: self
                .answers
                .iter()
                .map(|a| a.as_ref().map(|a| a[range.clone()].to_vec()))
                .collect(),
            soft: self
                .soft
                .as_ref()
                .map(|s| s.pick(&range.clone().collect::<Vec<_>>())),
            labels: self.labels[range].to_vec(),
        }
    }

    /// The same answers on the items `items` only, in that order (items past the end are
    /// left out).
    pub fn select(&self, items: &[usize]) -> Self {
        let items: Vec<usize> = items
            .iter()
            .copied()
            .filter(|&i| i < self.labels.len())
            .collect();
        Self {
            answers: self
                .answers
                .iter()
                .map(|a| a.as_ref().map(|a| items.iter().map(|&i| a[i]).collect()))
                .collect(),
            soft: self.soft.as_ref().map(|s| s.pick(&items)),
            labels: items.iter().map(|&i| self.labels[i]).collect(),
        }
    }

    /// The share of recorded items on which the majority vote of `members` is right:
    /// most votes wins, a tie goes to the class of the most accurate voter among the tied
    /// (`accuracy[model]`, as [`crate::voting::vote`] breaks ties with equal weights).
    /// `None` without items, or when a member has no recorded answers.
    pub fn majority(&self, members: &[usize], accuracy: &[f64]) -> Option<f64> {
        if self.labels.is_empty() || members.is_empty() {
            return None;
        }
        let answers: Vec<(&[u16], f64)> = members
            .iter()
            .map(|&m| {
                let a = self.answers.get(m)?.as_deref()?;
                Some((a, accuracy.get(m).copied().unwrap_or(0.0)))
            })
            .collect::<Option<_>>()?;
        let mut tally = Vec::with_capacity(members.len());
        let right = (0..self.labels.len())
            .filter(|&item| {
                let votes = answers.iter().map(|&(a, acc)| (a[item], acc));
                majority_vote(votes, &mut tally) == Some(self.labels[item])
            })
            .count();
        Some(right as f64 / self.labels.len() as f64)
    }
}

/// The most accurate vote (as [`Recorded::vote`] counts it: a plain majority, or soft) of two
/// to `max_size` models among `candidates`, with its accuracy; `None` when no such vote
/// is counted (fewer than two candidates, or none with recorded answers). Exhaustive:
/// callers bound `candidates` (C(9, 2..=5) = 372 subsets).
pub fn best_vote(
    recorded: &Recorded,
    candidates: &[usize],
    max_size: usize,
    accuracy: &[f64],
) -> Option<(Vec<usize>, f64)> {
    let mut best: Option<(Vec<usize>, f64)> = None;
    for size in 2..=max_size.min(candidates.len()) {
        for subset in combinations(candidates, size) {
            let Some(a) = recorded.vote(&subset, accuracy) else {
                continue;
            };
            if best.as_ref().is_none_or(|(_, b)| a > b + 1e-12) {
                best = Some((subset, a));
            }
        }
    }
    best
}

/// Every `k`-subset of `items`, in lexicographic order of positions.
pub fn combinations(items: &[usize], k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    (0..items.len())
        .flat_map(|i| {
            combinations(&items[i + 1..], k - 1)
                .into_iter()
                .map(move |mut rest| {
                    rest.insert(0, items[i]);
                    rest
                })
        })
        .collect()
}

/// The recorded test items requests are scored on, simulated and live: (the first, how
/// many), the second half of `total` (all items when there is only one). Selection
/// estimates on the first half ([`Recorded::for_estimates`]).
pub fn scored_items(total: usize) -> (usize, usize) {
    let first = total / 2;
    match total - first {
        0 => (0, 1),
        n => (first, n),
    }
}

/// The plain majority of `votes` (class, the voter's accuracy): most votes wins, a tie
/// goes to the class of the most accurate voter among the tied, then to the lowest class
/// (as [`crate::voting::vote`] votes with `Scheme::Majority`). `tally` is scratch space,
/// reused across calls; a handful of voters, so a linear scan beats a map.
pub fn majority_vote<C: Copy + Ord>(
    votes: impl IntoIterator<Item = (C, f64)>,
    tally: &mut Vec<(C, usize, f64)>,
) -> Option<C> {
    tally.clear();
    for (class, acc) in votes {
        match tally.iter_mut().find(|t| t.0 == class) {
            Some(t) => {
                t.1 += 1;
                t.2 = t.2.max(acc);
            }
            None => tally.push((class, 1, acc)),
        }
    }
    tally
        .iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.2.total_cmp(&b.2)).then(b.0.cmp(&a.0)))
        .map(|t| t.0)
}

/// How a vote combines its members' answers, as selection scores a choice with the rule
/// it is voted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rule {
    /// One vote per member ([`majority_vote`]).
    #[default]
    Majority,
    /// The highest mean probability ([`soft_vote`]; the master's `average` scheme).
    Soft,
}

/// The class with the highest mean probability over the members' ballots (each its
/// probability vector, all of one length, the class it answered and its accuracy), or
/// `None` without a ballot. An exact tie (vectors are recorded to 4 places) goes to the
/// class of the most accurate voter that answered one of the tied classes (the live
/// [`crate::voting::vote`] looks at the voters' class weights first), then to the lowest
/// class id: a vote of one is always the member's own answer. `sums` is scratch space, reused across calls.
pub fn soft_vote<'a>(
    ballots: impl IntoIterator<Item = (&'a [f32], u16, f64)>,
    sums: &mut Vec<(f64, f64)>,
) -> Option<usize> {
    sums.clear();
    for (row, class, accuracy) in ballots {
        if sums.is_empty() {
            sums.resize(row.len(), (0.0, f64::NEG_INFINITY));
        }
        for (s, &p) in sums.iter_mut().zip(row) {
            s.0 += f64::from(p);
        }
        if let Some(s) = sums.get_mut(usize::from(class)) {
            s.1 = s.1.max(accuracy);
        }
    }
    // The first class with the highest (sum, best voter).
    let mut best: Option<(usize, (f64, f64))> = None;
    for (class, &s) in sums.iter().enumerate() {
        if best.is_none_or(|(_, b)| s.0 > b.0 || (s.0 == b.0 && s.1 > b.1)) {
            best = Some((class, s));
        }
    }
    best.map(|(class, _)| class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{Binomial, DiscreteCDF};

    #[test]
    fn a_soft_vote_takes_the_highest_mean_probability_where_the_majority_takes_the_most_votes() {
        let ballots: [(&[f32], u16, f64); 3] = [
            (&[0.45, 0.55], 1, 0.9),
            (&[0.4, 0.6], 1, 0.9),
            (&[0.95, 0.05], 0, 0.9),
        ];
        let mut sums = Vec::new();
        assert_eq!(soft_vote(ballots, &mut sums), Some(0));
        let votes = ballots.map(|(_, class, accuracy)| (class, accuracy));
        assert_eq!(majority_vote(votes, &mut Vec::new()), Some(1));
        // A tie goes to the most accurate voter's class: one voter is its own answer.
        assert_eq!(
            soft_vote([(&[0.5_f32, 0.5][..], 1, 0.9)], &mut sums),
            Some(1)
        );
        let tied: [(&[f32], u16, f64); 2] = [(&[0.6, 0.4], 0, 0.8), (&[0.4, 0.6], 1, 0.9)];
        assert_eq!(soft_vote(tied, &mut sums), Some(1));
        assert_eq!(soft_vote(std::iter::empty(), &mut sums), None);
    }

    #[test]
    fn soft_recorded_answers_estimate_the_soft_vote_on_the_items_kept() {
        // Item 0: models 0 and 1 say class 1 unsure, model 2 class 0 sure (label 0);
        // item 1: all say class 1 (label 1).
        let answers = vec![Some(vec![1, 1]), Some(vec![1, 1]), Some(vec![0, 1])];
        let vectors = vec![
            Some(vec![0.45, 0.55, 0.1, 0.9]),
            Some(vec![0.4, 0.6, 0.2, 0.8]),
            Some(vec![0.95, 0.05, 0.3, 0.7]),
        ];
        let accuracy = [0.8, 0.8, 0.8];
        let plain = Recorded::new(answers, vec![0, 1]);
        assert_eq!(plain.rule(), Rule::Majority);
        assert_eq!(plain.vote(&[0, 1, 2], &accuracy), Some(0.5));
        let soft = plain.clone().soft(2, vectors);
        assert_eq!(soft.rule(), Rule::Soft);
        assert_eq!(soft.vote(&[0, 1, 2], &accuracy), Some(1.0));
        assert_eq!(soft.majority(&[0, 1, 2], &accuracy), Some(0.5));
        assert_eq!(soft.slice(0..1).vote(&[0, 1, 2], &accuracy), Some(1.0));
        assert_eq!(soft.select(&[1]).vote(&[0, 1], &accuracy), Some(1.0));
        assert_eq!(soft.select(&[0]).vote(&[0, 1], &accuracy), Some(0.0));
        // A model whose vectors do not cover the items counts as without them.
        let short = plain.soft(2, vec![Some(vec![0.5, 0.5]), None, None]);
        assert_eq!(short.vote(&[0], &accuracy), None);
    }

    #[test]
    fn select_keeps_the_items_asked_for_in_their_order() {
        let recorded = Recorded::new(vec![Some(vec![1, 2, 3]), None], vec![1, 0, 3]);
        let picked = recorded.select(&[2, 0, 9]);
        assert_eq!(picked.labels, [3, 1]);
        assert_eq!(picked.answers, [Some(vec![3, 1]), None]);
        assert_eq!(picked.majority(&[0], &[1.0, 1.0]), Some(1.0));
    }

    #[test]
    fn combinations_are_every_subset_once() {
        let all = combinations(&[4, 5, 6, 7], 2);
        assert_eq!(all.len(), 6);
        assert_eq!(all[0], [4, 5]);
        assert_eq!(all[5], [6, 7]);
        assert_eq!(combinations(&[1, 2, 3], 3), [vec![1, 2, 3]]);
    }

    #[test]
    fn equals_binomial_when_accuracies_are_equal() {
        for n in 1..=11_u64 {
            for a in [0.55, 0.7, 0.9] {
                let binomial = Binomial::new(a, n).unwrap();
                let expected = 1.0 - binomial.cdf(n / 2);
                let got = majority_accuracy(&vec![a; n as usize]);
                assert!(
                    (got - expected).abs() < 1e-12,
                    "n={n} a={a}: {got} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn small_cases_by_hand() {
        assert_eq!(majority_accuracy(&[]), 0.0);
        assert!((majority_accuracy(&[0.8]) - 0.8).abs() < 1e-12);
        // Two members: a majority needs both.
        assert!((majority_accuracy(&[0.8, 0.9]) - 0.72).abs() < 1e-12);
        // Three members: at least two right.
        let (a, b, c) = (0.9_f64, 0.8_f64, 0.7_f64);
        let expected = a * b * c + a * b * (1.0 - c) + a * (1.0 - b) * c + (1.0 - a) * b * c;
        assert!((majority_accuracy(&[a, b, c]) - expected).abs() < 1e-12);
    }

    #[test]
    fn the_estimate_counts_the_vote_the_master_casts() {
        use crate::voting::{Ballot, ClassWeights, Scheme, vote};
        // Every split of three voters over three classes, with equal and unequal
        // accuracies: the estimate's winner is the majority vote's.
        let weights = ClassWeights::seeded(&[vec![0.5; 3], vec![0.9; 3], vec![0.1; 3]], 10.0);
        let mut tally = Vec::new();
        for accuracy in [[0.8, 0.8, 0.8], [0.7, 0.9, 0.8], [0.9, 0.9, 0.6]] {
            for classes in (0..27).map(|k| [k % 3, k / 3 % 3, k / 9]) {
                let ballots: Vec<Ballot<'_>> = (0..3)
                    .map(|m| Ballot {
                        model: m,
                        class: classes[m],
                        probabilities: &[],
                    })
                    .collect();
                let cast = vote(Scheme::Majority, &ballots, &weights, &accuracy, 3).unwrap();
                let estimated =
                    majority_vote((0..3).map(|m| (classes[m], accuracy[m])), &mut tally);
                assert_eq!(Some(cast.class), estimated, "{classes:?} {accuracy:?}");
            }
        }
    }

    #[test]
    fn a_recorded_tie_goes_to_the_most_accurate_voter() {
        // Two items of class 0; model 1 (the more accurate) is right on the first only.
        let recorded = Recorded::new(vec![Some(vec![2, 0]), Some(vec![0, 2])], vec![0, 0]);
        assert_eq!(recorded.majority(&[0, 1], &[0.6, 0.9]), Some(0.5));
        assert_eq!(recorded.majority(&[0, 1], &[0.9, 0.6]), Some(0.5));
        assert_eq!(recorded.majority(&[1], &[0.6, 0.9]), Some(0.5));
        // Unrecorded, or answers of the wrong length: no estimate.
        let partial = Recorded::new(vec![Some(vec![0, 0]), None, Some(vec![0])], vec![0, 0]);
        assert_eq!(partial.majority(&[0], &[]), Some(1.0));
        assert_eq!(partial.majority(&[0, 1], &[]), None);
        assert_eq!(partial.majority(&[2], &[]), None);
        assert_eq!(partial.slice(1..5).majority(&[0], &[]), Some(1.0));
    }

    #[test]
    fn the_top_three_fashion_models_are_as_good_together_as_recorded_not_as_independent() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../models/predictions/fashion.tsv.gz");
        let p = cocktail_common::Predictions::load(&path).unwrap();
        let accuracy: Vec<f64> = p
            .classes
            .iter()
            .map(|c| {
                let right = c.iter().zip(&p.labels).filter(|(a, l)| a == l).count();
                right as f64 / p.labels.len() as f64
            })
            .collect();
        let mut order: Vec<usize> = (0..accuracy.len()).collect();
        order.sort_by(|a, b| accuracy[*b].total_cmp(&accuracy[*a]));
        let top: Vec<usize> = order[..3].to_vec();
        let names: Vec<&str> = top.iter().map(|&m| p.models[m].as_str()).collect();
        assert_eq!(names, ["resnet", "cnn_k5", "cnn_bag_a"]);
        let independent = majority_accuracy(&top.iter().map(|&m| accuracy[m]).collect::<Vec<_>>());
        let recorded = Recorded::new(p.classes.iter().cloned().map(Some).collect(), p.labels)
            .majority(&top, &accuracy)
            .unwrap();
        assert!((independent - 0.980).abs() < 0.0005, "{independent}");
        assert!((recorded - 0.9214).abs() < 0.00005, "{recorded}");
        // Below its best member (resnet, 0.9281): the reason O2 must check additions.
        assert!(recorded < accuracy[top[0]]);
    }
}
