//! One task's models, their recorded answers and the catalog: everything a run reads.

use anyhow::Context;
use cocktail_common::catalog::{self, Catalog};
use cocktail_common::latency::BatchLatency;
use cocktail_common::predictions::probabilities_path;
use cocktail_common::{Predictions, Probabilities, Zoo};
use cocktail_master::config::MasterConfig;
use cocktail_policy::estimate::{self, Recorded, soft_vote};
use cocktail_policy::measured::Labelled;
use cocktail_policy::selection::Candidate;

use crate::workload::{self, ConstraintType};

/// One task's models, their recorded answers and the catalog.
#[derive(Debug, Clone)]
pub struct World {
    pub task: String,
    pub models: Vec<String>,
    pub candidates: Vec<Candidate>,
    pub accuracy: Vec<f64>,
    pub classes: usize,
    /// `answers[model][item]`: the class each model gave each test item.
    pub answers: Vec<Vec<u16>>,
    pub labels: Vec<u16>,
    /// `probabilities[model]`: each model's probability vector on each test item,
    /// `classes` per item, for soft votes; `None` when the zoo has no vectors recorded.
    pub probabilities: Option<Vec<Vec<f32>>>,
    /// The recorded answers on the test items selection estimates on; requests are drawn
    /// from the others ([`estimate::scored_items`]), so selection's estimates never come
    /// from the items it is scored on (the voting weights still learn from each scored
    /// request's label, as they do live from feedback).
    pub recorded: Recorded,
    pub types: Vec<ConstraintType>,
    pub catalog: Catalog,
    /// `packing[model][type]`: the calls an instance of each catalog type takes at once
    /// for the model (its Pf, the hop counted for models whose calls join).
    pub packing: Vec<Vec<u32>>,
    /// `profile_packing[model][type]`: the packing factor by the model's profile alone.
    pub profile_packing: Vec<Vec<u32>>,
    /// Each model's batch latency fitted from its profile (scaled with the world).
    pub fitted: Vec<Option<BatchLatency>>,
    /// Test items appended after the test set's own by [`World::append`].
    pub shifted: usize,
    /// `type_latency[model][type]`: the model's single-request latency on each catalog
    /// type in ms (its profile fitted and carried to the type; the model's profiled
    /// latency when it has no profile), for MArk's per-type latency filter.
    pub type_latency: Vec<Vec<f64>>,
}

impl World {
    pub fn load(zoo: &Zoo, task: &str) -> anyhow::Result<Self> {
        let spec = zoo.task(task)?;
        let entries: Vec<_> = zoo.models_for(task).collect();
        anyhow::ensure!(!entries.is_empty(), "the zoo has no task `{task}`");
        let models: Vec<String> = entries.iter().map(|m| m.name.clone()).collect();
        let candidates: Vec<Candidate> = entries.iter().copied().map(Candidate::of).collect();
        let file = spec.predictions_file(task)?;
        let predictions = Predictions::load(&zoo.resolve(file))?;
        let probabilities = match load_probabilities(zoo, file, &models, predictions.len())? {
            Some(p) if p.classes != spec.labels.len() => anyhow::bail!(
                "the probability vectors of task `{task}` have {} classes, not {}",
                p.classes,
                spec.labels.len()
            ),
            p => p.map(|p| p.values),
        };
        let answers = models
            .iter()
            .map(|m| {
                predictions
                    .model_index(m)
                    .and_then(|i| predictions.classes.get(i).cloned())
                    .with_context(|| format!("no recorded predictions for `{m}`"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let catalog = Catalog::embedded()?;
        let fitted: Vec<Option<BatchLatency>> = entries
            .iter()
            .map(|m| m.profile.as_ref().and_then(BatchLatency::fit))
            .collect();
        let profile_packing: Vec<Vec<u32>> = entries
            .iter()
            .map(|m| {
                let profile = m.profile.as_ref();
                let pf = |ty| catalog::packing_factor(profile, ty, &catalog.gpu);
                catalog.types.iter().map(pf).collect()
            })
            .collect();
        let type_latency = fitted
            .iter()
            .zip(&candidates)
            .map(|(fitted, c)| {
                catalog
                    .types
                    .iter()
                    .map(|ty| {
                        fitted
                            .as_ref()
                            .map_or(c.latency_ms, |l| l.ms_on(ty, &catalog.gpu, 1))
                    })
                    .collect()
            })
            .collect();
        let labels = predictions.labels.clone();
        let recorded = Recorded::new(answers.iter().cloned().map(Some).collect(), labels.clone())
            .for_estimates();
        Ok(Self {
            task: task.to_owned(),
            types: workload::constraint_types(&candidates),
            accuracy: entries.iter().map(|m| m.accuracy).collect(),
            classes: spec.labels.len(),
            answers,
            labels,
            probabilities,
            recorded,
            models,
            candidates,
            packing: hop_counted(&profile_packing, &fitted, &catalog),
            catalog,
            profile_packing,
            fitted,
            type_latency,
            shifted: 0,
        })
    }
}

/// `packing[model][type]`: the calls an instance takes at once, the hop counted as the
/// live master counts it by default ([`MasterConfig::hop_slots`]).
fn hop_counted(
    profile_packing: &[Vec<u32>],
    fitted: &[Option<BatchLatency>],
    catalog: &Catalog,
) -> Vec<Vec<u32>> {
    let hop_slots = MasterConfig::default().hop_slots();
    profile_packing
        .iter()
        .zip(fitted)
        .map(|(pf, fitted)| {
            pf.iter()
                .zip(&catalog.types)
                .map(|(&pf, ty)| hop_slots.on_type(pf, fitted.as_ref(), ty, &catalog.gpu))
                .collect()
        })
        .collect()
}

impl World {
    /// Test item `item` labelled, with the recorded answer of each model in `asked` (what
    /// the master's shadow calls to a constraint's candidates return).
    pub fn labelled(&self, item: usize, asked: &[usize]) -> Labelled {
        Labelled {
            label: self.labels.get(item).copied().unwrap_or_default(),
            answers: (0..self.models.len())
                .map(|m| {
                    asked
                        .contains(&m)
                        .then(|| self.answers.get(m)?.get(item).copied())
                        .flatten()
                })
                .collect(),
            probabilities: (0..self.models.len())
                .map(|m| {
                    asked
                        .contains(&m)
                        .then(|| self.probabilities(m, item).map(<[f32]>::to_vec))
                        .flatten()
                })
                .collect(),
        }
    }

    /// The soft vote of `members` on test item `item` ([`soft_vote`]); `None` when a
    /// member's vector is not recorded. `sums` is scratch space.
    pub fn soft_vote(
        &self,
        members: &[usize],
        item: usize,
        sums: &mut Vec<(f64, f64)>,
    ) -> Option<usize> {
        let ballots: Vec<(&[f32], u16, f64)> = members
            .iter()
            .map(|&m| {
                let class = *self.answers.get(m)?.get(item)?;
                let accuracy = self.accuracy.get(m).copied().unwrap_or(0.0);
                Some((self.probabilities(m, item)?, class, accuracy))
            })
            .collect::<Option<_>>()?;
        soft_vote(ballots, sums)
    }

    /// Model `model`'s probability vector on test item `item`, when recorded.
    pub fn probabilities(&self, model: usize, item: usize) -> Option<&[f32]> {
        self.probabilities
            .as_ref()?
            .get(model)?
            .get(item * self.classes..(item + 1) * self.classes)
    }

    /// The test items requests are drawn from ([`estimate::scored_items`]).
    pub fn scored_items(&self) -> (usize, usize) {
        estimate::scored_items(self.labels.len() - self.shifted)
    }

    /// The same world with every model `factor` times slower (latencies, and so the
    /// constraint types): our models run in microseconds, the papers' in 10–300 ms, and
    /// the autoscaling studies need pools that take more than one instance.
    pub fn with_latency_scale(&self, factor: f64) -> Self {
        let mut scaled = self.clone();
        for c in &mut scaled.candidates {
            c.latency_ms *= factor;
        }
        scaled.types = workload::constraint_types(&scaled.candidates);
        for ms in scaled.type_latency.iter_mut().flatten() {
            *ms *= factor;
        }
        for fitted in scaled.fitted.iter_mut().flatten() {
            *fitted = fitted.scaled(factor);
        }
        scaled.packing = hop_counted(&scaled.profile_packing, &scaled.fitted, &scaled.catalog);
        scaled
    }

    /// The same world with each model's latency the response time a live master predicts
    /// for it (`(model, ms)`: its inference plus the hop it measured, `/v2/models`'
    /// `predicted_ms`), so that a replay chooses among them as that master does. A model
    /// not named keeps its profile; a name the world does not have is an error.
    pub fn with_response_times(&self, predicted: &[(String, f64)]) -> anyhow::Result<Self> {
        let mut timed = self.clone();
        for (model, ms) in predicted {
            let m = self
                .models
                .iter()
                .position(|name| name == model)
                .ok_or_else(|| anyhow::anyhow!("task `{}` has no model `{model}`", self.task))?;
            timed.candidates[m].latency_ms = *ms;
        }
        timed.types = workload::constraint_types(&timed.candidates);
        Ok(timed)
    }

    /// Appends the test items `shifted` holds answers for (a shifted copy of the scored
    /// half, such as a corruption) after the test set's own: they get the next item
    /// indices. What selection estimates on ([`World::recorded`]) stays the clean first
    /// half, and [`World::scored_items`] keeps meaning the clean scored half.
    /// `probabilities`: the vectors of `shifted`'s answers, when recorded (the world's
    /// vectors are dropped when the shifted items have none, so that no soft vote is
    /// scored on part of the items).
    pub fn append(
        &mut self,
        shifted: &Predictions,
        probabilities: Option<&Probabilities>,
    ) -> anyhow::Result<()> {
        match (&mut self.probabilities, probabilities) {
            (Some(ours), Some(theirs)) => {
                anyhow::ensure!(
                    theirs.classes == self.classes,
                    "the shifted items' vectors have {} classes, not {}",
                    theirs.classes,
                    self.classes
                );
                for (ours, theirs) in ours.iter_mut().zip(&theirs.values) {
                    ours.extend_from_slice(theirs);
                }
            }
            (ours, _) => *ours = None,
        }
        for (model, answers) in self.models.iter().zip(&mut self.answers) {
            let column = shifted
                .model_index(model)
                .and_then(|i| shifted.classes.get(i))
                .with_context(|| format!("no recorded answers of `{model}`"))?;
            answers.extend_from_slice(column);
        }
        self.labels.extend_from_slice(&shifted.labels);
        self.shifted += shifted.labels.len();
        Ok(())
    }
}

/// The probability vectors recorded next to the answers in `predictions` (a file in the
/// zoo), of `models` on `items` items: `None` when the zoo has none (soft votes are then
/// not scored); an error when they are there but unreadable.
pub fn load_probabilities(
    zoo: &Zoo,
    predictions: &str,
    models: &[String],
    items: usize,
) -> anyhow::Result<Option<Probabilities>> {
    let path = zoo.resolve(&probabilities_path(predictions));
    if !path.exists() {
        return Ok(None);
    }
    Ok(Some(Probabilities::load(&path, models, items)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_vectors_agree_with_the_recorded_answers() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        for task in ["fashion", "sentiment"] {
            let mut world = World::load(&zoo, task).unwrap();
            if task == "fashion" {
                // And on the corrupted copies the drift schedules append.
                for set in [
                    "shot_noise-1",
                    "motion_blur-2",
                    "brightness-3",
                    "rotate-4",
                    "inverse",
                ] {
                    let file = format!("predictions/fashion-c/{set}.tsv.gz");
                    let shifted = Predictions::load(&zoo.resolve(&file)).unwrap();
                    let vectors =
                        load_probabilities(&zoo, &file, &world.models, shifted.len()).unwrap();
                    assert!(vectors.is_some(), "{set}: no vectors");
                    world.append(&shifted, vectors.as_ref()).unwrap();
                }
            }
            assert!(world.probabilities.is_some(), "{task}: no vectors");
            let mut sums = Vec::new();
            let mut ties = 0;
            for (m, answers) in world.answers.iter().enumerate() {
                for (item, &class) in answers.iter().enumerate() {
                    let row = world.probabilities(m, item).unwrap();
                    let top = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    assert_eq!(
                        row[usize::from(class)],
                        top,
                        "{task}: `{}` on item {item}: {row:?}",
                        world.models[m]
                    );
                    ties += usize::from(row.iter().filter(|&&p| p == top).count() > 1);
                    // A soft vote of one is the model's own answer.
                    assert_eq!(
                        world.soft_vote(&[m], item, &mut sums),
                        Some(usize::from(class)),
                        "{task}: `{}` on item {item}: {row:?}",
                        world.models[m]
                    );
                }
            }
            eprintln!("{task}: {ties} vectors with a tie at 4 places");
        }
    }

    #[test]
    fn response_times_replace_the_named_models_latencies_only() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let world = World::load(&zoo, "sentiment").unwrap();
        let (first, second) = (world.models[0].clone(), world.models[1].clone());
        let timed = world
            .with_response_times(&[(second.clone(), 1.25)])
            .unwrap();
        assert_eq!(timed.candidates[1].latency_ms, 1.25);
        assert_eq!(
            timed.candidates[0], world.candidates[0],
            "{first} kept its profile"
        );
        assert_eq!(timed.candidates[1].accuracy, world.candidates[1].accuracy);
        let unknown = world
            .with_response_times(&[("no-such-model".to_owned(), 1.0)])
            .unwrap_err();
        assert!(unknown.to_string().contains("no-such-model"), "{unknown}");
    }
}
