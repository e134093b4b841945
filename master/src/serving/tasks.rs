//! What the master knows about each task from the zoo manifest: its labels, its models
//! as selection candidates, and the runtime per-class correctness table used for voting.

use parking_lot::RwLock;
use std::collections::BTreeMap;

use cocktail_common::predictions::probabilities_path;
use cocktail_common::zoo::TensorSpec;
use cocktail_common::{Predictions, Preprocess, Probabilities, Zoo};

use cocktail_policy::estimate::{Recorded, Rule};
use cocktail_policy::selection::Candidate;
use cocktail_policy::voting::ClassWeights;

/// The raw input a task takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Image,
    Text,
    /// The models' own input tensors (`kind = "tensor"`), as [`TaskTable::inputs`] lists.
    Tensor,
}

#[derive(Debug)]
pub struct TaskTable {
    pub name: String,
    pub kind: InputKind,
    /// How the task's models prepare their input (the first model's; the zoo's models of
    /// a task share it), stated in the task's metadata.
    pub preprocess: Preprocess,
    /// The first model's input tensors (what a tensor task's requests carry).
    pub inputs: Vec<TensorSpec>,
    pub labels: Vec<String>,
    /// Model names; every per-model vector below uses the same index.
    pub models: Vec<String>,
    pub candidates: Vec<Candidate>,
    pub accuracy: Vec<f64>,
    /// The models' recorded answers on the test set's estimation half, for selection's
    /// estimates; `None` when the zoo ships none (selection then assumes independent
    /// errors).
    pub recorded: Option<Recorded>,
    /// `W[model][class]`, seeded from the manifest and updated from labels.
    pub weights: RwLock<ClassWeights>,
}

impl TaskTable {
    pub fn model_index(&self, name: &str) -> Option<usize> {
        self.models.iter().position(|m| m == name)
    }

    /// A label given as a class index or a label name.
    pub fn class_of(&self, value: &serde_json::Value) -> Option<usize> {
        match value {
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(|c| c as usize)
                .filter(|&c| c < self.labels.len()),
            serde_json::Value::String(s) => self.labels.iter().position(|l| l == s),
            _ => None,
        }
    }
}

/// One table per task of the zoo; selection's estimates on the recorded answers count
/// votes by `rule` (the master's voting scheme's).
pub fn from_zoo(
    zoo: &Zoo,
    weight_prior: f64,
    latency_scale: f64,
    rule: Rule,
) -> BTreeMap<String, TaskTable> {
    let mut tables = BTreeMap::new();
    for (name, spec) in zoo.tasks() {
        let models: Vec<_> = zoo.models_for(name).collect();
        let Some(first) = models.first() else {
            continue;
        };
        let kind = match first.preprocess {
            Preprocess::Image(_) => InputKind::Image,
            Preprocess::Text { .. } => InputKind::Text,
            Preprocess::Tensor => InputKind::Tensor,
        };
        let candidates = models
            .iter()
            .map(|m| Candidate::of(m).scaled(latency_scale))
            .collect();
        let class_accuracy: Vec<Vec<f64>> =
            models.iter().map(|m| m.class_accuracy.clone()).collect();
        let recorded = match spec
            .predictions_file(name)
            .and_then(|file| Ok((file, Predictions::load(&zoo.resolve(file))?)))
        {
            Ok((file, p)) => {
                let items = p.len();
                let recorded = Recorded::new(
                    models
                        .iter()
                        .map(|m| {
                            p.model_index(&m.name)
                                .and_then(|i| p.classes.get(i).cloned())
                        })
                        .collect(),
                    p.labels,
                );
                let recorded = match rule {
                    Rule::Majority => recorded,
                    Rule::Soft => soft(zoo, name, file, &models, items, recorded),
                };
                Some(recorded.for_estimates())
            }
            Err(e) => {
                tracing::warn!(task = %name, error = %e, "no recorded predictions: selection assumes independent errors");
                None
            }
        };
        tables.insert(
            name.clone(),
            TaskTable {
                name: name.clone(),
                kind,
                preprocess: first.preprocess.clone(),
                inputs: first.inputs.clone(),
                labels: spec.labels.clone(),
                models: models.iter().map(|m| m.name.clone()).collect(),
                accuracy: models.iter().map(|m| m.accuracy).collect(),
                recorded,
                candidates,
                weights: RwLock::new(ClassWeights::seeded(&class_accuracy, weight_prior)),
            },
        );
    }
    tables
}

/// `recorded` with the task's probability vectors, so that selection estimates the soft
/// votes the master votes; without them (or unreadable) it stays a plain majority's
/// estimate, with a warning.
fn soft(
    zoo: &Zoo,
    task: &str,
    predictions: &str,
    models: &[&cocktail_common::ModelEntry],
    items: usize,
    recorded: Recorded,
) -> Recorded {
    let names: Vec<String> = models.iter().map(|m| m.name.clone()).collect();
    match Probabilities::load(
        &zoo.resolve(&probabilities_path(predictions)),
        &names,
        items,
    ) {
        Ok(p) => {
            let classes = p.classes;
            recorded.soft(classes, p.values.into_iter().map(Some).collect())
        }
        Err(e) => {
            tracing::warn!(task = %task, error = %e, "no probability vectors: selection estimates plain majorities while the master votes by average");
            recorded
        }
    }
}
