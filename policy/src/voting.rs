//! Combining ensemble members' answers (Cocktail §4.1.1, Algorithm 1 WEIGHTED_VOTING).
//!
//! - `Majority` (the default): one vote per member, a tie to the most accurate voter. It
//!   is the vote selection estimates ([`crate::estimate::majority_vote`], on the recorded
//!   answers and on the window), so the ensemble O1, O2 and measured selection choose is
//!   the one that is voted.
//! - `Weighted` (Cocktail's Algorithm 1): each member adds its runtime accuracy *on the
//!   class it predicted* to that class's score, so a class backed by models that are
//!   reliable on it can beat a class with more, less reliable votes. On the zoo it loses
//!   to `Majority`: on the second half of the recorded fashion answers, with weights from
//!   the first, mlp_med + dwsep vote 88.10 % weighted against 88.64 % (mlp_med alone)
//!   with `Majority`, and + cnn_small + lenet 88.30 % against 88.84 %. Precision weights
//!   and log-odds weights did no better.
//! - `Average` (Clipper): the mean of the members' probability vectors.
//!
//! Ties are broken deterministically. `Majority`: the most accurate voter, then the lowest
//! class id. `Weighted` and `Average`: higher score, then the larger total weight of the
//! class's voters, then the most accurate voter, then the lowest class id.

/// How to combine members' answers (`--scheme`: `weighted`, `majority`, `average`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Scheme {
    /// Per-class weighted majority (Cocktail's Algorithm 1).
    Weighted,
    /// One vote per member, a tie to the most accurate voter: the vote selection estimates.
    #[default]
    Majority,
    /// The highest mean probability (Clipper).
    Average,
}

impl Scheme {
    /// The rule selection estimates a vote of this scheme with: `Average` is a soft vote;
    /// `Weighted` is estimated as the plain majority its weights refine.
    pub fn rule(self) -> crate::estimate::Rule {
        match self {
            Self::Average => crate::estimate::Rule::Soft,
            Self::Weighted | Self::Majority => crate::estimate::Rule::Majority,
        }
    }
}

/// One member's answer.
#[derive(Debug, Clone, Copy)]
pub struct Ballot<'a> {
    /// Index of the model in the weight table.
    pub model: usize,
    pub class: usize,
    /// The member's probabilities over all classes (used by `Average`).
    pub probabilities: &'a [f32],
}

/// The result of a vote.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub class: usize,
    /// Score per class under the scheme used.
    pub scores: Vec<f64>,
    /// How many members voted for the winning class (O2 tracks its mode).
    pub winning_votes: usize,
}

/// Runtime per-class correctness of each model: `W[model][class]`, the share of items of
/// `class` the model got right. Seeded from the manifest's per-class accuracy as `prior`
/// pseudo-observations, then updated from real or pseudo labels.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassWeights {
    correct: Vec<Vec<f64>>,
    seen: Vec<Vec<f64>>,
}

impl ClassWeights {
    /// `class_accuracy[model][class]` from the manifest, weighted as `prior` observations.
    pub fn seeded(class_accuracy: &[Vec<f64>], prior: f64) -> Self {
        Self {
            correct: class_accuracy
                .iter()
                .map(|row| row.iter().map(|a| a * prior).collect())
                .collect(),
            seen: class_accuracy
                .iter()
                .map(|row| vec![prior; row.len()])
                .collect(),
        }
    }

    /// `W[model][class]`; 0 for unknown models or classes.
    pub fn weight(&self, model: usize, class: usize) -> f64 {
        let correct = self
            .correct
            .get(model)
            .and_then(|r| r.get(class))
            .copied()
            .unwrap_or(0.0);
        let seen = self
            .seen
            .get(model)
            .and_then(|r| r.get(class))
            .copied()
            .unwrap_or(0.0);
        if seen > 0.0 { correct / seen } else { 0.0 }
    }

    /// Records that `model` answered `predicted` on an item whose label is `label`.
    pub fn record(&mut self, model: usize, label: usize, predicted: usize) {
        if let (Some(seen), Some(correct)) = (
            self.seen.get_mut(model).and_then(|r| r.get_mut(label)),
            self.correct.get_mut(model).and_then(|r| r.get_mut(label)),
        ) {
            *seen += 1.0;
            if predicted == label {
                *correct += 1.0;
            }
        }
    }
}

/// Combines ballots into one answer. `accuracy[model]` is each model's overall accuracy
/// (the last tie-break). Returns `None` when there is no ballot.
pub fn vote(
    scheme: Scheme,
    ballots: &[Ballot<'_>],
    weights: &ClassWeights,
    accuracy: &[f64],
    classes: usize,
) -> Option<Outcome> {
    if ballots.is_empty() || classes == 0 {
        return None;
    }
    /// What a class's voters add up to beyond its score.
    #[derive(Clone, Copy)]
    struct Tally {
        votes: usize,
        weight: f64,
        /// The accuracy of its most accurate voter.
        best: f64,
    }
    let mut scores = vec![0.0_f64; classes];
    let mut tallies = vec![
        Tally {
            votes: 0,
            weight: 0.0,
            best: f64::NEG_INFINITY,
        };
        classes
    ];
    for b in ballots {
        let (Some(tally), Some(score)) = (tallies.get_mut(b.class), scores.get_mut(b.class)) else {
            continue;
        };
        tally.votes += 1;
        let w = weights.weight(b.model, b.class);
        tally.weight += w;
        tally.best = tally
            .best
            .max(accuracy.get(b.model).copied().unwrap_or(0.0));
        match scheme {
            Scheme::Weighted => *score += w,
            Scheme::Majority => *score += 1.0,
            Scheme::Average => {
                for (s, &p) in scores.iter_mut().zip(b.probabilities) {
                    *s += f64::from(p) / ballots.len() as f64;
                }
            }
        }
    }
    // Exact float ties are what tie-breaking is for; scores are sums of the same weights.
    // `Majority` breaks them as the estimate does, by the most accurate voter.
    let key = |(score, t): (f64, &Tally)| match scheme {
        Scheme::Majority => (score, t.best, 0.0),
        Scheme::Weighted | Scheme::Average => (score, t.weight, t.best),
    };
    let mut keys = scores.iter().copied().zip(&tallies).map(key).enumerate();
    let first = keys.next()?;
    let (class, _) = keys.fold(first, |best, (c, a)| {
        let b = best.1;
        let better = a.0 > b.0 || (a.0 == b.0 && (a.1 > b.1 || (a.1 == b.1 && a.2 > b.2)));
        if better { (c, a) } else { best }
    });
    Some(Outcome {
        class,
        winning_votes: tallies.get(class).map_or(0, |t| t.votes),
        scores,
    })
}

/// One voter's answers to a batch: its class per item and its probabilities, row-major
/// `[items, classes]` (empty when it gave none).
#[derive(Debug, Clone, Copy)]
pub struct Voter<'a> {
    /// Index of the model in the weight table.
    pub model: usize,
    pub classes: &'a [usize],
    pub probabilities: &'a [f32],
}

/// The vote on every item of a batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchOutcome {
    pub class: Vec<usize>,
    /// Per item, the members that voted for the winner, and the score per class.
    pub winning_votes: Vec<usize>,
    pub scores: Vec<Vec<f64>>,
}

/// Votes on each of `items` items, with every voter that answered the item: the live
/// master's batch and the simulator's request alike. `None` when an item has no voter.
pub fn vote_batch(
    scheme: Scheme,
    voters: &[Voter<'_>],
    items: usize,
    weights: &ClassWeights,
    accuracy: &[f64],
    classes: usize,
) -> Option<BatchOutcome> {
    let mut outcome = BatchOutcome {
        class: Vec::with_capacity(items),
        winning_votes: Vec::with_capacity(items),
        scores: Vec::with_capacity(items),
    };
    let mut ballots = Vec::with_capacity(voters.len());
    for item in 0..items {
        ballots.clear();
        ballots.extend(voters.iter().filter_map(|v| {
            Some(Ballot {
                model: v.model,
                class: *v.classes.get(item)?,
                probabilities: v
                    .probabilities
                    .get(item * classes..(item + 1) * classes)
                    .unwrap_or(&[]),
            })
        }));
        let one = vote(scheme, &ballots, weights, accuracy, classes)?;
        outcome.class.push(one.class);
        outcome.winning_votes.push(one.winning_votes);
        outcome.scores.push(one.scores);
    }
    Some(outcome)
}

/// The share of the *other* voters that must agree on a class before a voter learns it as
/// a pseudo-label.
pub const PSEUDO_AGREEMENT: f64 = 0.75;

/// What each voter may learn from one unlabelled item: the class most of the other voters
/// gave, when at least [`PSEUDO_AGREEMENT`] of them (and at least two) gave it; `None`
/// otherwise. `classes[v]` is voter `v`'s class. A voter's own vote never labels it: a
/// majority that includes the voter agrees with it more often than the truth does, and
/// would lower the weights of the best model exactly where it is right.
pub fn pseudo_labels(classes: &[usize]) -> Vec<Option<usize>> {
    let mut tally: Vec<(usize, usize)> = Vec::new();
    for &c in classes {
        match tally.iter_mut().find(|t| t.0 == c) {
            Some(t) => t.1 += 1,
            None => tally.push((c, 1)),
        }
    }
    let others = classes.len().saturating_sub(1);
    classes
        .iter()
        .map(|&own| {
            let (class, agree) = tally
                .iter()
                .map(|&(c, n)| (c, n - usize::from(c == own)))
                .max_by_key(|&(c, n)| (n, std::cmp::Reverse(c)))?;
            (others >= 2 && agree as f64 >= PSEUDO_AGREEMENT * others as f64).then_some(class)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &[f32] = &[];

    fn ballot(model: usize, class: usize) -> Ballot<'static> {
        Ballot {
            model,
            class,
            probabilities: P,
        }
    }

    #[test]
    fn weighted_lets_reliable_minority_win() {
        // Models 0 and 1 are poor on class 1; model 2 is excellent on class 2.
        let weights = ClassWeights::seeded(
            &[
                vec![0.9, 0.3, 0.5],
                vec![0.9, 0.3, 0.5],
                vec![0.5, 0.5, 0.95],
            ],
            100.0,
        );
        let ballots = [ballot(0, 1), ballot(1, 1), ballot(2, 2)];
        let accuracy = [0.8, 0.8, 0.8];
        let weighted = vote(Scheme::Weighted, &ballots, &weights, &accuracy, 3).unwrap();
        assert_eq!(weighted.class, 2, "0.95 beats 0.3 + 0.3");
        assert_eq!(weighted.winning_votes, 1);
        let majority = vote(Scheme::Majority, &ballots, &weights, &accuracy, 3).unwrap();
        assert_eq!((majority.class, majority.winning_votes), (1, 2));
    }

    #[test]
    fn ties_break_by_accuracy_then_class_id() {
        let weights = ClassWeights::seeded(&[vec![0.6, 0.6], vec![0.6, 0.6]], 10.0);
        // Majority tie 1-1, equal weights: the more accurate voter's class wins.
        let ballots = [ballot(0, 0), ballot(1, 1)];
        assert_eq!(
            vote(Scheme::Majority, &ballots, &weights, &[0.7, 0.9], 2)
                .unwrap()
                .class,
            1
        );
        // Everything equal: the lowest class id.
        assert_eq!(
            vote(Scheme::Majority, &ballots, &weights, &[0.8, 0.8], 2)
                .unwrap()
                .class,
            0
        );
        // Majority ignores the weights, as the estimate does: the more accurate voter.
        let uneven = ClassWeights::seeded(&[vec![0.5, 0.5], vec![0.9, 0.9]], 10.0);
        assert_eq!(
            vote(Scheme::Majority, &ballots, &uneven, &[0.9, 0.1], 2)
                .unwrap()
                .class,
            0
        );
        // A weighted tie (0.45 + 0.45 against 0.9) also goes to the more accurate voter.
        let tied = [ballot(0, 0), ballot(0, 0), ballot(1, 1)];
        let even = ClassWeights::seeded(&[vec![0.45, 0.45], vec![0.9, 0.9]], 10.0);
        assert_eq!(
            vote(Scheme::Weighted, &tied, &even, &[0.9, 0.1], 2)
                .unwrap()
                .class,
            0
        );
    }

    #[test]
    fn average_is_clipper_style() {
        let weights = ClassWeights::seeded(&[vec![0.5, 0.5], vec![0.5, 0.5]], 1.0);
        let (a, b) = ([0.9_f32, 0.1], [0.4_f32, 0.6]);
        let ballots = [
            Ballot {
                model: 0,
                class: 0,
                probabilities: &a,
            },
            Ballot {
                model: 1,
                class: 1,
                probabilities: &b,
            },
        ];
        let outcome = vote(Scheme::Average, &ballots, &weights, &[0.5, 0.5], 2).unwrap();
        assert_eq!(outcome.class, 0);
        assert!((outcome.scores[0] - 0.65).abs() < 1e-6);
    }

    #[test]
    fn weights_learn_from_labels() {
        let mut weights = ClassWeights::seeded(&[vec![0.5, 0.5]], 2.0);
        assert_eq!(weights.weight(0, 1), 0.5);
        for _ in 0..8 {
            weights.record(0, 1, 1);
        }
        assert!(
            (weights.weight(0, 1) - 0.9).abs() < 1e-12,
            "(1 + 8) / (2 + 8)"
        );
        weights.record(0, 0, 1);
        assert!((weights.weight(0, 0) - 1.0 / 3.0).abs() < 1e-12);
        // Unknown models and classes are ignored, not a panic.
        weights.record(5, 0, 0);
        assert_eq!(weights.weight(5, 0), 0.0);
        assert!(vote(Scheme::Weighted, &[], &weights, &[], 2).is_none());
    }

    #[test]
    fn a_batch_vote_is_the_vote_of_each_item() {
        let weights =
            ClassWeights::seeded(&[vec![0.9, 0.3], vec![0.4, 0.8], vec![0.6, 0.6]], 100.0);
        let accuracy = [0.8, 0.7, 0.6];
        let (a, b, c) = ([0, 1, 1], [1, 1, 0], [0, 0]);
        let voters = [
            Voter {
                model: 0,
                classes: &a,
                probabilities: P,
            },
            Voter {
                model: 1,
                classes: &b,
                probabilities: P,
            },
            // Model 2 answered only the first two items.
            Voter {
                model: 2,
                classes: &c,
                probabilities: P,
            },
        ];
        let batch = vote_batch(Scheme::Weighted, &voters, 3, &weights, &accuracy, 2).unwrap();
        for item in 0..3 {
            let ballots: Vec<Ballot<'_>> = voters
                .iter()
                .filter_map(|v| Some(ballot(v.model, *v.classes.get(item)?)))
                .collect();
            let one = vote(Scheme::Weighted, &ballots, &weights, &accuracy, 2).unwrap();
            assert_eq!(batch.class[item], one.class);
            assert_eq!(batch.winning_votes[item], one.winning_votes);
            assert_eq!(batch.scores[item], one.scores);
        }
        assert!(vote_batch(Scheme::Weighted, &[], 1, &weights, &accuracy, 2).is_none());
    }

    #[test]
    fn a_voter_learns_only_what_enough_of_the_others_agree_on() {
        // Four of five say 3: the four learn 3 from the other three agreeing (3 of 4),
        // and so does the dissenter (all four others).
        assert_eq!(pseudo_labels(&[3, 3, 3, 3, 1]), vec![Some(3); 5]);
        // Three of five: each of the three sees only two of four others agree (0.5).
        assert_eq!(
            pseudo_labels(&[3, 3, 3, 1, 2]),
            vec![None; 3]
                .into_iter()
                .chain([Some(3), Some(3)])
                .collect::<Vec<_>>()
        );
        // Two voters: one other is not enough evidence.
        assert_eq!(pseudo_labels(&[3, 3]), vec![None, None]);
        assert!(pseudo_labels(&[]).is_empty());
    }
}
