//! Re-reading the zoo while serving (`POST /v1/zoo/reload`, SIGHUP; `crate::reload`
//! runs the whole of it): the manifest is loaded and checked as at start, the task
//! tables are rebuilt, and the tables swapped whole. A task whose models are unchanged
//! keeps its table, with its learned weights and its selections; the selections of a
//! changed task are forgotten ([`crate::serving::state::Ensembles::forget_stale`]) and
//! made again, from the new table, by the next request. A request under way keeps the
//! table it started with, so its member indices keep naming the models it chose.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cocktail_common::Zoo;
use serde::Serialize;

use super::{Master, Tasks, speeds};
use crate::error::MasterError;
use crate::serving::tasks::{self, TaskTable};

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ZooChange {
    /// Models new to the zoo.
    pub added: Vec<String>,
    /// Models no longer in the zoo: no new request selects them; their pools drain.
    pub removed: Vec<String>,
    /// Tasks whose tables were rebuilt: their selections are made again.
    pub tasks: Vec<String>,
    /// Selections forgotten (constraint keys of the rebuilt tasks).
    pub forgotten: usize,
    /// Models in the zoo now.
    pub models: usize,
}

/// A model of the zoo as `POST /v2/repository/index` lists it (Triton's model
/// repository extension): `READY` while a worker serves it, `UNAVAILABLE` while none
/// does, `UNLOADING` for a model removed from the zoo whose pool still has workers.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ModelIndex {
    pub name: String,
    /// Its task (none for a removed model).
    pub task: Option<String>,
    pub state: String,
    pub reason: String,
}

/// A checked zoo and the tables built from it, not served yet.
#[derive(Debug)]
pub struct Staged {
    pub zoo: Zoo,
    tasks: Tasks,
    speeds: std::collections::HashMap<String, Arc<crate::serving::registry::Speed>>,
    pub change: ZooChange,
}

/// How long a removed model's pool may take to finish its calls; every member call
/// ends at its request's deadline, far sooner.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// How long after the swap a removed model's pool is first looked at: a request that
/// chose it just before then has had time to take its slot.
const DRAIN_SETTLE: Duration = Duration::from_secs(1);

impl Master {
    /// Loads and checks the manifest at the configured path (`--zoo`) and builds its
    /// tables; nothing served changes. A broken manifest is refused, naming the problem.
    pub fn stage_zoo(&self) -> Result<Staged, MasterError> {
        let refused = |e: cocktail_common::CommonError| MasterError::ZooRefused(e.to_string());
        let zoo = Zoo::load(Zoo::locate(self.config.zoo.as_deref()).map_err(refused)?)
            .map_err(refused)?;
        zoo.check_files().map_err(refused)?;
        let old = self.tasks();
        let mut change = ZooChange::default();
        let mut tasks = Tasks::new();
        for (name, table) in tasks::from_zoo(
            &zoo,
            self.config.weight_prior,
            self.config.speed_scale,
            self.config.scheme.rule(),
        ) {
            let table = match old.get(&name) {
                Some(kept) if same(kept, &table) => Arc::clone(kept),
                _ => {
                    change.tasks.push(name.clone());
                    Arc::new(table)
                }
            };
            tasks.insert(name, table);
        }
        change.tasks.extend(
            old.keys()
                .filter(|name| !tasks.contains_key(*name))
                .cloned(),
        );
        let (before, after) = (model_names(&old), model_names(&tasks));
        change.added = after.difference(&before).cloned().collect();
        change.removed = before.difference(&after).cloned().collect();
        change.models = after.len();
        let speeds = speeds(&zoo, self.config.speed_scale)?;
        Ok(Staged {
            zoo,
            tasks,
            speeds,
            change,
        })
    }

    /// Serves a staged zoo: new requests use its tables at once.
    pub fn commit_zoo(&self, staged: Staged) -> (Zoo, ZooChange) {
        let Staged {
            zoo,
            tasks,
            speeds,
            mut change,
        } = staged;
        self.registry.set_speeds(speeds);
        let tasks = Arc::new(tasks);
        *self.tasks.write() = Arc::clone(&tasks);
        change.forgotten = self.ensembles.forget_stale(&tasks);
        (zoo, change)
    }

    /// Waits until no call holds or waits for a slot of `model`'s pool (a model removed
    /// from the zoo), at most [`DRAIN_LIMIT`]; `false` when calls were still under way.
    pub async fn drained(&self, model: &str) -> bool {
        tokio::time::sleep(DRAIN_SETTLE).await;
        let until = Instant::now() + DRAIN_LIMIT;
        while self.registry.pool(model).is_some_and(|p| p.busy()) {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        true
    }

    /// Every model of the zoo, and every removed one whose pool still has workers.
    pub fn model_index(&self) -> Vec<ModelIndex> {
        let tasks = self.tasks();
        let mut index: Vec<ModelIndex> = tasks
            .values()
            .flat_map(|t| t.models.iter().map(move |m| (t, m)))
            .map(|(t, m)| {
                let ready = self.registry.serves(m);
                ModelIndex {
                    name: m.clone(),
                    task: Some(t.name.clone()),
                    state: if ready { "READY" } else { "UNAVAILABLE" }.to_owned(),
                    reason: if ready {
                        String::new()
                    } else {
                        "no worker serves it now".to_owned()
                    },
                }
            })
            .collect();
        let known = model_names(&tasks);
        let mut removed: Vec<String> = self
            .registry
            .view()
            .into_iter()
            .map(|i| i.model)
            .filter(|m| !known.contains(m))
            .collect();
        removed.dedup();
        index.extend(removed.into_iter().map(|name| ModelIndex {
            name,
            task: None,
            state: "UNLOADING".to_owned(),
            reason: "removed from the zoo; its workers are draining".to_owned(),
        }));
        index
    }
}

/// Whether a rebuilt table can stand for the one served: the same models, in the same
/// order, with the same labels and figures (member indices keep their meaning).
fn same(served: &TaskTable, rebuilt: &TaskTable) -> bool {
    served.models == rebuilt.models
        && served.labels == rebuilt.labels
        && served.candidates == rebuilt.candidates
        && served.accuracy == rebuilt.accuracy
        && served.kind == rebuilt.kind
}

fn model_names(tasks: &Tasks) -> BTreeSet<String> {
    tasks
        .values()
        .flat_map(|t| t.models.iter().cloned())
        .collect()
}
