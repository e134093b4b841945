//! The ensemble's answer as the client sees it: the voted classes, each member's part and
//! what went wrong on the way; and what the members returned, sorted for the vote.

use serde::Serialize;

use crate::config::Interval;
use crate::error::MemberFailure;
use crate::serving::dispatch::{MemberAnswer, MemberError};
use crate::serving::failover::Slot;
use crate::serving::tasks::TaskTable;
use cocktail_policy::voting::{ClassWeights, Voter};

/// One member's part in an answer.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Vote {
    pub model: String,
    /// Class per item.
    pub class: Vec<usize>,
    pub label: Vec<String>,
    /// The runtime weight `W[model][class]` its vote carried, per item.
    pub weight: Vec<f64>,
}

/// A candidate that voted in place of a member that could not answer in time.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Substitute {
    /// The ensemble member that gave no answer.
    pub member: String,
    /// The candidate that answered instead.
    pub model: String,
}

/// The ensemble's answer to one request.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Answer {
    pub id: String,
    pub task: String,
    pub class: Vec<usize>,
    pub label: Vec<String>,
    /// `[items][classes]`: the vote's score per class.
    pub scores: Vec<Vec<f64>>,
    /// The ensemble chosen for the constraint.
    pub models: Vec<String>,
    pub votes: Vec<Vote>,
    /// Every model asked that gave no answer, and why (members and substitutes).
    pub failed: Vec<MemberFailure>,
    /// Members that could not answer in time and the candidates that voted instead.
    pub substitutes: Vec<Substitute>,
    pub scheme: &'static str,
    pub cache_hit: bool,
    /// Fewer models voted than the ensemble has: some member gave no answer and no
    /// substitute could stand in.
    pub degraded: bool,
    #[schema(value_type = Object)]
    pub interval: Interval,
    /// The master's own time up to the vote: everything except waiting for the members.
    /// The handler adds encoding the answer and reports the total in `Server-Timing`.
    pub master_us: u64,
    /// Time spent waiting for the members (slowest member, queueing included).
    pub wait_us: u64,
    /// The vote was ready within `latency_ms` of the request's arrival.
    pub latency_met: bool,
}

/// What the members of one request returned: the answers that vote (a substitute's in
/// its member's place), every model that gave none and why, and the substitutions.
pub(crate) struct Returns<'a> {
    pub answered: Vec<(usize, &'a MemberAnswer)>,
    pub errors: Vec<&'a MemberError>,
    pub failed: Vec<MemberFailure>,
    pub substitutes: Vec<Substitute>,
}

impl<'a> Returns<'a> {
    pub fn of(task: &TaskTable, members: &[usize], slots: &'a [Slot]) -> Self {
        let mut returns = Self {
            answered: Vec::with_capacity(members.len()),
            errors: Vec::new(),
            failed: Vec::new(),
            substitutes: Vec::new(),
        };
        for (&member, slot) in members.iter().zip(slots) {
            for (model, e) in &slot.failures {
                metrics::counter!("cocktail_master_member_errors_total",
                    "model" => task.models[*model].clone(), "kind" => e.kind())
                .increment(1);
                returns.failed.push(MemberFailure {
                    model: task.models[*model].clone(),
                    error: e.to_string(),
                });
            }
            match &slot.answer {
                Ok((model, answer)) => {
                    if *model != member {
                        returns.substitutes.push(Substitute {
                            member: task.models[member].clone(),
                            model: task.models[*model].clone(),
                        });
                    }
                    returns.answered.push((*model, answer));
                }
                Err(e) => returns.errors.push(e),
            }
        }
        returns
    }
}

/// Each voter's part: its class, label and the weight its vote carried, per item.
pub(crate) fn votes(task: &TaskTable, voters: &[Voter<'_>], weights: &ClassWeights) -> Vec<Vote> {
    voters
        .iter()
        .map(|v| Vote {
            model: task.models[v.model].clone(),
            class: v.classes.to_vec(),
            label: v.classes.iter().map(|&c| task.labels[c].clone()).collect(),
            weight: v
                .classes
                .iter()
                .map(|&c| shown(weights.weight(v.model, c)))
                .collect(),
        })
        .collect()
}

/// A weight as the client is shown it, to six decimals (the vote itself counts it
/// unrounded). A weight is a ratio of sums of floats, so a manifest's 0.967 seeded as 100
/// observations reads back as 0.9670000000000001.
fn shown(weight: f64) -> f64 {
    (weight * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_weight_is_shown_as_the_manifest_wrote_it() {
        // resnet's accuracy on class 9 in the zoo's manifest, seeded as the master seeds it.
        let weights = ClassWeights::seeded(&[vec![0.967]], 100.0);
        assert_eq!(weights.weight(0, 0).to_string(), "0.9670000000000001");
        assert_eq!(shown(weights.weight(0, 0)).to_string(), "0.967");
        assert_eq!(shown(2.0 / 3.0), 0.666667);
    }
}
