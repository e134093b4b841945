//! The request mix both the load generator and the simulator send (Cocktail §5.2,
//! Fig. 6): five constraint types taken from single models' <latency, accuracy>, combined
//! into a Strict and a Relaxed mix.
//!
//! Each type is one model's own <latency, accuracy>, for five models spread along the
//! zoo's accuracy/latency frontier (a model is on it when no faster model is as accurate),
//! with the accuracy rounded down to a whole percent as a user would state it. The
//! latency is end to end: the model's profiled latency plus one hop ([`HOP_MS`]), so the
//! model fits only while its calls do not queue (the paper's InFaaS misses latency on a
//! third of Strict requests; Cocktail §5.2). (Exactly
//! the model's test accuracy would make "accuracy met" over a window of 200 a coin toss
//! for that model.)
//! InFaaS answers such a request with that model; Cocktail starts from it too (O1 prefers
//! a single model that meets the constraint) and O2 grows an ensemble from the faster
//! candidates when the window of labelled answers falls below the target and the recorded
//! answers say an addition helps.

pub mod drift;

use cocktail_policy::selection::{Candidate, Constraint, Objective};

/// One kind of request.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintType {
    /// `const1` .. `const5`, in increasing order of accuracy.
    pub name: String,
    pub constraint: Constraint,
    /// The single model whose accuracy the constraint asks for.
    pub model: usize,
}

/// The time a request takes beyond its models' inference when nothing queues: the hop
/// master ↔ worker, as the simulator models it (on this host's loopback a member call
/// adds about 0.3 ms, and the client's own hop about 0.2 ms more).
pub const HOP_MS: f64 = 0.5;

/// Up to five constraint types for a task's models (profiled latencies), each the
/// model's latency plus [`HOP_MS`], as the simulator models a call.
pub fn constraint_types(models: &[Candidate]) -> Vec<ConstraintType> {
    constraint_types_with_hop(models, HOP_MS)
}

/// Up to five constraint types for models whose `latency_ms` is what a request to them
/// takes beyond `hop_ms`: the profile with the simulator's hop, or the response times a
/// live master predicts with the load generator's own measured hop.
pub fn constraint_types_with_hop(models: &[Candidate], hop_ms: f64) -> Vec<ConstraintType> {
    let mut order: Vec<usize> = (0..models.len())
        .filter(|&i| models[i].latency_ms.is_finite())
        .collect();
    order.sort_by(|&a, &b| {
        models[a]
            .latency_ms
            .total_cmp(&models[b].latency_ms)
            .then(models[b].accuracy.total_cmp(&models[a].accuracy))
    });
    let mut frontier: Vec<usize> = Vec::new();
    for i in order {
        if frontier
            .last()
            .is_none_or(|&f| models[i].accuracy > models[f].accuracy)
        {
            frontier.push(i);
        }
    }
    // Five points spread along the frontier (all of it when it is shorter).
    let n = frontier.len();
    let picked: Vec<usize> = if n <= 5 {
        frontier
    } else {
        (0..5)
            .filter_map(|k| frontier.get((k * (n - 1) + 2) / 4).copied())
            .collect()
    };
    picked
        .into_iter()
        .enumerate()
        .map(|(k, model)| ConstraintType {
            name: format!("const{}", k + 1),
            constraint: Constraint {
                latency_ms: models[model].latency_ms + hop_ms,
                accuracy: (models[model].accuracy * 100.0).floor() / 100.0,
                objective: Objective::Accuracy,
            },
            model,
        })
        .collect()
}

/// How often each constraint type is sent (`--mix`: `strict`, `relaxed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// Mostly the high-accuracy types.
    Strict,
    /// Mostly the low-accuracy types.
    Relaxed,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Relaxed => "relaxed",
        }
    }

    /// Cumulative shares of `n` types (ordered by accuracy), for sampling with one
    /// uniform number.
    pub fn cumulative(self, n: usize) -> Vec<f64> {
        // Weights 1, 2, .. n towards the accurate end (Strict) or the other (Relaxed).
        let weights: Vec<f64> = (1..=n)
            .map(|k| match self {
                Self::Strict => k as f64,
                Self::Relaxed => (n + 1 - k) as f64,
            })
            .collect();
        let total: f64 = weights.iter().sum();
        weights
            .iter()
            .scan(0.0, |acc, w| {
                *acc += w / total;
                Some(*acc)
            })
            .collect()
    }
}

/// The type a uniform `u` in [0, 1) picks from `cumulative`.
pub fn pick(cumulative: &[f64], u: f64) -> usize {
    cumulative
        .partition_point(|&c| c <= u)
        .min(cumulative.len().saturating_sub(1))
}

/// The next request's constraint type and test item (of `items`), in the order both the
/// load generator and the simulator draw them.
pub fn draw(rng: &mut impl rand::Rng, cumulative: &[f64], items: usize) -> (usize, usize) {
    let kind = pick(cumulative, rng.random::<f64>());
    (kind, rng.random_range(0..items.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(latency_ms: f64, accuracy: f64) -> Candidate {
        Candidate {
            latency_ms,
            accuracy,
            packing_factor: 1,
        }
    }

    #[test]
    fn types_are_single_models_along_the_frontier() {
        let models = [
            model(0.01, 0.80),
            model(0.02, 0.78), // dominated
            model(0.03, 0.85),
            model(0.10, 0.90),
            model(0.20, 0.93),
        ];
        let types = constraint_types(&models);
        for t in &types {
            assert_eq!(t.constraint.latency_ms, models[t.model].latency_ms + HOP_MS);
        }
        let points: Vec<(f64, f64, usize)> = types
            .iter()
            .map(|t| (models[t.model].latency_ms, t.constraint.accuracy, t.model))
            .collect();
        assert_eq!(
            points,
            [
                (0.01, 0.80, 0),
                (0.03, 0.85, 2),
                (0.10, 0.90, 3),
                (0.20, 0.93, 4)
            ]
            .map(|(l, a, m)| (l, (a * 100.0_f64).floor() / 100.0, m))
        );
        assert_eq!(types[0].name, "const1");
        assert!(constraint_types(&[]).is_empty());
        let long: Vec<Candidate> = (0..9)
            .map(|i| model(i as f64, 0.5 + i as f64 / 100.0))
            .collect();
        let spread: Vec<usize> = constraint_types(&long).iter().map(|t| t.model).collect();
        assert_eq!(spread, [0, 2, 4, 6, 8]);
    }

    #[test]
    fn mixes_lean_towards_their_end() {
        let strict = Mix::Strict.cumulative(5);
        let relaxed = Mix::Relaxed.cumulative(5);
        assert!((strict[4] - 1.0).abs() < 1e-12);
        assert_eq!(pick(&strict, 0.99), 4);
        assert_eq!(pick(&relaxed, 0.01), 0);
        assert!(strict[0] < relaxed[0]);
        assert_eq!(pick(&[1.0], 0.5), 0);
    }
}
