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
/// task's model order: `None` for a model without them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    answers: Vec<Option<Vec<u16>>>,
    labels: Vec<u16>,
}

impl Recorded {
    /// `answers[model]` must hold one class per label; a model whose answers do not is
    /// treated as unrecorded.
    pub fn new(answers: Vec<Option<Vec<u16>>>, labels: Vec<u16>) -> Self {
        let answers = answers
            .into_iter()
            .map(|a| a.filter(|a| a.len() == labels.len()))
            .collect();
        Self { answers, labels }
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

/// The most accurate plain-majority vote (as [`Recorded::majority`] counts it) of two
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
            let Some(a) = recorded.majority(&subset, accuracy) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{Binomial, DiscreteCDF};

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
