//! Which ensemble serves a constraint key: the in-process table, then the shared cache
//! (Redis), then O1; the candidates as selection sees them (predicted response times);
//! publishing a key's selection and adopting another master's newer one.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::{Master, SYNC_PERIOD, indices, names};
use crate::serving::cache::CachedSelection;
use crate::serving::registry::ResponseTimes;
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
    /// the fastest type its pool runs on (while no worker is up, the fastest type a
    /// resource controller launches it on, as the simulator predicts it; else the
    /// profile's host) plus the member-call overhead measured on its pool (the measured
    /// pools' median before its first call; the readiness probes' median before any
    /// call). Models no worker serves are unselectable (infinite latency), unless none is
    /// served yet, when the profile alone decides. Models a resource controller manages
    /// stay selectable: it launches what an ensemble uses. (Predicted on the profile's
    /// host while its pool had no worker up, `mlp_med` took 260 ms and a 14 ms hop in
    /// `autoscaling_live`, past `const2`'s 260.5 ms, against 175 ms on its type: the
    /// first request's choice hung on which pools had booted, and once its idle pool was
    /// released the model never fitted again.)
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
        let (times, serves) = self.serving_times(task);
        candidates(task, &times, &serves, measured)
    }

    /// The candidates a tracker weighs: each model's inference alone is its cost, as in the
    /// simulator, and a model whose predicted response time (hop included) misses
    /// `latency_ms` is unselectable. The hop is no cost of a choice, and its measurement
    /// moves with the load: weighing the response times, the hop grew from 1-5 to 8-17 ms
    /// per pool (`minilm`'s once to 68) in `drift_live` runs beside two busy loops,
    /// unevenly across pools, so models profiled microseconds apart swapped places and a
    /// vote of three came within the cost tier of one model, or left it, with the load
    /// instead of the traffic (the paced tracker met the target 2 points less often than
    /// its replay).
    pub(super) fn tracked(&self, task: &TaskTable, latency_ms: f64) -> Vec<selection::Candidate> {
        // One read of the registry for both views, so they describe the same moment.
        let (times, serves) = self.serving_times(task);
        let timed = candidates(task, &times, &serves, true);
        candidates(task, &times, &serves, false)
            .into_iter()
            .zip(timed)
            .map(|(c, t)| selection::Candidate {
                latency_ms: if t.latency_ms <= latency_ms {
                    c.latency_ms
                } else {
                    f64::INFINITY
                },
                ..c
            })
            .collect()
    }

    /// The task's models' inference and overhead times and whether each can be served:
    /// by a worker up, or by a resource controller that manages it (then predicted, with
    /// no worker up, on the type the controller would launch it on).
    fn serving_times(&self, task: &TaskTable) -> (ResponseTimes, Vec<bool>) {
        let mut times = self.registry.response_times(&task.models);
        let serves: Vec<bool> = {
            let managed = self.managed.read();
            task.models
                .iter()
                .zip(&mut times.inference_ms)
                .map(|(m, inference)| {
                    let Some(managed) = managed.as_ref().filter(|c| c.models.contains(m)) else {
                        return self.registry.serves(m);
                    };
                    // No worker up: on the type the controller would launch it on.
                    if inference.is_none() {
                        *inference = self.registry.inference_on(m, &managed.types);
                    }
                    true
                })
                .collect()
        };
        (times, serves)
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

/// `task`'s candidates predicted from `times`, with the measured overhead (`measured`)
/// or with the inference times alone; a model nobody serves is unselectable (infinite
/// latency) unless none is served yet, when the profile alone decides.
fn candidates(
    task: &TaskTable,
    times: &ResponseTimes,
    serves: &[bool],
    measured: bool,
) -> Vec<selection::Candidate> {
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
        .map(|(c, &served)| selection::Candidate {
            latency_ms: if served { c.latency_ms } else { f64::INFINITY },
            ..c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use std::sync::Arc;
    use std::time::Duration;

    use cocktail_common::control::Registration;

    use crate::{Master, MasterConfig};

    /// A tracker costs each choice by its inference alone, whatever hop its pool
    /// measured, and leaves out a model whose response time, hop included, misses the
    /// latency target.
    #[test]
    fn a_tracker_weighs_inference_and_leaves_out_what_the_hop_makes_late() {
        let master = Master::new(MasterConfig::default()).unwrap();
        let task = Arc::clone(&master.tasks()["fashion"]);
        for (i, model) in task.models.iter().enumerate() {
            master
                .registry
                .register(&Registration {
                    id: format!("w{i}"),
                    model: model.clone(),
                    url: format!("http://127.0.0.1:{}", 9000 + i),
                    packing_factor: 1,
                    queue_items: 1,
                    threads: 1,
                    burst: false,
                    instance_type: None,
                })
                .unwrap();
            // Probes of 10 ms and up: until a member call is measured, every pool's hop
            // is their median.
            let hop = Duration::from_millis(10 * (i as u64 + 1));
            master.registry.pool(model).unwrap().observe_probe(hop);
        }
        let inference = master.served_with(&task, false);
        let timed = master.served(&task);
        let hop = timed[0].latency_ms - inference[0].latency_ms;
        assert!(hop > 0.0, "{timed:?}");
        // A target the first model meets on inference but not with its hop.
        let latency_ms = inference[0].latency_ms + hop / 2.0;
        let tracked = master.tracked(&task, latency_ms);
        assert_eq!(tracked[0].latency_ms, f64::INFINITY);
        for ((t, i), r) in tracked.iter().zip(&inference).zip(&timed) {
            if r.latency_ms <= latency_ms {
                assert_eq!(t.latency_ms, i.latency_ms, "its inference alone");
            } else {
                assert_eq!(t.latency_ms, f64::INFINITY);
            }
        }
        let lax = master.tracked(&task, f64::MAX);
        assert_eq!(
            lax.iter().map(|c| c.latency_ms).collect::<Vec<_>>(),
            inference.iter().map(|c| c.latency_ms).collect::<Vec<_>>()
        );
    }

    /// Before its pool has a worker up, a model a resource controller manages is
    /// predicted on the fastest type the controller launches, as the simulator predicts
    /// it; a model nobody manages, on its profile.
    #[test]
    fn a_managed_model_without_a_worker_is_predicted_on_the_type_it_is_launched_on() {
        let master = Master::new(MasterConfig {
            speed_scale: 10_000.0,
            ..MasterConfig::default()
        })
        .unwrap();
        let task = Arc::clone(&master.tasks()["fashion"]);
        let m = task.model_index("mlp_med").unwrap();
        let profiled = task.candidates[m].latency_ms;
        assert_eq!(master.served(&task)[m].latency_ms, profiled);

        master.manage(task.models.clone());
        let types = ["c5a.xlarge".to_owned(), "c5a.2xlarge".to_owned()];
        master.launches_on(types.to_vec());
        let on_type = master.served(&task)[m].latency_ms;
        let fastest = types
            .iter()
            .map(|t| {
                master
                    .registry
                    .inference_on("mlp_med", std::slice::from_ref(t))
            })
            .map(Option::unwrap)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(on_type, fastest);
        assert!(
            on_type < profiled,
            "{on_type} ms on the type, {profiled} on the host"
        );
    }
}
