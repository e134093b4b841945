//! The resource controller: one actor task runs the shared control loop
//! ([`cocktail_policy::control`]) on live measurements: every interval it measures the
//! load, predicts it one provisioning horizon ahead and sizes the pools; every reactive
//! interval it checks SLO violations; on a spot interruption it stops routing to the
//! doomed instance and launches a replacement (MArk §4.5); every health interval it
//! replaces instances that are dead, hung or never registered ([`health`]). The simulator
//! runs the same loop, so both make the same decisions from the same measurements. The
//! provider carries out the decisions, one at a time; the store keeps them with their
//! reasons.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use std::time::Duration;

use cocktail_common::catalog::{self, Catalog, InstanceType};
use cocktail_common::latency::BatchLatency;
use cocktail_common::{Profile, Zoo};
use cocktail_policy::autoscale::{self, Action, Decision, InstanceState, Offer};
pub use cocktail_policy::control::Policy;
use cocktail_policy::control::{
    self, Control, ControlConfig, IntervalReport, Measurements, PoolMeasure,
};
use cocktail_policy::predict::{self, Predictor, PredictorKind};
use cocktail_policy::ribbon::IntervalSearch;
use cocktail_policy::selection::Candidate;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::resources::provider::{
    InstanceRecord, InstanceStatus, Interruption, LaunchSpec, Provider, now_s,
};
use crate::resources::store::{
    ControlStepRecord, DecisionRecord, SpotPriceRecord, Store, UtilisationRecord,
};
use crate::serving::usage::Snapshot;
use crate::{Master, MasterError};

mod admission;
mod cluster;
mod health;
mod mixes;
mod report;
mod standbys;
mod zoo;

pub use mixes::{MixConfig, Optimiser};
pub use report::{CostReport, PoolReport};

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The shared loop's periods, horizon, policy and autoscaler settings. Its
    /// `sizes_pools` is set by the controller: off when a mix optimiser sizes the pools
    /// (an instance the reactive check added would spoil Ribbon's measurement window and
    /// be reconciled away at the next interval).
    pub control: ControlConfig,
    pub predictor: PredictorKind,
    /// Buy spot when its price is under the bid (else on-demand).
    pub spot: bool,
    /// Instance types the controller may buy (empty: all of the catalog).
    pub instance_types: Vec<String>,
    /// Models whose pools it manages (empty: every model of the zoo); named models are
    /// pinned (always in use).
    pub models: Vec<String>,
    /// Track SLO violations over each model's last M member calls (MArk §4.4) instead
    /// of over the last reactive interval.
    pub slo_last_requests: Option<usize>,
    /// Stopped burstable instances kept per pool, resumed on a spot interruption
    /// (MArk §4.5).
    pub standbys: usize,
    /// Keep every step of the control loop (measurements and decisions) in the store.
    pub record_steps: bool,
    /// Choose each pool's instance mix with Ribbon or Kairos instead of the autoscaler.
    pub mix: Option<MixConfig>,
    /// How often running instances are checked against the registry.
    pub health_interval: Duration,
    /// Time a running instance has to register its worker before it is replaced.
    pub register_within: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            control: ControlConfig::default(),
            predictor: PredictorKind::Auto,
            spot: true,
            instance_types: Vec::new(),
            models: Vec::new(),
            slo_last_requests: None,
            standbys: 0,
            record_steps: false,
            mix: None,
            health_interval: Duration::from_secs(1),
            register_within: Duration::from_secs(120),
        }
    }
}

/// What the controller knows of one managed model: its profile, its single-request
/// latency and its batch latency per type (both as slow as the workers emulate them).
#[derive(Debug, Clone)]
struct ModelInfo {
    profile: Option<Profile>,
    latency_ms: f64,
    batch_latency: Option<BatchLatency>,
}

impl ModelInfo {
    fn of(m: &cocktail_common::zoo::ModelEntry, scale: f64) -> Self {
        Self {
            profile: m.profile.clone(),
            latency_ms: Candidate::of(m).scaled(scale).latency_ms,
            batch_latency: m
                .profile
                .as_ref()
                .and_then(BatchLatency::fit)
                .map(|l| l.scaled(scale)),
        }
    }
}

#[derive(Debug)]
pub struct Controller {
    master: Arc<Master>,
    pub provider: Arc<dyn Provider>,
    catalog: Catalog,
    /// The managed models; a zoo reload adds and removes some (`zoo`).
    models: RwLock<HashMap<String, ModelInfo>>,
    config: ControllerConfig,
    /// The loop's state until the actor takes it, and when the loop started.
    control: Mutex<Option<Control>>,
    started: f64,
    /// The last interval's report, for `/v1/pools`.
    last_interval: Mutex<Option<IntervalReport>>,
    /// Usage at the last interval, for the mix optimisers' satisfaction.
    last_usage: Mutex<Snapshot>,
    /// Spot notices workers forward (EC2), handed to the actor.
    notices: mpsc::UnboundedSender<Interruption>,
    notices_in: Mutex<Option<mpsc::UnboundedReceiver<Interruption>>>,
    /// Held while a decision is carried out: launches and terminations happen one at a
    /// time whichever part of the controller (loop, health, manual mix) decided them.
    executing: tokio::sync::Mutex<()>,
    pub store: Arc<dyn Store>,
    standbys: Mutex<Standbys>,
    searches: Mutex<HashMap<String, IntervalSearch>>,
    health: Mutex<health::HealthState>,
    /// Registrations admitted against a listing, by instance id (`admission`).
    admitted: Mutex<admission::Admitted>,
    /// Models a zoo reload added whose pools are launched once an ensemble uses them.
    adopted: Mutex<HashSet<String>>,
    /// Models kept at their minimum whatever the load: `--models`, then as reloads
    /// remove models (and add them, when `--models` named every model).
    pinned: RwLock<HashSet<String>>,
    /// Whether `--models` named every model of the zoo at start, as `cocktail up` does:
    /// a reload pins the models it adds too.
    pins_every_model: bool,
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
        let control_config = ControlConfig {
            sizes_pools: config.mix.is_none(),
            ..config.control.clone()
        };
        let predictor: Box<dyn Predictor> = match predict::build(
            config.predictor,
            control_config.steps_per_day(),
            control_config.lead_steps(),
        ) {
            Some(predictor) => predictor,
            None => Box::new(crate::resources::learned::Learned::load(
                &zoo.root().join(crate::resources::learned::MODEL_FILE),
                None,
            )?),
        };
        for t in &config.instance_types {
            if catalog.get(t).is_none() {
                return Err(MasterError::invalid(
                    "instance_types",
                    format!("`{t}` is not in the catalog"),
                ));
            }
        }
        let scale = master.config.speed_scale;
        let mut models = HashMap::new();
        for m in zoo.models() {
            if !config.models.is_empty() && !config.models.contains(&m.name) {
                continue;
            }
            models.insert(m.name.clone(), ModelInfo::of(m, scale));
        }
        for m in &config.models {
            if !models.contains_key(m) {
                return Err(MasterError::invalid(
                    "models",
                    format!("`{m}` is not in the zoo"),
                ));
            }
        }
        master.manage(models.keys().cloned());
        master.launches_on(
            catalog
                .types
                .iter()
                .filter(|t| allowed(&config.instance_types, t))
                .map(|t| t.name.clone())
                .collect(),
        );
        let pins_every_model = !config.models.is_empty()
            && zoo.models().iter().all(|m| config.models.contains(&m.name));
        let pinned = RwLock::new(config.models.iter().cloned().collect());
        let (notices, notices_in) = mpsc::unbounded_channel();
        let started = now_s();
        Ok(Arc::new(Self {
            control: Mutex::new(Some(Control::new(control_config, predictor, started))),
            started,
            last_interval: Mutex::new(None),
            last_usage: Mutex::new(master.usage.snapshot()),
            notices,
            notices_in: Mutex::new(Some(notices_in)),
            executing: tokio::sync::Mutex::new(()),
            master,
            provider,
            catalog,
            models: RwLock::new(models),
            config,
            store,
            standbys: Mutex::new(Standbys::default()),
            searches: Mutex::new(HashMap::new()),
            health: Mutex::default(),
            admitted: Mutex::default(),
            adopted: Mutex::default(),
            pinned,
            pins_every_model,
        }))
    }

    /// Starts the controller's actor: a warm start (every pool at its minimum), then the
    /// control loop, the health checks and the spot notices, in one task, until
    /// `shutdown` is cancelled. Calling it again does nothing.
    pub fn spawn(self: &Arc<Self>, shutdown: CancellationToken) {
        let control = self.control.lock().take();
        let notices = self.notices_in.lock().take();
        let (Some(control), Some(notices)) = (control, notices) else {
            return;
        };
        let controller = Arc::clone(self);
        tokio::spawn(async move { controller.run(control, notices, shutdown).await });
    }

    async fn run(
        self: Arc<Self>,
        mut control: Control,
        mut notices: mpsc::UnboundedReceiver<Interruption>,
        shutdown: CancellationToken,
    ) {
        let mut provider_notices = self.provider.interruptions();
        self.warm_start(&mut control).await;
        let health_every = self.config.health_interval;
        let mut next_health = tokio::time::Instant::now();
        // Interruptions a blind step could not act on, and when to look again.
        let mut carried = Vec::new();
        let mut blind_until = tokio::time::Instant::now();
        loop {
            let until_due = Duration::from_secs_f64((control.next_due() - now_s()).max(0.0));
            let wake = (tokio::time::Instant::now() + until_due)
                .max(blind_until)
                .min(next_health);
            let mut arrived = Vec::new();
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(wake) => {}
                Some(notice) = notices.recv() => arrived.push(notice),
                Some(notice) = async {
                    match provider_notices.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => arrived.push(notice),
            }
            if tokio::time::Instant::now() >= next_health {
                self.health_step().await;
                self.launch_adopted(&mut control).await;
                next_health = tokio::time::Instant::now() + health_every;
            }
            if tokio::time::Instant::now() < blind_until && arrived.is_empty() {
                continue;
            }
            carried = match self.control_step(&mut control, arrived, carried).await {
                Ok(()) => Vec::new(),
                Err(unhandled) => {
                    blind_until = tokio::time::Instant::now() + health_every;
                    unhandled
                }
            };
        }
    }

    /// Every pool at its minimum before any load is seen; with a mix optimiser, its first
    /// configuration.
    async fn warm_start(&self, control: &mut Control) {
        let (measurements, _) = loop {
            match self.measure(Vec::new()).await {
                Ok(measured) => break measured,
                // Launching minimums into a cluster it cannot see could double it: wait.
                Err(e) => {
                    self.blind("warm start", &e);
                    tokio::time::sleep(self.config.health_interval).await;
                }
            }
        };
        if let Some(mix) = &self.config.mix {
            self.mix_round(mix, &measurements, 0.0).await;
            return;
        }
        for decision in control.warm_start(&measurements) {
            self.execute("predictive", 0.0, decision).await;
        }
    }

    /// Runs the loop at the current time until nothing more is due: measure, step, carry
    /// out. Notices of spot interruptions are handled first.
    /// Returns the interruptions not yet acted on when the provider could not list the
    /// instances (the step decided nothing).
    async fn control_step(
        &self,
        control: &mut Control,
        notices: Vec<Interruption>,
        carried: Vec<control::Interruption>,
    ) -> Result<(), Vec<control::Interruption>> {
        let now = now_s();
        let mut interruptions = carried;
        for notice in notices {
            self.stop_routing(&notice);
            if !self.resume_standby(&notice).await {
                interruptions.push(control::Interruption {
                    id: notice.id,
                    pool: notice.model,
                    instance_type: notice.instance_type,
                    reason: notice.reason,
                });
            }
        }
        while !interruptions.is_empty() || control.due(now) {
            let (measurements, records) = match self.measure(interruptions.clone()).await {
                Ok(measured) => measured,
                // The interruptions wait for the next step; the loop is due again then.
                Err(e) => {
                    self.blind("control", &e);
                    return Err(interruptions);
                }
            };
            interruptions.clear();
            let step = control.step(&measurements, now);
            if self.config.record_steps {
                self.store.save(&ControlStepRecord {
                    start: self.started,
                    at: now,
                    predictor: self.config.predictor,
                    config: control.config().clone(),
                    measurements: measurements.clone(),
                    decisions: step.decisions.clone(),
                });
            }
            let predicted = step.interval.as_ref().map_or(0.0, |r| r.predicted);
            for (trigger, decision) in step.decisions {
                self.execute(trigger.name(), predicted, decision).await;
            }
            if let Some(report) = step.interval {
                self.closed_interval(&report, &measurements, &records).await;
            }
        }
        Ok(())
    }

    /// After a predictive interval: its figures into the metrics and the store, the mix
    /// optimisers' turn, the cold standbys, the costs.
    async fn closed_interval(
        &self,
        report: &IntervalReport,
        measurements: &Measurements,
        records: &[InstanceRecord],
    ) {
        metrics::gauge!("cocktail_master_load_rps").set(report.rate);
        metrics::gauge!("cocktail_master_predicted_rps").set(report.predicted);
        let now = now_s();
        self.store.save(&UtilisationRecord {
            at: now,
            rate: report.rate,
            predicted: report.predicted,
            requests: report.requests,
        });
        for ty in self.allowed_types() {
            self.store.save(&SpotPriceRecord {
                at: now,
                instance_type: ty.name.clone(),
                price: self.provider.spot_price(ty),
                on_demand: ty.on_demand_per_hour,
            });
        }
        *self.last_interval.lock() = Some(report.clone());
        if let Some(mix) = &self.config.mix {
            self.mix_round(mix, measurements, report.predicted).await;
        }
        for (trigger, decision) in self.tend_standbys(records, measurements, report) {
            self.execute(trigger, report.predicted, decision).await;
        }
        self.publish_costs().await;
    }

    /// One interval of every pool's mix optimiser, for a predicted load of `predicted`.
    async fn mix_round(&self, mix: &MixConfig, measurements: &Measurements, predicted: f64) {
        let latest = {
            let snapshot = self.master.usage.snapshot();
            let mut last = self.last_usage.lock();
            let delta = snapshot.since(&last);
            *last = snapshot;
            delta
        };
        let weights: HashMap<String, f64> = {
            let models = self.models.read();
            self.last_interval
                .lock()
                .as_ref()
                .map(|r| {
                    r.pools
                        .iter()
                        .filter(|p| models.contains_key(&p.model))
                        .map(|p| (p.model.clone(), p.weight))
                        .collect()
                })
                .unwrap_or_default()
        };
        for pool in &measurements.pools {
            let satisfaction = latest
                .models
                .get(&pool.model)
                .filter(|u| u.requests > 0)
                .map(|u| 1.0 - u.misses as f64 / u.requests as f64);
            let demand = predicted * weights.get(&pool.model).copied().unwrap_or(0.0);
            for decision in self.mix_step(mix, pool, demand, satisfaction) {
                self.execute("mix", predicted, decision).await;
            }
        }
    }

    fn allowed_types(&self) -> impl Iterator<Item = &InstanceType> {
        self.catalog
            .types
            .iter()
            .filter(|t| allowed(&self.config.instance_types, t))
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

    /// The calls an instance of `ty` takes at once for the model: its packing factor,
    /// with the hop counted as the registry counts it ([`crate::config::MasterConfig::hop_slots`]).
    fn slots(&self, info: Option<&ModelInfo>, ty: &InstanceType) -> u32 {
        let gpu = &self.catalog.gpu;
        let packing_factor =
            catalog::packing_factor(info.and_then(|m| m.profile.as_ref()), ty, gpu);
        let latency = info.and_then(|m| m.batch_latency.as_ref());
        self.master
            .config
            .hop_slots()
            .on_type(packing_factor, latency, ty, gpu)
    }

    /// What each type costs a pool now (spot under the bid, else on-demand), and how
    /// fast the model runs there.
    fn offers_for(&self, model: &str) -> Vec<Offer> {
        let info = self.models.read().get(model).cloned();
        let info = info.as_ref();
        self.allowed_types()
            .map(|ty| {
                let latency_ms = info.map_or(0.0, |m| {
                    m.batch_latency
                        .map_or(m.latency_ms, |l| l.ms_on(ty, &self.catalog.gpu, 1))
                });
                Offer::priced(
                    ty,
                    self.slots(info, ty),
                    latency_ms,
                    self.provider.spot_price(ty),
                    self.catalog.bid(ty),
                    self.config.spot,
                )
            })
            .collect()
    }

    /// What the control loop sees now: the usage counters, every managed pool with its
    /// instances and offers, and `interruptions`. Interrupted instances still count
    /// until they go: the interruption's replacement is launched by the loop, and
    /// counting neither would make the next interval launch a second one. A pool is in
    /// use, as in the simulator, while some ensemble uses its model (its latency target
    /// the tightest of theirs); before the first ensemble, and for models pinned with
    /// `--models`, always.
    async fn measure(
        &self,
        interruptions: Vec<control::Interruption>,
    ) -> Result<(Measurements, Vec<InstanceRecord>), MasterError> {
        let records = self.live_instances().await?;
        let usage = self.master.usage.snapshot();
        let recent = self
            .config
            .slo_last_requests
            .map(|count| self.master.usage.recent_misses(count));
        let idle: HashMap<String, f64> = self
            .master
            .registry
            .view()
            .into_iter()
            .map(|v| (v.id, v.idle_ms as f64 / 1000.0))
            .collect();
        let now = now_s();
        let standbys = self.standbys.lock().all.clone();
        let in_use = self.master.models_in_use();
        let mut models: Vec<(String, ModelInfo)> = self.models.read().clone().into_iter().collect();
        models.sort_by(|a, b| a.0.cmp(&b.0));
        let pools = models
            .iter()
            .map(|(model, info)| {
                let own = || records.iter().filter(move |r| &r.model == model);
                let instances = own()
                    .filter(|r| {
                        !matches!(r.status, InstanceStatus::Stopped | InstanceStatus::Failed)
                            && !standbys.contains(&r.id)
                    })
                    .map(|r| InstanceState {
                        id: r.id.clone(),
                        instance_type: r.instance_type.clone(),
                        spot: r.spot,
                        packing_factor: self
                            .catalog
                            .get(&r.instance_type)
                            .map_or(1, |ty| self.slots(Some(info), ty)),
                        idle_s: idle.get(&r.id).copied().unwrap_or(now - r.launched_at),
                        price_per_hour: r.price_per_hour,
                    })
                    .collect();
                let used = usage.models.get(model);
                PoolMeasure {
                    model: model.clone(),
                    latency_ms: info.latency_ms,
                    calls: used.map_or(0, |u| u.requests),
                    misses: used.map_or(0, |u| u.misses),
                    recent_miss_share: recent
                        .as_ref()
                        .map(|r| r.get(model).copied().unwrap_or(0.0)),
                    instances,
                    booting: own().any(|r| r.status == InstanceStatus::Provisioning),
                    in_use: self.pinned.read().contains(model)
                        || in_use.as_ref().is_none_or(|u| u.contains_key(model)),
                    slo_ms: in_use.as_ref().and_then(|u| u.get(model).copied()),
                    offers: self.offers_for(model),
                }
            })
            .collect();
        let measurements = Measurements {
            requests: usage.arrived,
            pools,
            interruptions,
        };
        Ok((measurements, records))
    }

    /// A spot notice a worker read from its instance metadata (EC2), handed to the
    /// control loop. Returns `false` when the instance is not one this controller
    /// launched.
    pub async fn worker_notice(&self, id: &str, action: &str) -> bool {
        let records = match self.live_instances().await {
            Ok(records) => records,
            Err(e) => {
                self.blind("notice", &e);
                return false;
            }
        };
        let Some(record) = records.into_iter().find(|r| r.id == id) else {
            return false;
        };
        let notice = Interruption {
            id: record.id,
            model: record.model,
            instance_type: record.instance_type,
            reason: if action == "rebalance" {
                "capacity-rebalance recommendation".to_owned()
            } else {
                format!("spot interruption notice ({action})")
            },
            notice: Duration::from_secs_f64(self.catalog.spot.notice_seconds),
        };
        self.notices.send(notice).is_ok()
    }

    /// No new work for an instance about to be interrupted as soon as another instance
    /// of its pool can take it (at the latest a second before it goes).
    fn stop_routing(&self, notice: &Interruption) {
        let master = Arc::clone(&self.master);
        let (model, id) = (notice.model.clone(), notice.id.clone());
        let last_moment =
            tokio::time::Instant::now() + notice.notice.saturating_sub(Duration::from_secs(1));
        tokio::spawn(async move {
            let registry = &master.registry;
            while !registry.serves_besides(&model, &id) && tokio::time::Instant::now() < last_moment
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            registry.drain(&id);
        });
    }

    /// Resumes a cold standby of the interrupted instance's pool (MArk §4.5), if it
    /// has one; `false` when it has none and the loop should launch a replacement.
    async fn resume_standby(&self, notice: &Interruption) -> bool {
        let records = match self.live_instances().await {
            Ok(records) => records,
            Err(e) => {
                self.blind("standby", &e);
                return false;
            }
        };
        let cold = {
            let standbys = self.standbys.lock();
            records
                .iter()
                .find(|r| {
                    r.model == notice.model
                        && r.status == InstanceStatus::Stopped
                        && standbys.all.contains(&r.id)
                })
                .map(|r| r.id.clone())
        };
        let Some(id) = cold else {
            return false;
        };
        self.standbys.lock().active.insert(id.clone());
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
        true
    }

    async fn execute(&self, trigger: &str, predicted: f64, decision: Decision) {
        let _one_at_a_time = self.executing.lock().await;
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
                                self.store.save(&record);
                                if trigger == "standby" {
                                    self.standbys.lock().all.insert(record.id.clone());
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
                self.admitted.lock().forget(id);
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
                self.admitted.lock().forget(id);
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
        self.store.save(&DecisionRecord {
            at: now_s(),
            trigger: trigger.to_owned(),
            predicted,
            decision,
            instances: outcome,
        });
    }
}

/// Whether the controller may launch `ty` (`instance_types` empty: every catalog type).
fn allowed(instance_types: &[String], ty: &InstanceType) -> bool {
    instance_types.is_empty() || instance_types.contains(&ty.name)
}

fn decision_id(decision: &Decision) -> String {
    match &decision.action {
        Action::Terminate { id } | Action::Resume { id } | Action::Stop { id } => id.clone(),
        Action::Launch { instance_type, .. } => instance_type.clone(),
    }
}
