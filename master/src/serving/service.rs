//! The request path (DESIGN.md): constraint key → ensemble (in-process table, then the
//! shared cache, then O1) → fan-out to the members' pools with a deadline → per-item
//! vote → labels (real, or pseudo from the full candidate set) → O2 at interval ends.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use cocktail_common::Zoo;
use cocktail_common::catalog::Catalog;
use cocktail_common::latency::BatchLatency;
use futures_util::future::join_all;

use crate::config::MasterConfig;
use crate::error::{MasterError, MemberFailure};
use crate::serving::answer::{self, Answer, Returns};
use crate::serving::cache::{CachedSelection, SharedCache};
use crate::serving::dispatch::{MemberError, call_member};
use crate::serving::failover::{Call, Slot, Spares, serve_slot};
use crate::serving::registry::{Registry, Speed};
use crate::serving::request::ValidRequest;
use crate::serving::state::{Answered, ConstraintKey, Ensembles, KeyState, Recent};
use crate::serving::tasks::{self, TaskTable};
use crate::serving::traffic::{Outcome, Traffic};
use crate::serving::usage::Usage;
use cocktail_policy::measured::Labelled;
use cocktail_policy::response;
use cocktail_policy::selection::{self, Adjustment, Constraint, Rule};
use cocktail_policy::voting::{BatchOutcome, Scheme, Voter, vote_batch};

/// A request's ensemble, as [`Master::resolve`] found it.
struct Resolved {
    task: Arc<TaskTable>,
    key: ConstraintKey,
    state: Arc<Mutex<KeyState>>,
    cache_hit: bool,
    members: Vec<usize>,
    generation: u64,
    /// When the answer is due: `latency_ms` (plus the grace) after arrival.
    due: Instant,
    /// When the request stops waiting for its members: `due`, or later when none of them
    /// is predicted to answer in time ([`response::wait_ms`]).
    deadline: Instant,
}

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
    /// What each constraint's requests met, and O2's decisions (the dashboard's figures).
    pub traffic: Traffic,
    client: reqwest::Client,
    requests: AtomicU64,
    unlabelled: AtomicU64,
    labelled: AtomicU64,
    /// Distinguishes generated request ids of masters started at different times.
    epoch: u64,
    /// Models whose pools a resource controller manages: selectable while no worker
    /// serves them, since the controller launches a pool once an ensemble uses it.
    managed: OnceLock<HashSet<String>>,
}

impl Master {
    /// Builds the master from the zoo; the Redis cache (if any) connects lazily, so this
    /// must run inside the Tokio runtime.
    pub fn new(config: MasterConfig) -> Result<Self, MasterError> {
        let zoo = Zoo::load(Zoo::locate(config.zoo.as_deref())?)?;
        let tasks = tasks::from_zoo(&zoo, config.weight_prior, config.speed_scale)
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
            cocktail_service::net::client(config.tls_ca.as_deref(), config.cluster_secret.as_ref())
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
            labelled: AtomicU64::new(0),
            ensembles: Ensembles::default(),
            cache,
            usage: Usage::default(),
            traffic: Traffic::default(),
            client,
            requests: AtomicU64::new(0),
            epoch,
            managed: OnceLock::new(),
        })
    }

    /// Times a round trip to a newly registered instance's readiness probe, in the
    /// background: its pool's first overhead estimate, so that the first selection
    /// counts the hop before any member call is measured.
    pub fn probe(&self, model: &str, url: &str) {
        let Some(pool) = self.registry.pool(model) else {
            return;
        };
        let (client, url) = (self.client.clone(), format!("{url}/v2/health/ready"));
        tokio::spawn(async move {
            let started = Instant::now();
            let answered = client
                .get(&url)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if answered.is_ok_and(|r| r.status().is_success()) {
                pool.observe_probe(started.elapsed());
            }
        });
    }

    /// Hands the pools of `models` to a resource controller (once; later calls do
    /// nothing): they stay selectable with no worker, and the controller keeps a pool
    /// only while some ensemble uses it.
    pub fn manage(&self, models: impl IntoIterator<Item = String>) {
        let _ = self.managed.set(models.into_iter().collect());
    }

    /// Every model some current ensemble uses, with the tightest latency target among
    /// those ensembles (the autoscalers buy its pool only types that fast); `None`
    /// before the first ensemble is selected.
    pub fn models_in_use(&self) -> Option<HashMap<String, f64>> {
        let keys = self.ensembles.snapshot();
        if keys.is_empty() {
            return None;
        }
        let mut in_use = HashMap::new();
        for (key, state) in keys {
            let Some(task) = self.tasks.get(key.task()) else {
                continue;
            };
            let (latency_ms, members) = {
                let s = state.lock();
                (s.constraint.latency_ms, s.members.clone())
            };
            for model in members.iter().filter_map(|&m| task.models.get(m)) {
                in_use
                    .entry(model.clone())
                    .and_modify(|t: &mut f64| *t = t.min(latency_ms))
                    .or_insert(latency_ms);
            }
        }
        Some(in_use)
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
        key: &ConstraintKey,
        constraint: Constraint,
    ) -> (Arc<Mutex<KeyState>>, bool) {
        if let Some(state) = self.ensembles.get(key) {
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
                        KeyState::new(&self.served(task), constraint, members, cached.generation);
                    return (self.ensembles.insert(key.clone(), state), true);
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
        tracing::info!(%key, members = ?names(task, &members), "O1 selected an ensemble");
        let state = self
            .ensembles
            .insert(key.clone(), KeyState::new(&served, constraint, members, 0));
        self.publish(task, key, &state);
        (state, false)
    }

    /// The task's candidates as selection sees them: each model's `latency_ms` is its
    /// predicted response time ([`cocktail_policy::response::predicted`]): inference on
    /// the fastest type its pool runs on (the profile while it has no instance) plus the
    /// member-call overhead measured on its pool (its workers' readiness probes before
    /// its first call; the other pools' median while it has neither). Models no worker serves
    /// are unselectable (infinite latency), unless none is served yet, when the profile
    /// alone decides. Models a resource controller manages stay selectable: it launches
    /// what an ensemble uses.
    pub fn served(&self, task: &TaskTable) -> Vec<selection::Candidate> {
        self.served_with(task, true)
    }

    /// [`Master::served`], with the measured overhead (`measured`) or with the inference
    /// times alone.
    fn served_with(&self, task: &TaskTable, measured: bool) -> Vec<selection::Candidate> {
        let managed = self.managed.get();
        let serves: Vec<bool> = task
            .models
            .iter()
            .map(|m| self.registry.serves(m) || managed.is_some_and(|set| set.contains(m)))
            .collect();
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
    fn publish(&self, task: &TaskTable, key: &ConstraintKey, state: &Mutex<KeyState>) {
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

    /// Serves one request of `task`: resolve its ensemble, dispatch it to the members,
    /// vote on their answers, learn from them, and present the answer.
    #[tracing::instrument(skip_all, fields(task = task_name, items = request.items))]
    pub async fn infer(
        &self,
        task_name: &str,
        request: ValidRequest,
    ) -> Result<Answer, MasterError> {
        let started = Instant::now();
        let constraint = request.constraint;
        let answer = self.answer(task_name, request, started).await;
        if self.tasks.contains_key(task_name) {
            let outcome = match &answer {
                Ok(a) => Outcome::Answered {
                    members: a.models.len(),
                    degraded: a.degraded,
                    substituted: !a.substitutes.is_empty(),
                },
                Err(_) => Outcome::Failed,
            };
            let key = ConstraintKey::new(task_name, &constraint);
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            self.traffic
                .record(key.as_str(), &constraint, elapsed_ms, outcome);
        }
        answer
    }

    /// [`Master::infer`] without the counting.
    async fn answer(
        &self,
        task_name: &str,
        request: ValidRequest,
        started: Instant,
    ) -> Result<Answer, MasterError> {
        let resolved = self.resolve(task_name, &request).await?;
        let waiting = Instant::now();
        let slots = self.dispatch(&resolved, &request).await;
        let wait = waiting.elapsed();
        let task = &resolved.task;
        // A member missed when it gave no answer in time, or answered only after the
        // answer was due (a request that waited for late members).
        self.usage.record(slots.iter().flat_map(|slot| {
            let late = slot.finished > resolved.due;
            let answered = slot.answer.as_ref().ok().map(|(m, _)| (*m, late));
            slot.failures
                .iter()
                .map(|(m, e)| (*m, matches!(e, MemberError::Deadline)))
                .chain(answered)
                .map(|(m, missed)| (task.models[m].as_str(), missed))
        }));
        let returns = Returns::of(task, &resolved.members, &slots);
        if returns.answered.is_empty() {
            return Err(all_failed(task_name, returns.errors, returns.failed));
        }

        let scheme = request.scheme.unwrap_or(self.config.scheme);
        let voters: Vec<Voter<'_>> = returns
            .answered
            .iter()
            .map(|(model, answer)| Voter {
                model: *model,
                classes: &answer.classes,
                probabilities: &answer.probabilities,
            })
            .collect();
        let (outcome, votes) = {
            let weights = task.weights.read();
            let outcome = vote_batch(
                scheme,
                &voters,
                request.items,
                &weights,
                &task.accuracy,
                task.labels.len(),
            )
            .ok_or_else(|| MasterError::Internal("vote without ballots".into()))?;
            (outcome, answer::votes(task, &voters, &weights))
        };

        let id = request.id.clone().unwrap_or_else(|| {
            format!(
                "{:x}-{:x}",
                self.epoch,
                self.requests.fetch_add(1, Ordering::Relaxed)
            )
        });
        self.learn(&resolved, &request, &slots, &outcome, &id);

        // Degraded only when the vote really lost a voter, not when a substitute stood in.
        let degraded = returns.answered.len() < resolved.members.len();
        let master_us = started.elapsed().saturating_sub(wait).as_micros() as u64;
        metrics::counter!("cocktail_master_requests_total", "task" => task_name.to_owned(),
            "outcome" => if degraded { "degraded" } else { "ok" })
        .increment(1);
        let elapsed = started.elapsed();
        metrics::histogram!("cocktail_master_request_duration_seconds", "task" => task_name.to_owned())
            .record(elapsed.as_secs_f64());
        let latency_met = elapsed.as_secs_f64() * 1e3 <= request.constraint.latency_ms;
        if !latency_met {
            metrics::counter!("cocktail_master_slo_violations_total", "task" => task_name.to_owned())
                .increment(1);
        }
        metrics::histogram!("cocktail_master_ensemble_size").record(resolved.members.len() as f64);
        Ok(Answer {
            id,
            task: task_name.to_owned(),
            label: outcome
                .class
                .iter()
                .map(|&c| task.labels[c].clone())
                .collect(),
            class: outcome.class,
            scores: outcome.scores,
            models: names(task, &resolved.members),
            votes,
            failed: returns.failed,
            substitutes: returns.substitutes,
            scheme: scheme_name(scheme),
            cache_hit: resolved.cache_hit,
            degraded,
            interval: self.config.interval.describe(),
            master_us,
            wait_us: wait.as_micros() as u64,
            latency_met,
        })
    }

    /// The request's ensemble (O1, the local table or the shared cache) and deadline.
    async fn resolve(
        &self,
        task_name: &str,
        request: &ValidRequest,
    ) -> Result<Resolved, MasterError> {
        let started = Instant::now();
        let task = Arc::clone(self.task(task_name)?);
        let key = ConstraintKey::new(task_name, &request.constraint);
        let (state, cache_hit) = self.ensemble(&task, &key, request.constraint).await;
        let (members, generation, none_fits) = {
            let mut s = state.lock();
            let (members, generation) = s.begin();
            let none_fits = members.iter().all(|m| !s.pool.contains(m));
            (members, generation, none_fits)
        };
        if members.is_empty() {
            return Err(no_candidate(
                &task,
                &request.constraint,
                &self.served_with(&task, false),
            ));
        }
        // The answer is due `latency_ms` after the request arrived: members answer by
        // then (plus the grace, 0 unless configured) or are left out of the vote; when
        // none is predicted to answer in time, the request waits for their late answer.
        let latency_ms = request.constraint.latency_ms;
        let grace_ms = self.config.deadline_grace.as_secs_f64() * 1e3;
        let due = started + Duration::from_secs_f64((latency_ms + grace_ms) / 1e3);
        let deadline = started
            + Duration::from_secs_f64(response::wait_ms(latency_ms, grace_ms, none_fits) / 1e3);
        Ok(Resolved {
            task,
            key,
            state,
            cache_hit,
            members,
            generation,
            due,
            deadline,
        })
    }

    /// Every member's call, each with its failover to substitutes and its hedge.
    #[tracing::instrument(skip_all, fields(members = resolved.members.len()))]
    async fn dispatch(&self, resolved: &Resolved, request: &ValidRequest) -> Vec<Slot> {
        let spares = Spares::new({
            let s = resolved.state.lock();
            selection::substitutes(
                &resolved.task.candidates,
                &s.pool,
                &resolved.members,
                &s.constraint,
            )
        });
        let call = Call {
            client: &self.client,
            registry: &self.registry,
            task: &resolved.task,
            body: &request.member,
            deadline: resolved.deadline,
            items: request.items,
            hedge_min: self.config.hedge_min,
        };
        join_all(
            resolved
                .members
                .iter()
                .map(|&m| serve_slot(call, m, &spares)),
        )
        .await
    }

    /// What the request teaches: the window of its constraint and the class weights,
    /// from its labels, or later from feedback or a pseudo-label; then O2 when due.
    fn learn(
        &self,
        resolved: &Resolved,
        request: &ValidRequest,
        slots: &[Slot],
        outcome: &BatchOutcome,
        id: &str,
    ) {
        let record = Answered {
            task: Arc::clone(&resolved.task),
            state: Arc::clone(&resolved.state),
            generation: resolved.generation,
            // A substitute's answer is not its member's: the member's slot learns nothing.
            member_classes: resolved
                .members
                .iter()
                .zip(slots)
                .map(|(&member, slot)| match &slot.answer {
                    Ok((model, a)) if *model == member => Some(a.classes.clone()),
                    _ => None,
                })
                .collect(),
            members: resolved.members.clone(),
            ensemble: outcome.class.clone(),
            winning_votes: outcome.winning_votes.clone(),
        };
        match &request.labels {
            Some(labels) => {
                record.learn(labels);
                self.maybe_measure(&record, request, labels, resolved.deadline);
            }
            None => {
                self.maybe_pseudo_label(&record, request, resolved.deadline);
                self.recent.remember(id.to_owned(), record);
            }
        }
        self.revisit(&resolved.task, &resolved.key, &resolved.state);
    }

    /// O2 at the end of the key's interval; a change is published to the shared cache.
    fn revisit(&self, task: &TaskTable, key: &ConstraintKey, state: &Mutex<KeyState>) {
        let change = {
            let mut s = state.lock();
            if !s.due(self.config.interval) {
                return;
            }
            s.revisit(
                &self.served(task),
                self.config.interval,
                &self.config.selection,
                task.recorded.as_ref(),
            )
        };
        if let Some(change) = change {
            let kind = match change {
                Adjustment::Prune(_) => "prune",
                Adjustment::Add(_) => "add",
                Adjustment::Revert(_) => "revert",
                Adjustment::Refit(_) => "refit",
                Adjustment::Measured(_) => "measured",
                Adjustment::Keep => "keep",
            };
            let (members, window_accuracy) = {
                let s = state.lock();
                (names(task, &s.members), s.window_accuracy())
            };
            let now_s = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.traffic.decided(
                key.as_str(),
                &change,
                members.clone(),
                window_accuracy,
                now_s,
            );
            tracing::info!(%key, kind, ?members, "O2 changed an ensemble");
            metrics::counter!("cocktail_master_selection_changes_total", "kind" => kind)
                .increment(1);
            self.publish(task, key, state);
        }
    }

    /// Every n-th unlabelled request also goes to the candidates outside the ensemble,
    /// in the background; what the others agree on becomes each candidate's pseudo-label
    /// ([`Answered::learn_pseudo`]).
    fn maybe_pseudo_label(&self, record: &Answered, request: &ValidRequest, deadline: Instant) {
        let every = self.config.pseudo_label_every;
        if every == 0
            || !self
                .unlabelled
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every)
        {
            return;
        }
        let asking = self.ask_the_others(record, request, deadline);
        let (record, items) = (record.clone(), request.items);
        tokio::spawn(async move {
            let all = asking.await;
            record.learn_pseudo(&all, items);
        });
    }

    /// Under measured selection, every n-th labelled request also goes to the
    /// candidates outside the ensemble, in the background; the items, with every
    /// candidate's answer and their labels, join the constraint's buffer.
    fn maybe_measure(
        &self,
        record: &Answered,
        request: &ValidRequest,
        labels: &[usize],
        deadline: Instant,
    ) {
        let every = self.config.shadow_every;
        if self.config.selection.rule != Rule::Measured
            || every == 0
            || !self
                .labelled
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(every)
        {
            return;
        }
        let asking = self.ask_the_others(record, request, deadline);
        let (state, labels) = (Arc::clone(&record.state), labels.to_vec());
        let models = record.task.models.len();
        tokio::spawn(async move {
            let all = asking.await;
            let mut state = state.lock();
            for (item, &label) in labels.iter().enumerate() {
                let mut answers = vec![None; models];
                for (m, classes) in &all {
                    if let (Some(slot), Some(&class)) = (answers.get_mut(*m), classes.get(item)) {
                        *slot = u16::try_from(class).ok();
                    }
                }
                if let Ok(label) = u16::try_from(label) {
                    state.remember(Labelled { label, answers });
                }
            }
        });
    }

    /// The answers of every candidate of the request's constraint: the members' own
    /// (from `record`) and, called now within the request's latency target, the others'.
    fn ask_the_others(
        &self,
        record: &Answered,
        request: &ValidRequest,
        deadline: Instant,
    ) -> impl std::future::Future<Output = Vec<(usize, Vec<usize>)>> + Send + 'static {
        let others: Vec<usize> = {
            let s = record.state.lock();
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
        let task = Arc::clone(&record.task);
        let (client, registry_pool) = (self.client.clone(), Arc::clone(&self.registry));
        let (body, items) = (request.member.clone(), request.items);
        // The shadow calls get the request's own latency target: a candidate slower than
        // that could not have served it anyway.
        let budget = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs_f64(request.constraint.latency_ms / 1e3));
        async move {
            let deadline = Instant::now() + budget;
            let classes = task.labels.len();
            let shadow = join_all(others.iter().map(|&m| {
                call_member(
                    &client,
                    &registry_pool,
                    &task.models[m],
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
            all
        }
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
        let labels = match crate::serving::request::labels(&answered.task, label, items) {
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
        answered.learn(&labels);
        let key = ConstraintKey::new(&answered.task.name, &answered.state.lock().constraint);
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

/// No model's predicted response time fits the latency target.
fn no_candidate(task: &TaskTable, c: &Constraint, served: &[selection::Candidate]) -> MasterError {
    let fastest = served
        .iter()
        .map(|m| m.latency_ms)
        .fold(f64::INFINITY, f64::min);
    MasterError::invalid(
        "latency_ms",
        format!(
            "no model of task `{}` answers within {} ms end to end; the fastest takes {fastest:.3} ms to infer alone",
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
