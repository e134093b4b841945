//! Which ensemble serves a constraint key: the in-process table, then the shared cache
//! (Redis), then O1; the candidates as selection sees them (predicted response times);
//! publishing a key's selection and adopting another master's newer one.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::{Master, SYNC_PERIOD, indices, names};
use crate::serving::cache::CachedSelection;
use crate::serving::state::{ConstraintKey, KeyState};
use crate::serving::tasks::TaskTable;
use cocktail_policy::response;
use cocktail_policy::selection::{self, Constraint};

impl Master {
    /// The ensemble for a constraint key and whether it came from a cache.
    pub(super) async fn ensemble(
        &self,
        task: &Arc<TaskTable>,
        key: &ConstraintKey,
        constraint: Constraint,
    ) -> (Arc<Mutex<KeyState>>, bool) {
        if let Some(state) = self.ensembles.get(key, task) {
            self.sync_in_background(task, key, &state);
            metrics::counter!("cocktail_master_cache_total", "layer" => "local", "outcome" => "hit")
                .increment(1);
            return (state, true);
        }
        if let Some(cache) = &self.cache {
            if let Some(cached) = cache.get(key.as_str()).await {
                let members = indices(task, &cached.members);
                if !members.is_empty() {
                    metrics::counter!("cocktail_master_cache_total", "layer" => "redis", "outcome" => "hit")
                        .increment(1);
                    let state =
                        self.key_state(&self.served(task), constraint, members, cached.generation);
                    return (self.ensembles.insert(key.clone(), task, state), true);
                }
            }
            metrics::counter!("cocktail_master_cache_total", "layer" => "redis", "outcome" => "miss")
                .increment(1);
        }
        let served = self.served(task);
        let members = selection::initial_or_feasible(
            &served,
            &self.served_with(task, false),
            &constraint,
            task.recorded.as_ref(),
        );
        if members.is_empty() {
            // Nothing can serve the constraint now (no worker yet, say): not remembered, so
            // the next request selects again instead of finding an empty ensemble.
            let state = self.key_state(&served, constraint, members, 0);
            return (Arc::new(Mutex::new(state)), false);
        }
        tracing::info!(%key, members = ?names(task, &members), "O1 selected an ensemble");
        let state = self.ensembles.insert(
            key.clone(),
            task,
            self.key_state(&served, constraint, members, 0),
        );
        self.publish(task, key, &state);
        (state, false)
    }

    /// A constraint's state serving `members`; under `--selection tracking` they follow
    /// the traffic from then on.
    fn key_state(
        &self,
        served: &[selection::Candidate],
        constraint: Constraint,
        members: Vec<usize>,
        generation: u64,
    ) -> KeyState {
        let mut state = KeyState::new(served, constraint, members, generation);
        if let Some(tracking) = self.config.tracking() {
            state.track(tracking);
        }
        state
    }

    /// The task's candidates as selection sees them: each model's `latency_ms` is its
    /// predicted response time ([`cocktail_policy::response::predicted`]): inference on
    /// the fastest type its pool runs on (the profile while it has no instance) plus the
    /// member-call overhead measured on its pool (the measured pools' median before its
    /// first call; the readiness probes' median before any call). Models no worker serves
    /// are unselectable (infinite latency), unless none is served yet, when the profile
    /// alone decides. Models a resource controller manages stay selectable: it launches
    /// what an ensemble uses.
    pub fn served(&self, task: &TaskTable) -> Vec<selection::Candidate> {
        self.served_with(task, true)
    }

    /// [`Master::served`], with the measured overhead (`measured`) or with the inference
    /// times alone.
    pub(super) fn served_with(
        &self,
        task: &TaskTable,
        measured: bool,
    ) -> Vec<selection::Candidate> {
        let serves: Vec<bool> = {
            let managed = self.managed.read();
            task.models
                .iter()
                .map(|m| {
                    self.registry.serves(m) || managed.as_ref().is_some_and(|set| set.contains(m))
                })
                .collect()
        };
        let times = self.registry.response_times(&task.models);
        let predicted = if measured {
            response::predicted(
                &task.candidates,
                &times.inference_ms,
                &times.overhead_ms,
                times.prior,
            )
        } else {
            response::predicted(&task.candidates, &times.inference_ms, &[], None)
        };
        if !serves.contains(&true) {
            return predicted;
        }
        predicted
            .into_iter()
            .zip(serves)
            .map(|(c, served)| selection::Candidate {
                latency_ms: if served { c.latency_ms } else { f64::INFINITY },
                ..c
            })
            .collect()
    }

    /// Writes a key's selection to the shared cache without delaying the request.
    pub(super) fn publish(&self, task: &TaskTable, key: &ConstraintKey, state: &Mutex<KeyState>) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        let selection = {
            let s = state.lock();
            CachedSelection {
                members: names(task, &s.members),
                generation: s.generation,
            }
        };
        let key = key.clone();
        tokio::spawn(async move { cache.put(key.as_str(), &selection).await });
    }

    /// Adopts another master's newer selection, checked at most once per [`SYNC_PERIOD`].
    fn sync_in_background(
        &self,
        task: &TaskTable,
        key: &ConstraintKey,
        state: &Arc<Mutex<KeyState>>,
    ) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        {
            let mut s = state.lock();
            if s.synced.elapsed() < SYNC_PERIOD {
                return;
            }
            s.synced = Instant::now();
        }
        let (key, state) = (key.clone(), Arc::clone(state));
        let models = task.models.clone();
        tokio::spawn(async move {
            let Some(cached) = cache.get(key.as_str()).await else {
                return;
            };
            let members: Vec<usize> = cached
                .members
                .iter()
                .filter_map(|m| models.iter().position(|n| n == m))
                .collect();
            let mut s = state.lock();
            if cached.generation > s.generation && !members.is_empty() {
                tracing::info!(
                    %key,
                    generation = cached.generation,
                    "adopted a newer shared selection"
                );
                s.replace(members, cached.generation);
            }
        });
    }
}
