//! The resource controller: every interval it measures the load, predicts it one
//! provisioning horizon ahead, and runs the autoscaler ([`crate::autoscale`]) over the
//! pools; every reactive interval it checks SLO violations; on a spot interruption it
//! stops routing to the doomed instance and launches a replacement (mark.txt §4.5); every
//! health interval it replaces instances that are dead, hung or never registered
//! ([`health`]). The provider carries out the decisions; the store keeps them with their
//! reasons.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cocktail_common::catalog::{self, Catalog, InstanceType};
use cocktail_common::{Profile, Zoo};
use serde::Serialize;
use serde_json::json;

use crate::autoscale::{self, Action, AutoscaleConfig, Decision, InstanceState, Offer, PoolState};
use crate::predict::{self, Predictor};
use crate::provider::{InstanceRecord, InstanceStatus, Interruption, LaunchSpec, Provider, now_s};
use crate::store::{Collection, Store};
use crate::usage::Snapshot;
use crate::{Master, MasterError};

mod admission;
mod health;
mod mixes;
mod standbys;

use mixes::MixSearch;
pub use mixes::{MixConfig, Optimiser};

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Ts: how often the predictive autoscaler runs (Cocktail: 1 minute).
    pub interval: Duration,
    /// How often SLO violations are checked (Cocktail: 10 s).
    pub reactive_interval: Duration,
    /// Tp: how far ahead the load is predicted (Cocktail: 10 minutes).
    pub horizon: Duration,
    /// The importance-sampling window (Cocktail: 5 minutes).
    pub importance_window: Duration,
    /// `mwa`, `ewma`, `linear`, `holt-winters` or `learned` (the ONNX MLP).
    pub predictor: String,
    pub autoscale: AutoscaleConfig,
    /// Buy spot when its price is under the bid (else on-demand).
    pub spot: bool,
    /// Instance types the controller may buy (empty: all of the catalog).
    pub instance_types: Vec<String>,
    /// Models whose pools it manages (empty: every model of the zoo).
    pub models: Vec<String>,
    /// Which provisioning policy runs every interval.
    pub policy: Policy,
    /// How long a launch takes to serve (MArk's launch overhead).
    pub launch_time: Duration,
    /// Track SLO violations over each model's last M member calls (MArk §4.4) instead
    /// of over the last reactive interval.
    pub slo_last_requests: Option<usize>,
    /// Stopped burstable instances kept per pool, resumed on a spot interruption
    /// (mark.txt §4.5).
    pub standbys: usize,
    /// Choose each pool's instance mix with Ribbon or Kairos instead of the autoscaler.
    pub mix: Option<MixConfig>,
    /// How often running instances are checked against the registry.
    pub health_interval: Duration,
    /// Time a running instance has to register its worker before it is replaced.
    pub register_within: Duration,
}

/// The predictive provisioning policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Cocktail's Algorithm 2: importance-weighted demand at T + Tp, cheapest cover.
    #[default]
    Cocktail,
    /// MArk's Algorithm 1: greedy least cost per request over the next m steps.
    Mark,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            reactive_interval: Duration::from_secs(10),
            horizon: Duration::from_secs(600),
            importance_window: Duration::from_secs(300),
            predictor: "ewma".into(),
            autoscale: AutoscaleConfig::default(),
            spot: true,
            instance_types: Vec::new(),
            models: Vec::new(),
            policy: Policy::Cocktail,
            launch_time: Duration::from_secs(60),
            slo_last_requests: None,
            standbys: 0,
            mix: None,
            health_interval: Duration::from_secs(1),
            register_within: Duration::from_secs(120),
        }
    }
}

/// What the controller knows of one managed model.
#[derive(Debug, Clone)]
struct ModelInfo {
    profile: Option<Profile>,
    latency_ms: f64,
}

/// The last view of a pool, for `/v1/pools`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PoolReport {
    pub model: String,
    pub weight: f64,
    pub demand: f64,
    pub capacity: f64,
    pub instances: usize,
    pub requests: u64,
}

#[derive(Debug)]
struct Measures {
    last: Snapshot,
    last_reactive: Snapshot,
    /// Per-interval request deltas within the importance window.
    window: VecDeque<Snapshot>,
    predicted: f64,
    pools: Vec<PoolReport>,
}

#[derive(Debug)]
pub struct Controller {
    master: Arc<Master>,
    pub provider: Arc<dyn Provider>,
    catalog: Catalog,
    models: HashMap<String, ModelInfo>,
    config: ControllerConfig,
    predictor: Mutex<Box<dyn Predictor>>,
    measures: Mutex<Measures>,
    pub store: Arc<dyn Store>,
    standbys: Mutex<Standbys>,
    searches: Mutex<HashMap<String, MixSearch>>,
    health: Mutex<health::HealthState>,
}

/// The cold standbys: every standby's id, and those resumed to cover an interruption.
#[derive(Debug, Default)]
struct Standbys {
    all: HashSet<String>,
    active: HashSet<String>,
}

impl Controller {
    pub fn new(
        master: Arc<Master>,
        provider: Arc<dyn Provider>,
        catalog: Catalog,
        zoo: &Zoo,
        store: Arc<dyn Store>,
        config: ControllerConfig,
    ) -> Result<Arc<Self>, MasterError> {
        let steps_per_day = (86_400.0 / config.interval.as_secs_f64().max(1e-3)).round() as usize;
        let predictor: Box<dyn Predictor> = if config.predictor == "learned" {
            Box::new(crate::learned::Learned::load(
                &zoo.root().join(crate::learned::MODEL_FILE),
                None,
            )?)
        } else {
            predict::by_name(&config.predictor, steps_per_day.max(1)).ok_or_else(|| {
                MasterError::invalid(
                    "predictor",
                    format!(
                        "`{}` is not one of mwa, ewma, linear, holt-winters, learned",
                        config.predictor
                    ),
                )
            })?
        };
        for t in &config.instance_types {
            if catalog.get(t).is_none() {
                return Err(MasterError::invalid(
                    "instance_types",
                    format!("`{t}` is not in the catalog"),
                ));
            }
        }
        let mut models = HashMap::new();
        for m in zoo.models() {
            if !config.models.is_empty() && !config.models.contains(&m.name) {
                continue;
            }
            let latency_ms = m
                .profile
                .as_ref()
                .and_then(|p| p.latency_us(1, 1))
                .map_or(1000.0, |us| us / 1000.0);
            models.insert(
                m.name.clone(),
                ModelInfo {
                    profile: m.profile.clone(),
                    latency_ms,
                },
            );
        }
        for m in &config.models {
            if !models.contains_key(m) {
                return Err(MasterError::invalid(
                    "models",
                    format!("`{m}` is not in the zoo"),
                ));
            }
        }
        Ok(Arc::new(Self {
            measures: Mutex::new(Measures {
                last: master.usage.snapshot(),
                last_reactive: master.usage.snapshot(),
                window: VecDeque::new(),
                predicted: 0.0,
                pools: Vec::new(),
            }),
            master,
            provider,
            catalog,
            models,
            predictor: Mutex::new(predictor),
            config,
            store,
            standbys: Mutex::new(Standbys::default()),
            searches: Mutex::new(HashMap::new()),
            health: Mutex::default(),
        }))
    }

    /// Runs the predictive, reactive, health and interruption loops until the runtime
    /// stops.
    pub fn spawn(self: &Arc<Self>) {
        let health = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(health.config.health_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                health.health_step().await;
            }
        });
        let predictive = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(predictive.config.interval);
            loop {
                tick.tick().await;
                predictive.predictive_step().await;
            }
        });
        let reactive = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(reactive.config.reactive_interval);
            tick.tick().await; // the first tick is immediate; measure a whole interval first
            loop {
                tick.tick().await;
                reactive.reactive_step().await;
            }
        });
        if let Some(mut notices) = self.provider.interruptions() {
            let controller = Arc::clone(self);
            tokio::spawn(async move {
                while let Some(notice) = notices.recv().await {
                    controller.interrupted(notice).await;
                }
            });
        }
    }

    fn allowed_types(&self) -> impl Iterator<Item = &InstanceType> {
        self.catalog.types.iter().filter(|t| {
            self.config.instance_types.is_empty() || self.config.instance_types.contains(&t.name)
        })
    }

    /// Up to two types a fleet may launch for `model` instead of `chosen`.
    fn alternates(&self, model: &str, chosen: &str, spot: bool) -> Vec<(InstanceType, f64)> {
        let offers = self.offers_for(model);
        let Some(offer) = offers
            .iter()
            .find(|o| o.instance_type == chosen && o.spot == spot)
        else {
            return Vec::new();
        };
        autoscale::alternates(offer, &offers, 2)
            .into_iter()
            .filter_map(|(name, weight)| Some((self.catalog.get(&name)?.clone(), weight)))
            .collect()
    }

    /// What each type costs a pool now: spot under the bid, else on-demand.
    fn offers(&self, pool: &PoolState) -> Vec<Offer> {
        self.offers_for(&pool.model)
    }

    fn offers_for(&self, model: &str) -> Vec<Offer> {
        let profile = self.models.get(model).and_then(|m| m.profile.as_ref());
        self.allowed_types()
            .map(|ty| {
                Offer::priced(
                    ty,
                    catalog::packing_factor(profile, ty, &self.catalog.gpu),
                    self.provider.spot_price(ty),
                    self.catalog.bid(ty),
                    self.config.spot,
                )
            })
            .collect()
    }

    async fn live_instances(&self) -> Vec<InstanceRecord> {
        match self.provider.describe().await {
            Ok(records) => records
                .into_iter()
                .filter(InstanceRecord::is_live)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list instances");
                Vec::new()
            }
        }
    }

    /// The pools as the autoscaler sees them. Interrupted instances still count until they
    /// go: the interruption handler launches their replacements, and counting neither
    /// would make this step launch a second one.
    fn pools(
        &self,
        records: &[InstanceRecord],
        requests: &HashMap<String, u64>,
        slo: &HashMap<String, f64>,
    ) -> Vec<PoolState> {
        let idle: HashMap<String, f64> = self
            .master
            .registry
            .view()
            .into_iter()
            .map(|v| (v.id, v.idle_ms as f64 / 1000.0))
            .collect();
        let now = now_s();
        let standbys = self
            .standbys
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .all
            .clone();
        let mut names: Vec<&String> = self.models.keys().collect();
        names.sort();
        names
            .into_iter()
            .map(|model| {
                let info = &self.models[model];
                let instances = records
                    .iter()
                    .filter(|r| {
                        &r.model == model
                            && !matches!(r.status, InstanceStatus::Stopped | InstanceStatus::Failed)
                            && !standbys.contains(&r.id)
                    })
                    .map(|r| InstanceState {
                        id: r.id.clone(),
                        instance_type: r.instance_type.clone(),
                        spot: r.spot,
                        packing_factor: self.catalog.get(&r.instance_type).map_or(1, |ty| {
                            catalog::packing_factor(info.profile.as_ref(), ty, &self.catalog.gpu)
                        }),
                        idle_s: idle.get(&r.id).copied().unwrap_or(now - r.launched_at),
                        price_per_hour: r.price_per_hour,
                    })
                    .collect();
                PoolState {
                    model: model.clone(),
                    latency_ms: info.latency_ms,
                    requests: requests.get(model).copied().unwrap_or(0),
                    instances,
                    slo_violations: slo.get(model).copied().unwrap_or(0.0),
                }
            })
            .collect()
    }

    /// One predictive interval (Algorithm 2).
    pub async fn predictive_step(&self) {
        let interval_s = self.config.interval.as_secs_f64().max(1e-3);
        let steps = ((self.config.horizon.as_secs_f64() / interval_s).round() as usize).max(1);
        let window_len =
            ((self.config.importance_window.as_secs_f64() / interval_s).round() as usize).max(1);
        let snapshot = self.master.usage.snapshot();
        let (predicted, total, requests) = {
            let mut m = self.measures.lock().unwrap_or_else(|p| p.into_inner());
            let delta = snapshot.since(&m.last);
            m.last = snapshot;
            let served = delta.requests;
            let rate = served as f64 / interval_s;
            let predicted = {
                let mut predictor = self.predictor.lock().unwrap_or_else(|p| p.into_inner());
                predictor.observe(rate);
                predictor.forecast(steps)
            };
            m.window.push_back(delta);
            while m.window.len() > window_len {
                m.window.pop_front();
            }
            m.predicted = predicted;
            let total: u64 = m.window.iter().map(|d| d.requests).sum();
            let mut requests: HashMap<String, u64> = HashMap::new();
            for d in &m.window {
                for (model, u) in &d.models {
                    *requests.entry(model.clone()).or_default() += u.requests;
                }
            }
            metrics::gauge!("cocktail_master_load_rps").set(rate);
            metrics::gauge!("cocktail_master_predicted_rps").set(predicted);
            self.store.record(
                Collection::Utilisation,
                json!({ "at": now_s(), "rate": rate, "predicted": predicted, "requests": served }),
            );
            (predicted, total, requests)
        };
        let now = now_s();
        for ty in self.allowed_types() {
            self.store.record(
                Collection::SpotPrices,
                json!({ "at": now, "instance_type": ty.name, "price": self.provider.spot_price(ty), "on_demand": ty.on_demand_per_hour }),
            );
        }
        let records = self.live_instances().await;
        let pools = self.pools(&records, &requests, &HashMap::new());
        if let Some(mix) = &self.config.mix {
            let latest = {
                let m = self.measures.lock().unwrap_or_else(|p| p.into_inner());
                m.window.back().cloned()
            };
            for pool in &pools {
                let usage = latest.as_ref().and_then(|d| d.models.get(&pool.model));
                let satisfaction = usage
                    .filter(|u| u.requests > 0)
                    .map(|u| 1.0 - u.misses as f64 / u.requests as f64);
                let demand = predicted * pool.weight(total);
                for decision in self.mix_step(mix, pool, demand, satisfaction) {
                    self.execute("mix", predicted, decision).await;
                }
            }
            self.publish_costs().await;
            return;
        }
        let decisions = match self.config.policy {
            Policy::Cocktail => autoscale::plan(
                predicted,
                total,
                &pools,
                &|p| self.offers(p),
                &self.config.autoscale,
            ),
            Policy::Mark => {
                let forecast: Vec<f64> = {
                    let predictor = self.predictor.lock().unwrap_or_else(|p| p.into_inner());
                    (1..=steps).map(|k| predictor.forecast(k)).collect()
                };
                autoscale::mark(
                    &forecast,
                    total,
                    &pools,
                    &|p| self.offers(p),
                    &self.config.autoscale,
                    self.config.interval.as_secs_f64(),
                    self.config.launch_time.as_secs_f64(),
                )
            }
        };
        {
            let mut m = self.measures.lock().unwrap_or_else(|p| p.into_inner());
            m.pools = pools
                .iter()
                .map(|p| {
                    let weight = p.weight(total);
                    PoolReport {
                        model: p.model.clone(),
                        weight,
                        demand: predicted * weight,
                        capacity: p.capacity(&self.config.autoscale),
                        instances: p.instances.len(),
                        requests: p.requests,
                    }
                })
                .collect();
        }
        self.publish_costs().await;
        for decision in decisions {
            self.execute("predictive", predicted, decision).await;
        }
        for (trigger, decision) in self.tend_standbys(&records, &pools, predicted, total) {
            self.execute(trigger, predicted, decision).await;
        }
    }

    /// The reactive check: one more instance for pools missing deadlines.
    pub async fn reactive_step(&self) {
        // A mix optimiser owns the pools: an instance added here would spoil Ribbon's
        // measurement window and be reconciled away at the next interval.
        if self.config.mix.is_some() {
            return;
        }
        let snapshot = self.master.usage.snapshot();
        let delta = {
            let mut m = self.measures.lock().unwrap_or_else(|p| p.into_inner());
            let delta = snapshot.since(&m.last_reactive);
            m.last_reactive = snapshot;
            delta
        };
        let records = self.live_instances().await;
        // Cocktail samples the violations of the last interval; MArk those of the last M
        // member calls per model.
        let shares: HashMap<String, f64> = match self.config.slo_last_requests {
            Some(count) => self.master.usage.recent_misses(count),
            None => delta
                .models
                .iter()
                .filter(|(_, u)| u.requests > 0)
                .map(|(model, u)| (model.clone(), u.misses as f64 / u.requests as f64))
                .collect(),
        };
        // A pool still provisioning help is not asked again.
        let slo: HashMap<String, f64> = shares
            .into_iter()
            .filter(|(model, _)| {
                !records
                    .iter()
                    .any(|r| &r.model == model && r.status == InstanceStatus::Provisioning)
            })
            .collect();
        let pools = self.pools(&records, &HashMap::new(), &slo);
        for decision in autoscale::react(&pools, &|p| self.offers(p), &self.config.autoscale) {
            self.execute("reactive", 0.0, decision).await;
        }
    }

    /// A spot notice a worker read from its instance metadata (EC2). Returns `false` when
    /// the instance is not one this controller launched.
    pub async fn worker_notice(self: &Arc<Self>, id: &str, action: &str) -> bool {
        let Some(record) = self.live_instances().await.into_iter().find(|r| r.id == id) else {
            return false;
        };
        self.interrupted(Interruption {
            id: record.id,
            model: record.model,
            instance_type: record.instance_type,
            reason: if action == "rebalance" {
                "capacity-rebalance recommendation".to_owned()
            } else {
                format!("spot interruption notice ({action})")
            },
            notice: Duration::from_secs_f64(self.catalog.spot.notice_seconds),
        })
        .await;
        true
    }

    /// A spot notice: a replacement on-demand (a burstable standby when the catalog allows
    /// one, mark.txt §4.5), and no new work for the doomed instance as soon as another
    /// instance of its pool can take it (at the latest a second before it goes).
    async fn interrupted(self: &Arc<Self>, notice: Interruption) {
        let controller = Arc::clone(self);
        let (model, id) = (notice.model.clone(), notice.id.clone());
        let last_moment =
            tokio::time::Instant::now() + notice.notice.saturating_sub(Duration::from_secs(1));
        tokio::spawn(async move {
            let registry = &controller.master.registry;
            while !registry.serves_besides(&model, &id) && tokio::time::Instant::now() < last_moment
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            registry.drain(&id);
        });
        let records = self.live_instances().await;
        let cold = {
            let standbys = self.standbys.lock().unwrap_or_else(|p| p.into_inner());
            records
                .iter()
                .find(|r| {
                    r.model == notice.model
                        && r.status == InstanceStatus::Stopped
                        && standbys.all.contains(&r.id)
                })
                .map(|r| r.id.clone())
        };
        if let Some(id) = cold {
            self.standbys
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .active
                .insert(id.clone());
            let decision = Decision {
                pool: notice.model.clone(),
                action: Action::Resume { id: id.clone() },
                weight: 0.0,
                demand: 0.0,
                capacity: 0.0,
                reason: format!(
                    "resumes cold standby {id} for {} after a spot interruption: {}",
                    notice.id, notice.reason
                ),
            };
            self.execute("interruption", 0.0, decision).await;
            return;
        }
        let standby = self
            .allowed_types()
            .find(|t| t.burstable)
            .or_else(|| self.catalog.get(&notice.instance_type))
            .cloned();
        let Some(ty) = standby else {
            return;
        };
        let decision = Decision {
            pool: notice.model.clone(),
            action: Action::Launch {
                instance_type: ty.name.clone(),
                count: 1,
                spot: false,
                price_per_hour: ty.on_demand_per_hour,
            },
            weight: 0.0,
            demand: 0.0,
            capacity: 0.0,
            reason: format!(
                "replaces {} after a spot interruption: {}",
                notice.id, notice.reason
            ),
        };
        self.execute("interruption", 0.0, decision).await;
    }

    async fn execute(&self, trigger: &str, predicted: f64, decision: Decision) {
        let mut outcome = Vec::new();
        match &decision.action {
            Action::Launch {
                instance_type,
                count,
                spot,
                price_per_hour,
            } => {
                let Some(ty) = self.catalog.get(instance_type).cloned() else {
                    return;
                };
                let alternates = if trigger == "standby" {
                    Vec::new()
                } else {
                    self.alternates(&decision.pool, instance_type, *spot)
                };
                for _ in 0..*count {
                    let spec = LaunchSpec {
                        model: decision.pool.clone(),
                        instance_type: ty.clone(),
                        spot: *spot,
                        price_per_hour: *price_per_hour,
                        alternates: alternates.clone(),
                    };
                    match self.provider.launch(spec).await {
                        Ok(records) => {
                            for record in records {
                                self.store.record(Collection::Instances, json!(record));
                                if trigger == "standby" {
                                    self.standbys
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .all
                                        .insert(record.id.clone());
                                }
                                outcome.push(record.id);
                            }
                        }
                        Err(e) => outcome.push(format!("failed: {e}")),
                    }
                }
            }
            Action::Resume { id } => {
                if let Err(e) = self.provider.start(id).await {
                    outcome.push(format!("failed: {e}"));
                } else {
                    outcome.push(id.clone());
                }
            }
            Action::Stop { id } => {
                self.master.registry.drain(id);
                let (provider, id) = (Arc::clone(&self.provider), id.clone());
                tokio::spawn(async move {
                    if let Err(e) = provider.stop(&id).await {
                        tracing::warn!(%id, error = %e, "stop failed");
                    }
                });
                outcome.push(decision_id(&decision));
            }
            Action::Terminate { id } => {
                // No new work first; the worker drains on SIGTERM.
                self.master.registry.drain(id);
                let (provider, id) = (Arc::clone(&self.provider), id.clone());
                tokio::spawn(async move {
                    if let Err(e) = provider.terminate(&id).await {
                        tracing::warn!(%id, error = %e, "terminate failed");
                    }
                });
                outcome.push(decision_id(&decision));
            }
        }
        tracing::info!(trigger, pool = %decision.pool, reason = %decision.reason, ?outcome, "autoscaler decision");
        metrics::counter!("cocktail_master_autoscaler_decisions_total", "trigger" => trigger.to_owned()).increment(1);
        self.store.record(
            Collection::Decisions,
            json!({ "at": now_s(), "trigger": trigger, "predicted": predicted, "decision": decision, "instances": outcome }),
        );
    }

    /// Per-second cost of every instance so far, per pool and in total, into `/metrics`.
    async fn publish_costs(&self) {
        let cost = self.cost().await;
        for (pool, usd) in &cost.pools {
            metrics::gauge!("cocktail_master_cost_usd", "pool" => pool.clone()).set(*usd);
        }
        metrics::gauge!("cocktail_master_cost_usd_total").set(cost.total);
    }

    /// What the instances have cost, per pool and in total, and per 1,000 requests.
    pub async fn cost(&self) -> CostReport {
        let now = now_s();
        let records = self.provider.describe().await.unwrap_or_default();
        let mut pools: HashMap<String, f64> = HashMap::new();
        for r in &records {
            *pools.entry(r.model.clone()).or_default() += r.cost(now);
        }
        let total: f64 = pools.values().sum();
        let requests = self.master.usage.snapshot().requests;
        CostReport {
            per_1000_requests: (requests > 0).then(|| total / requests as f64 * 1000.0),
            pools: pools.into_iter().collect(),
            total,
            requests,
        }
    }

    /// Terminates every live instance (the master is stopping); workers drain first.
    pub async fn shutdown(&self) {
        let live = self.live_instances().await;
        let stops = live.iter().map(|r| self.provider.terminate(&r.id));
        for result in futures_util::future::join_all(stops).await {
            if let Err(e) = result {
                tracing::warn!(error = %e, "terminate at shutdown failed");
            }
        }
        self.provider.close().await;
    }

    pub fn pools_report(&self) -> (f64, Vec<PoolReport>) {
        let m = self.measures.lock().unwrap_or_else(|p| p.into_inner());
        (m.predicted, m.pools.clone())
    }
}

fn decision_id(decision: &Decision) -> String {
    match &decision.action {
        Action::Terminate { id } | Action::Resume { id } | Action::Stop { id } => id.clone(),
        Action::Launch { instance_type, .. } => instance_type.clone(),
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CostReport {
    pub total: f64,
    pub pools: std::collections::BTreeMap<String, f64>,
    pub requests: u64,
    pub per_1000_requests: Option<f64>,
}
