//! The request path (DESIGN.md): constraint key → ensemble (in-process table, then the
//! shared cache, then O1) → fan-out to the members' pools with a deadline → per-item
//! vote → labels (real, or pseudo from the full candidate set) → O2 at interval ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cocktail_common::Zoo;
use cocktail_common::catalog::Catalog;
use cocktail_common::latency::BatchLatency;
use futures_util::future::join_all;
use serde::Serialize;

use crate::cache::{CachedSelection, SharedCache};
use crate::config::MasterConfig;
use crate::dispatch::{MemberAnswer, MemberError, call_member};
use crate::error::{MasterError, MemberFailure};
use crate::failover::{Call, Spares, serve_slot};
use crate::registry::{Registry, Speed};
use crate::request::ValidRequest;
use crate::selection::{self, Adjustment, Constraint};
use crate::state::{Answered, Ensembles, KeyState, LabelKind, Recent, constraint_key};
use crate::tasks::{self, TaskTable};
use crate::usage::Usage;
use crate::voting::{Ballot, Scheme, vote};

/// How often a constraint's selection is compared with the shared cache.
const SYNC_PERIOD: Duration = Duration::from_secs(1);

/// Everything the handlers share.
#[derive(Debug)]
pub struct Master {
    pub config: MasterConfig,
    pub tasks: BTreeMap<String, Arc<TaskTable>>,
    pub registry: Arc<Registry>,
    pub ensembles: Ensembles,
    pub recent: Recent,
    pub cache: Option<SharedCache>,
    /// What the resource controller measures.
    pub usage: Usage,
    client: reqwest::Client,
    requests: AtomicU64,
    unlabelled: AtomicU64,
    /// Distinguishes generated request ids of masters started at different times.
    epoch: u64,
}

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
    pub interval: serde_json::Value,
    /// The master's own time up to the vote: everything except waiting for the members.
    /// The handler adds encoding the answer and reports the total in `Server-Timing`.
    pub master_us: u64,
    /// Time spent waiting for the members (slowest member, queueing included).
    pub wait_us: u64,
}

impl Master {
    /// Builds the master from the zoo; the Redis cache (if any) connects lazily, so this
    /// must run inside the Tokio runtime.
    pub fn new(config: MasterConfig) -> Result<Self, MasterError> {
        let zoo = Zoo::load(Zoo::locate(config.zoo.as_deref())?)?;
        let tasks = tasks::from_zoo(&zoo, config.weight_prior)
            .into_iter()
            .map(|(name, table)| (name, Arc::new(table)))
            .collect();
        let cache = config
            .redis_url
            .as_deref()
            .map(|url| {
                SharedCache::connect(url, "cocktail", config.cache_ttl, config.redis_timeout)
            })
            .transpose()?;
        let client =
            cocktail_worker::net::client(config.tls_ca.as_deref(), config.cluster_secret.as_ref())
                .map_err(|e| MasterError::Internal(format!("HTTP client: {e}")))?
                .pool_max_idle_per_host(64)
                .tcp_nodelay(true)
                .build()
                .map_err(|e| MasterError::Internal(format!("HTTP client: {e}")))?;
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let registry = Arc::new(Registry::with_speeds(speeds(&zoo, config.speed_scale)?));
        Ok(Self {
            recent: Recent::new(config.feedback_capacity),
            config,
            tasks,
            registry,
            unlabelled: AtomicU64::new(0),
            ensembles: Ensembles::default(),
            cache,
            usage: Usage::default(),
            client,
            requests: AtomicU64::new(0),
            epoch,
        })
    }

    pub fn task(&self, name: &str) -> Result<&Arc<TaskTable>, MasterError> {
        self.tasks
            .get(name)
            .ok_or_else(|| MasterError::UnknownTask {
                task: name.to_owned(),
                known: self
                    .tasks
                    .keys()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The ensemble for a constraint key and whether it came from a cache.
    async fn ensemble(
        &self,
        task: &TaskTable,
        key: &str,
        constraint: Constraint,
    ) -> (Arc<Mutex<KeyState>>, bool) {
        if let Some(state) = self.ensembles.get(key) {
            self.sync_in_background(task, key, &state);
            metrics::counter!("cocktail_master_cache_total", "layer" => "local", "outcome" => "hit")
                .increment(1);
            return (state, true);
        }
        let config = &self.config.selection;
        if let Some(cache) = &self.cache {
            if let Some(cached) = cache.get(key).await {
                let members = indices(task, &cached.members);
                if !members.is_empty() {
                    metrics::counter!("cocktail_master_cache_total", "layer" => "redis", "outcome" => "hit")
                        .increment(1);
                    let state = KeyState::new(
                        &self.served(task),
                        constraint,
                        members,
                        cached.generation,
                        config,
                    );
                    return (self.ensembles.insert(key.to_owned(), state), true);
                }
            }
            metrics::counter!("cocktail_master_cache_total", "layer" => "redis", "outcome" => "miss")
                .increment(1);
        }
        let served = self.served(task);
        let members = selection::initial(&served, &constraint, config);
        tracing::info!(key, members = ?names(task, &members), "O1 selected an ensemble");
        let state = self.ensembles.insert(
            key.to_owned(),
            KeyState::new(&served, constraint, members, 0, config),
        );
        self.publish(task, key, &state);
        (state, false)
    }

    /// The task's candidates, with models no worker serves made unselectable (infinite
    /// latency) — unless none is served yet, when the profile alone decides.
    pub fn served(&self, task: &TaskTable) -> Vec<selection::Candidate> {
        let serves: Vec<bool> = task
            .models
            .iter()
            .map(|m| self.registry.serves(m))
            .collect();
        if !serves.contains(&true) {
            return task.candidates.clone();
        }
        task.candidates
            .iter()
            .zip(serves)
            .map(|(c, served)| selection::Candidate {
                latency_ms: if served { c.latency_ms } else { f64::INFINITY },
                ..c.clone()
            })
            .collect()
    }

    /// Writes a key's selection to the shared cache without delaying the request.
    fn publish(&self, task: &TaskTable, key: &str, state: &Mutex<KeyState>) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        let selection = {
            let s = state.lock().unwrap_or_else(|p| p.into_inner());
            CachedSelection {
                members: names(task, &s.members),
                generation: s.generation,
            }
        };
        let key = key.to_owned();
        tokio::spawn(async move { cache.put(&key, &selection).await });
    }

    /// Adopts another master's newer selection, checked at most once per [`SYNC_PERIOD`].
    fn sync_in_background(&self, task: &TaskTable, key: &str, state: &Arc<Mutex<KeyState>>) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        {
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            if s.synced.elapsed() < SYNC_PERIOD {
                return;
            }
            s.synced = Instant::now();
        }
        let (key, state) = (key.to_owned(), Arc::clone(state));
        let models = task.models.clone();
        tokio::spawn(async move {
            let Some(cached) = cache.get(&key).await else {
                return;
            };
            let members: Vec<usize> = cached
                .members
                .iter()
                .filter_map(|m| models.iter().position(|n| n == m))
                .collect();
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            if cached.generation > s.generation && !members.is_empty() {
                tracing::info!(
                    key,
                    generation = cached.generation,
                    "adopted a newer shared selection"
                );
                s.replace(members, cached.generation);
            }
        });
    }

    /// Serves one request of `task`.
    pub async fn infer(
        &self,
        task_name: &str,
        request: ValidRequest,
    ) -> Result<Answer, MasterError> {
        let started = Instant::now();
        let task = Arc::clone(self.task(task_name)?);
        let key = constraint_key(task_name, &request.constraint);
        let (state, cache_hit) = self.ensemble(&task, &key, request.constraint).await;
        let (members, generation) = state.lock().unwrap_or_else(|p| p.into_inner()).begin();
        if members.is_empty() {
            return Err(no_candidate(
                &task,
                &request.constraint,
                self.config.selection.latency_margin_ms,
            ));
        }
        let deadline = started
            + Duration::from_secs_f64(request.constraint.latency_ms / 1e3)
            + self.config.deadline_grace;
        let classes = task.labels.len();

        let waiting = Instant::now();
        let spares = Spares::new({
            let s = state.lock().unwrap_or_else(|p| p.into_inner());
            selection::substitutes(&task.candidates, &s.pool, &members)
        });
        let call = Call {
            client: &self.client,
            registry: &self.registry,
            task: &task,
            body: &request.member,
            deadline,
            items: request.items,
            hedge_min: self.config.hedge_min,
        };
        let slots = join_all(members.iter().map(|&m| serve_slot(call, m, &spares))).await;
        let wait = waiting.elapsed();

        let scheme = request.scheme.unwrap_or(self.config.scheme);
        let mut failed = Vec::new();
        let mut substitutes = Vec::new();
        let mut answered: Vec<(usize, &MemberAnswer)> = Vec::new();
        let mut errors: Vec<&MemberError> = Vec::new();
        for (&member, slot) in members.iter().zip(&slots) {
            for (model, e) in &slot.failures {
                metrics::counter!("cocktail_master_member_errors_total",
                    "model" => task.models[*model].clone(), "kind" => e.kind())
                .increment(1);
                failed.push(MemberFailure {
                    model: task.models[*model].clone(),
                    error: e.to_string(),
                });
            }
            match &slot.answer {
                Ok((model, answer)) => {
                    if *model != member {
                        substitutes.push(Substitute {
                            member: task.models[member].clone(),
                            model: task.models[*model].clone(),
                        });
                    }
                    answered.push((*model, answer));
                }
                Err(e) => errors.push(e),
            }
        }
        self.usage.record(slots.iter().flat_map(|slot| {
            let answered = slot.answer.as_ref().ok().map(|(m, _)| (*m, false));
            slot.failures
                .iter()
                .map(|(m, e)| (*m, matches!(e, MemberError::Deadline)))
                .chain(answered)
                .map(|(m, missed)| (task.models[m].as_str(), missed))
        }));
        if answered.is_empty() {
            return Err(all_failed(task_name, errors, failed));
        }

        let mut outcome_class = Vec::with_capacity(request.items);
        let mut winning_votes = Vec::with_capacity(request.items);
        let mut scores = Vec::with_capacity(request.items);
        let mut votes: Vec<Vote> = answered
            .iter()
            .map(|(model, _)| Vote {
                model: task.models[*model].clone(),
                class: Vec::with_capacity(request.items),
                label: Vec::with_capacity(request.items),
                weight: Vec::with_capacity(request.items),
            })
            .collect();
        {
            let weights = task.weights.read().unwrap_or_else(|p| p.into_inner());
            let mut ballots = Vec::with_capacity(answered.len());
            for item in 0..request.items {
                ballots.clear();
                for (v, (model, answer)) in answered.iter().enumerate() {
                    let class = answer.classes[item];
                    ballots.push(Ballot {
                        model: *model,
                        class,
                        probabilities: &answer.probabilities[item * classes..(item + 1) * classes],
                    });
                    votes[v].class.push(class);
                    votes[v].label.push(task.labels[class].clone());
                    votes[v].weight.push(weights.weight(*model, class));
                }
                let outcome = vote(scheme, &ballots, &weights, &task.accuracy, classes)
                    .ok_or_else(|| MasterError::Internal("vote without ballots".into()))?;
                outcome_class.push(outcome.class);
                winning_votes.push(outcome.winning_votes);
                scores.push(outcome.scores);
            }
        }

        let id = request.id.clone().unwrap_or_else(|| {
            format!(
                "{:x}-{:x}",
                self.epoch,
                self.requests.fetch_add(1, Ordering::Relaxed)
            )
        });
        let record = Answered {
            task: Arc::clone(&task),
            state: Arc::clone(&state),
            generation,
            // A substitute's answer is not its member's: the member's slot learns nothing.
            member_classes: members
                .iter()
                .zip(&slots)
                .map(|(&member, slot)| match &slot.answer {
                    Ok((model, a)) if *model == member => Some(a.classes.clone()),
                    _ => None,
                })
                .collect(),
            members: members.clone(),
            ensemble: outcome_class.clone(),
            winning_votes,
        };
        match &request.labels {
            Some(labels) => record.learn(labels, LabelKind::Real),
            None => {
                self.maybe_pseudo_label(&record, &state, &request, deadline);
                self.recent.remember(id.clone(), record);
            }
        }
        self.revisit(&task, &key, &state);

        // Degraded only when the vote really lost a voter, not when a substitute stood in.
        let degraded = answered.len() < members.len();
        let master_us = started.elapsed().saturating_sub(wait).as_micros() as u64;
        metrics::counter!("cocktail_master_requests_total", "task" => task_name.to_owned(),
            "outcome" => if degraded { "degraded" } else { "ok" })
        .increment(1);
        metrics::histogram!("cocktail_master_request_duration_seconds", "task" => task_name.to_owned())
            .record(started.elapsed().as_secs_f64());
        metrics::histogram!("cocktail_master_ensemble_size").record(members.len() as f64);
        Ok(Answer {
            id,
            task: task_name.to_owned(),
            label: outcome_class
                .iter()
                .map(|&c| task.labels[c].clone())
                .collect(),
            class: outcome_class,
            scores,
            models: names(&task, &members),
            votes,
            failed,
            substitutes,
            scheme: scheme_name(scheme),
            cache_hit,
            degraded,
            interval: self.config.interval.describe(),
            master_us,
            wait_us: wait.as_micros() as u64,
        })
    }

    /// O2 at the end of the key's interval; a change is published to the shared cache.
    fn revisit(&self, task: &TaskTable, key: &str, state: &Mutex<KeyState>) {
        let change = {
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            if !s.due(self.config.interval) {
                return;
            }
            s.revisit(
                &self.served(task),
                self.config.interval,
                &self.config.selection,
            )
        };
        if let Some(change) = change {
            let kind = match change {
                Adjustment::Prune(_) => "prune",
                Adjustment::Add(_) => "add",
                Adjustment::Keep => "keep",
            };
            let members = names(
                task,
                &state.lock().unwrap_or_else(|p| p.into_inner()).members,
            );
            tracing::info!(key, kind, ?members, "O2 changed an ensemble");
            metrics::counter!("cocktail_master_selection_changes_total", "kind" => kind)
                .increment(1);
            self.publish(task, key, state);
        }
    }

    /// Every n-th unlabelled request also goes to the candidates outside the ensemble,
    /// in the background; the majority of all candidates becomes its pseudo-label.
    fn maybe_pseudo_label(
        &self,
        record: &Answered,
        state: &Arc<Mutex<KeyState>>,
        request: &ValidRequest,
        deadline: Instant,
    ) {
        let every = self.config.pseudo_label_every;
        if every == 0
            || !self
                .unlabelled
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every)
        {
            return;
        }
        let others: Vec<usize> = {
            let s = state.lock().unwrap_or_else(|p| p.into_inner());
            s.pool
                .iter()
                .copied()
                .filter(|m| !record.members.contains(m))
                .collect()
        };
        let known: Vec<(usize, Vec<usize>)> = record
            .members
            .iter()
            .zip(&record.member_classes)
            .filter_map(|(&m, classes)| classes.clone().map(|c| (m, c)))
            .collect();
        let record = record.clone();
        let (client, registry_pool) = (self.client.clone(), Arc::clone(&self.registry));
        let (body, items) = (request.member.clone(), request.items);
        let budget = deadline
            .saturating_duration_since(Instant::now())
            .max(self.config.deadline_grace);
        tokio::spawn(async move {
            let deadline = Instant::now() + budget;
            let classes = record.task.labels.len();
            let shadow = join_all(others.iter().map(|&m| {
                call_member(
                    &client,
                    &registry_pool,
                    &record.task.models[m],
                    &body,
                    deadline,
                    items,
                    classes,
                )
            }))
            .await;
            let mut all = known;
            for (&m, r) in others.iter().zip(shadow) {
                if let Ok(answer) = r {
                    all.push((m, answer.classes));
                }
            }
            let labels: Vec<usize> = (0..items)
                .filter_map(|item| {
                    let ballots: Vec<Ballot<'_>> = all
                        .iter()
                        .map(|(m, c)| Ballot {
                            model: *m,
                            class: c[item],
                            probabilities: &[],
                        })
                        .collect();
                    let weights = record
                        .task
                        .weights
                        .read()
                        .unwrap_or_else(|p| p.into_inner());
                    vote(
                        Scheme::Majority,
                        &ballots,
                        &weights,
                        &record.task.accuracy,
                        classes,
                    )
                    .map(|o| o.class)
                })
                .collect();
            if labels.len() == items {
                // Candidates outside the ensemble learn from the pseudo-label too.
                let mut weights = record
                    .task
                    .weights
                    .write()
                    .unwrap_or_else(|p| p.into_inner());
                for (m, classes) in all.iter().filter(|(m, _)| !record.members.contains(m)) {
                    for (&label, &class) in labels.iter().zip(classes) {
                        weights.record(*m, label, class);
                    }
                }
                drop(weights);
                record.learn(&labels, LabelKind::Pseudo);
            }
        });
    }

    /// Applies a label sent after the answer (`/v1/feedback`).
    pub fn feedback(
        &self,
        id: &str,
        label: Option<&serde_json::Value>,
    ) -> Result<usize, MasterError> {
        let answered = self
            .recent
            .take(id)
            .ok_or_else(|| MasterError::UnknownRequest { id: id.to_owned() })?;
        let items = answered.ensemble.len();
        let labels = match crate::request::labels(&answered.task, label, items) {
            Ok(Some(labels)) => labels,
            Ok(None) => {
                self.recent.remember(id.to_owned(), answered);
                return Err(MasterError::invalid("label", "is required"));
            }
            Err(e) => {
                self.recent.remember(id.to_owned(), answered);
                return Err(e);
            }
        };
        answered.learn(&labels, LabelKind::Real);
        let key = constraint_key(
            &answered.task.name,
            &answered
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .constraint,
        );
        self.revisit(&answered.task, &key, &answered.state);
        Ok(items)
    }
}

fn indices(task: &TaskTable, names: &[String]) -> Vec<usize> {
    names.iter().filter_map(|n| task.model_index(n)).collect()
}

fn names(task: &TaskTable, members: &[usize]) -> Vec<String> {
    members.iter().map(|&m| task.models[m].clone()).collect()
}

pub fn scheme_name(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Weighted => "weighted",
        Scheme::Majority => "majority",
        Scheme::Average => "average",
    }
}

fn no_candidate(task: &TaskTable, c: &Constraint, margin_ms: f64) -> MasterError {
    let fastest = task
        .candidates
        .iter()
        .map(|m| m.latency_ms)
        .fold(f64::INFINITY, f64::min);
    MasterError::invalid(
        "latency_ms",
        format!(
            "no model of task `{}` answers within {} ms (margin {margin_ms} ms); the fastest takes {fastest} ms",
            task.name, c.latency_ms
        ),
    )
}

/// The error when no member answered: the workers' own 4xx when every one refused the
/// input, 503 when no pool has an instance, else 502 listing each member's error.
fn all_failed(task: &str, errors: Vec<&MemberError>, failed: Vec<MemberFailure>) -> MasterError {
    let all_rejected = errors
        .iter()
        .all(|e| matches!(e, MemberError::Rejected { .. }));
    if let (
        true,
        Some(MemberError::Rejected {
            status,
            error_type,
            message,
        }),
    ) = (all_rejected, errors.first())
    {
        return MasterError::Rejected {
            status: *status,
            error_type: error_type.clone(),
            message: message.clone(),
        };
    }
    if errors.iter().all(|e| matches!(e, MemberError::NoInstance)) {
        return MasterError::NoWorkers {
            task: task.to_owned(),
        };
    }
    MasterError::AllMembersFailed(failed)
}

/// Each profiled model's batch latency on the embedded catalog's types, for Kairos'
/// matching on pools whose workers report different instance types.
fn speeds(zoo: &Zoo, scale: f64) -> Result<HashMap<String, Arc<Speed>>, MasterError> {
    let catalog = Arc::new(Catalog::embedded()?);
    Ok(zoo
        .models()
        .iter()
        .filter_map(|m| {
            let latency = BatchLatency::fit(m.profile.as_ref()?)?.scaled(scale);
            Some((
                m.name.clone(),
                Arc::new(Speed {
                    latency,
                    catalog: Arc::clone(&catalog),
                }),
            ))
        })
        .collect())
}
