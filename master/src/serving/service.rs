//! The request path (docs/design.md): constraint key → ensemble (in-process table, then the
//! shared cache, then O1) → fan-out to the members' pools with a deadline → per-item
//! vote → labels (real, or pseudo from the full candidate set) → O2 at interval ends.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use std::time::{Duration, Instant};

use cocktail_common::Zoo;
use cocktail_common::catalog::Catalog;
use cocktail_common::latency::BatchLatency;
use cocktail_service::net::{ClusterClient, ThreadClients};

use crate::config::MasterConfig;
use crate::error::{MasterError, MemberFailure};
use crate::serving::answer::{self, Answer, Returns};
use crate::serving::cache::SharedCache;
use crate::serving::dispatch::{Call, MemberError};
use crate::serving::failover::{Slot, Spares, Waiting, gather};
use crate::serving::registry::{Registry, Speed};
use crate::serving::request::ValidRequest;
use crate::serving::state::{ConstraintKey, Ensembles, KeyState, Recent};
use crate::serving::tasks::{self, TaskTable};
use crate::serving::traffic::{Outcome, Traffic};
use crate::serving::usage::Usage;
use cocktail_policy::response;
use cocktail_policy::selection::{self, Constraint};
use cocktail_policy::voting::{Scheme, Voter, vote_batch};

mod learning;
mod reload;
mod selecting;

pub use reload::{ModelIndex, ZooChange};

/// Every task's table, by name.
pub type Tasks = BTreeMap<String, Arc<TaskTable>>;

/// A request's ensemble, as [`Master::resolve`] found it.
struct Resolved {
    task: Arc<TaskTable>,
    key: ConstraintKey,
    /// The constraint's selection; `None` for a pinned ensemble, which learns nothing.
    state: Option<Arc<Mutex<KeyState>>>,
    cache_hit: bool,
    members: Vec<usize>,
    generation: u64,
    /// When the answer is due and whether to wait past it for every member.
    waiting: Waiting,
    /// When every member call ends: [`response::LATE_LIMIT_MS`] after arrival at the
    /// earliest, so that members late for `due` still give an answer when none is back
    /// in time; `due` itself under `strict_deadline`.
    deadline: Instant,
}

/// Idle connections a thread's client keeps to each worker: one per concurrent call it
/// may have to make again.
const MEMBER_IDLE_CONNECTIONS: usize = 64;

/// How often a constraint's selection is compared with the shared cache.
const SYNC_PERIOD: Duration = Duration::from_secs(1);

/// The share of the time a request still waits within which admission wants its calls'
/// estimated finish: the estimate is a mean, and a call admitted at the edge fails about
/// every other time. Measured with `tests/tests/overload.rs` while it sent 45 requests
/// a second for 4 s (180 requests, 1 s late limit), three runs each: at 1.0, 29 to 30
/// requests were admitted and then missed the late limit (502); at 0.9, none, the
/// slowest answered in 0.89 to 0.90 s.
const ADMISSION_HEADROOM: f64 = 0.9;

/// Everything the handlers share.
#[derive(Debug)]
pub struct Master {
    pub config: MasterConfig,
    /// Swapped whole by a zoo reload ([`Master::reload_zoo`]); a request keeps the
    /// table it started with.
    tasks: RwLock<Arc<Tasks>>,
    pub registry: Arc<Registry>,
    pub ensembles: Ensembles,
    pub recent: Recent,
    pub cache: Option<SharedCache>,
    /// What the resource controller measures.
    pub usage: Usage,
    /// What each constraint's requests met, and O2's decisions (the dashboard's figures).
    pub traffic: Traffic,
    /// The member calls' HTTP client of the calling thread ([`ThreadClients`]).
    clients: ThreadClients,
    requests: AtomicU64,
    unlabelled: AtomicU64,
    /// Counts the requests `--shadow-every` picks from.
    shadow_turn: AtomicU64,
    /// Distinguishes generated request ids of masters started at different times.
    epoch: u64,
    /// What a resource controller manages, once one does.
    managed: RwLock<Option<Managed>>,
}

/// The pools a resource controller manages and the instance types it launches them on.
#[derive(Debug, Default)]
struct Managed {
    /// Selectable while no worker serves them: the controller launches a pool once an
    /// ensemble uses it.
    models: HashSet<String>,
    /// Catalog names; a managed model with no worker up is predicted on the fastest.
    types: Vec<String>,
}

impl Master {
    /// Builds the master from the zoo; the Redis cache (if any) connects lazily, so this
    /// must run inside the Tokio runtime.
    pub fn new(config: MasterConfig) -> Result<Self, MasterError> {
        let zoo = Zoo::load(Zoo::locate(config.zoo.as_deref())?)?;
        // The same file check as `cocktail zoo check`: refuse to start on a broken zoo.
        zoo.check_files()?;
        let tasks = tasks::from_zoo(
            &zoo,
            config.weight_prior,
            config.speed_scale,
            config.scheme.rule(),
        )
        .into_iter()
        .map(|(name, table)| (name, Arc::new(table)))
        .collect();
        let tasks = RwLock::new(Arc::new(tasks));
        let cache = config
            .redis_url
            .as_deref()
            .map(|url| {
                SharedCache::connect(url, "cocktail", config.cache_ttl, config.redis_timeout)
            })
            .transpose()?;
        let (roots, secret) = (config.tls_roots.clone(), config.cluster_secret.clone());
        let clients = ThreadClients::new(move || {
            ClusterClient::new(&roots, secret.as_ref(), MEMBER_IDLE_CONNECTIONS)
        })
        .map_err(|e| MasterError::Internal(format!("HTTP client: {e}")))?;
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let registry = Arc::new(
            Registry::with_speeds(speeds(&zoo, config.speed_scale)?)
                .counting_hop(config.hop_slots()),
        );
        Ok(Self {
            recent: Recent::new(config.feedback_capacity),
            config,
            tasks,
            registry,
            unlabelled: AtomicU64::new(0),
            shadow_turn: AtomicU64::new(0),
            ensembles: Ensembles::default(),
            cache,
            usage: Usage::default(),
            traffic: Traffic::default(),
            clients,
            requests: AtomicU64::new(0),
            epoch,
            managed: RwLock::new(None),
        })
    }

    /// Times a round trip to a newly registered instance's readiness probe, in the
    /// background, on a connection that member calls served by the same thread then
    /// reuse: its pool's first overhead estimate, so that the first selection counts the
    /// hop before any member call is measured. (Five warm probes and their median were
    /// tried: the median of idle round trips, about 0.3 ms, is far below a member call's
    /// overhead under load, about 3 ms, and made selection pick cheap models that then
    /// missed; sim_vs_live's live accuracy met fell from 0.81 to 0.40.)
    pub fn probe(&self, model: &str, url: &str) {
        let Some(pool) = self.registry.pool(model) else {
            return;
        };
        let client = match self.clients.get() {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, model, "cannot probe a new instance");
                return;
            }
        };
        let ready = match format!("{url}/v2/health/ready").parse::<http::Uri>() {
            Ok(ready) => ready,
            Err(error) => {
                tracing::warn!(%error, model, url, "cannot probe a new instance");
                return;
            }
        };
        tokio::spawn(async move {
            let started = Instant::now();
            let answered = client.get(&ready, Duration::from_secs(2)).await;
            if answered.is_ok_and(|r| r.status.is_success()) {
                pool.observe_probe(started.elapsed());
            }
        });
    }

    /// Hands the pools of `models` to a resource controller (adding to those it has):
    /// they stay selectable with no worker, and the controller keeps a pool only while
    /// some ensemble uses it.
    pub fn manage(&self, models: impl IntoIterator<Item = String>) {
        self.managed
            .write()
            .get_or_insert_with(Managed::default)
            .models
            .extend(models);
    }

    /// The instance types (catalog names) the resource controller launches managed pools
    /// on: until a pool has a worker up, its model is predicted on the fastest of them,
    /// as the simulator predicts it, not on the profile's host.
    pub fn launches_on(&self, types: Vec<String>) {
        self.managed
            .write()
            .get_or_insert_with(Managed::default)
            .types = types;
    }

    /// The controller no longer manages `model` (removed from the zoo).
    pub fn unmanage(&self, model: &str) {
        if let Some(managed) = self.managed.write().as_mut() {
            managed.models.remove(model);
        }
    }

    /// Every task's table now.
    pub fn tasks(&self) -> Arc<Tasks> {
        Arc::clone(&self.tasks.read())
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
        for (_, keyed) in keys {
            let (task, state) = (keyed.task, keyed.state);
            let (latency_ms, members) = {
                let s = state.lock();
                (s.constraint.latency_ms, s.in_use())
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

    pub fn task(&self, name: &str) -> Result<Arc<TaskTable>, MasterError> {
        let tasks = self.tasks();
        tasks
            .get(name)
            .cloned()
            .ok_or_else(|| MasterError::UnknownTask {
                task: name.to_owned(),
                known: tasks
                    .keys()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
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
        let served = self.tasks().contains_key(task_name);
        if served {
            self.usage.arrive();
        }
        let answer = self.answer(task_name, request, started).await;
        if served {
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
        let resolved = match &request.pinned {
            Some(members) => self.resolve_pinned(task_name, &request, members)?,
            None => self.resolve(task_name, &request).await?,
        };
        let client = self
            .clients
            .get()
            .map_err(|e| MasterError::Internal(format!("HTTP client: {e}")))?;
        let waiting = Instant::now();
        let slots = self.dispatch(&client, &resolved, &request).await;
        let wait = waiting.elapsed();
        let task = &resolved.task;
        // A member missed when it gave no answer in time, or answered only after the
        // answer was due (a request that waited for late members), and only when its call
        // waited for a free slot on its pool and the pool's typical call, without a
        // queue, fits the target (or no call has been answered yet): then the queue made
        // it late and more instances would have helped. A call that found a free slot and
        // was late anyway met the spread of the hop (measured: 10-25 % of `mlp_med`'s
        // calls on a 26.5 ms target its calls meet at the 90th percentile, launching an
        // instance every few seconds that changed nothing). A target below any call's time
        // (one only the profiled inference alone fits, without the hop) is no pool's miss
        // either. The typical call decides, not the queue seen when the answer comes,
        // which changes from one instant to the next.
        let budget = resolved.waiting.due.saturating_duration_since(started);
        let fits_alone = |m: usize| {
            self.registry
                .pool(&task.models[m])
                .and_then(|p| p.typical_call())
                .is_none_or(|call| call <= budget)
        };
        self.usage.record(slots.iter().flat_map(|slot| {
            let late = slot.finished > resolved.waiting.due;
            let pools = |m: usize| slot.queued && fits_alone(m);
            let answered = slot
                .answer
                .as_ref()
                .ok()
                .map(|(m, _)| (*m, late && pools(*m)));
            slot.failures
                .iter()
                .map(move |(m, e)| (*m, matches!(e, MemberError::Deadline) && pools(*m)))
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
            interval: self.config.interval,
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
        let task = Arc::clone(&request.task);
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
        let (waiting, deadline) = self.timing(started, request, none_fits);
        self.admit(&task, &members, deadline, request.constraint.latency_ms)?;
        Ok(Resolved {
            task,
            key,
            state: Some(state),
            cache_hit,
            members,
            generation,
            waiting,
            deadline,
        })
    }

    /// A pinned ensemble (`models`), served as named once every member has a worker.
    fn resolve_pinned(
        &self,
        task_name: &str,
        request: &ValidRequest,
        members: &[usize],
    ) -> Result<Resolved, MasterError> {
        let started = Instant::now();
        let task = Arc::clone(&request.task);
        if let Some(&idle) = members
            .iter()
            .find(|&&m| !self.registry.serves(&task.models[m]))
        {
            let served: Vec<&String> = task
                .models
                .iter()
                .filter(|m| self.registry.serves(m))
                .collect();
            return Err(MasterError::invalid(
                "models",
                format!(
                    "`{}` has no worker serving it now; served: {served:?}",
                    task.models[idle]
                ),
            ));
        }
        let (waiting, deadline) = self.timing(started, request, false);
        self.admit(&task, members, deadline, request.constraint.latency_ms)?;
        Ok(Resolved {
            key: ConstraintKey::new(task_name, &request.constraint),
            task,
            state: None,
            cache_hit: false,
            members: members.to_vec(),
            generation: 0,
            waiting,
            deadline,
        })
    }

    /// Admission under overload: a request is refused at once (429, `Retry-After`) when
    /// some member's pool has so many calls queued that this one, after its wait for a
    /// slot, could not finish a typical call before the request stops waiting
    /// (`deadline`: the latency target under `strict_deadline`, else the late limit), so
    /// that it would fail anyway. The estimate is a mean, so it must fit within
    /// [`ADMISSION_HEADROOM`] of that time: a request admitted at the edge fails about
    /// every other time. The client learns at once that it should back off, and the
    /// queue stops growing.
    fn admit(
        &self,
        task: &TaskTable,
        members: &[usize],
        deadline: Instant,
        latency_ms: f64,
    ) -> Result<(), MasterError> {
        let target = deadline
            .saturating_duration_since(Instant::now())
            .mul_f64(ADMISSION_HEADROOM);
        for &m in members {
            let model = &task.models[m];
            let Some(backlog) = self.registry.pool(model).and_then(|p| p.backlog()) else {
                continue;
            };
            // Only a queue makes a pool overloaded: a call that is late on its own (a
            // target below any call's time) is the late answer's or strict deadline's
            // business, not a reason to refuse.
            if !backlog.wait.is_zero() && backlog.wait + backlog.call > target {
                metrics::counter!("cocktail_master_shed_total", "model" => model.clone())
                    .increment(1);
                return Err(MasterError::Overloaded {
                    model: model.clone(),
                    queued: backlog.queued,
                    slots: backlog.slots,
                    wait_ms: backlog.wait.as_secs_f64() * 1e3,
                    latency_ms,
                    retry_after: backlog.wait.max(Duration::from_secs(1)),
                });
            }
        }
        Ok(())
    }

    /// When a request arriving at `started` is due, and when its member calls end. The
    /// answer is due `latency_ms` (plus the grace, 0 unless configured) after arrival,
    /// with the members back by then. When none is back, the request takes the first late
    /// answer within [`response::LATE_LIMIT_MS`] of arrival rather than fail, unless the
    /// client asked for `strict_deadline`. When no member is predicted to answer in time
    /// (`none_fits`), it waits that long for all of them.
    fn timing(
        &self,
        started: Instant,
        request: &ValidRequest,
        none_fits: bool,
    ) -> (Waiting, Instant) {
        let latency_ms = request.constraint.latency_ms;
        let grace_ms = self.config.deadline_grace.as_secs_f64() * 1e3;
        let due_ms = latency_ms + grace_ms;
        let until_ms = if request.strict_deadline {
            due_ms
        } else {
            response::wait_ms(latency_ms, grace_ms, true)
        };
        let at = |ms: f64| started + Duration::from_secs_f64(ms / 1e3);
        let waiting = Waiting {
            due: at(due_ms),
            all: none_fits && !request.strict_deadline,
        };
        (waiting, at(until_ms))
    }

    /// Every member's call, each with its failover to substitutes and its hedge.
    #[tracing::instrument(skip_all, fields(members = resolved.members.len()))]
    async fn dispatch(
        &self,
        client: &ClusterClient,
        resolved: &Resolved,
        request: &ValidRequest,
    ) -> Vec<Slot> {
        // A pinned ensemble is served as named: no member stands in for another.
        let substitutes = || {
            resolved.state.as_ref().map_or_else(Vec::new, |state| {
                let s = state.lock();
                selection::substitutes(
                    &resolved.task.candidates,
                    &s.pool,
                    &resolved.members,
                    &s.constraint,
                )
            })
        };
        let spares = Spares::new(&substitutes);
        let call = Call {
            client,
            registry: &self.registry,
            task: &resolved.task,
            body: &request.member,
            deadline: resolved.deadline,
            measured_until: if resolved.waiting.all {
                resolved.deadline
            } else {
                resolved.waiting.due
            },
            items: request.items,
            linger: self.config.linger,
        };
        gather(
            call,
            self.config.hedge_min,
            &resolved.members,
            &spares,
            resolved.waiting,
        )
        .await
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
/// input, 503 when no pool has an instance, 504 when every one was late, else 502
/// listing each member's error.
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
    if errors.iter().all(|e| matches!(e, MemberError::Deadline)) {
        return MasterError::AllMembersLate(failed);
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
