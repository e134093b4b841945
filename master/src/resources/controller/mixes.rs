//! The controller's side of mixed instance pools: each interval a pool's mix comes from
//! Ribbon (one live measurement per interval) or Kairos (the throughput bound within a
//! budget), the pool is reconciled to it, and the choice and its evidence go to the
//! `mix_decisions` collection. An operator (or the live `ConfigEvaluator`) can also set
//! a mix by hand.

use cocktail_common::catalog::InstanceType;
use serde_json::{Value, json};

use super::{Controller, decision_id};
use crate::MasterError;
use crate::resources::provider::now_s;
use crate::resources::store::MixDecisionRecord;
use cocktail_policy::autoscale::{Action, Decision};
use cocktail_policy::control::PoolMeasure;
use cocktail_policy::kairos;
use cocktail_policy::mix::{self, Config, Space};
use cocktail_policy::ribbon::{IntervalSearch, Settings};

/// The optimiser that chooses a pool's mix of instance types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Optimiser {
    /// Bayesian optimisation, one live measurement window per interval (Ribbon §4).
    Ribbon,
    /// The throughput bound within a budget, no measurement (Kairos §5.2).
    Kairos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MixConfig {
    pub optimiser: Optimiser,
    /// The types a pool may mix, in preference order.
    pub types: Vec<String>,
    /// Kairos: USD per hour a pool may cost.
    pub budget_per_hour: f64,
    /// Kairos: the latency target a batch must meet.
    pub qos_ms: f64,
    /// Ribbon: instances of one type at most.
    pub max_per_type: u32,
}

impl Controller {
    /// Sets `model`'s pool to `counts` instances of `types` now (an operator's choice, or
    /// one measurement of the live [`ConfigEvaluator`](cocktail_policy::mix::ConfigEvaluator)):
    /// launches the missing instances and terminates the extra ones. Returns what changed:
    /// the type of each launch and the id of each termination.
    pub async fn set_mix(
        &self,
        model: &str,
        types: &[String],
        counts: &[u32],
    ) -> Result<Vec<String>, MasterError> {
        if !self.models.read().contains_key(model) {
            return Err(MasterError::UnknownPool {
                model: model.to_owned(),
            });
        }
        let catalog_types = types
            .iter()
            .map(|t| {
                self.catalog.get(t).ok_or_else(|| {
                    MasterError::invalid("types", format!("`{t}` is not in the catalog"))
                })
            })
            .collect::<Result<Vec<&InstanceType>, MasterError>>()?;
        let have: Vec<(String, String, f64)> = self
            .live_instances()
            .await?
            .into_iter()
            .filter(|r| r.model == model)
            .map(|r| (r.id, r.instance_type, 0.0))
            .collect();
        self.store.save(&MixDecisionRecord {
            at: now_s(),
            model: model.to_owned(),
            optimiser: "manual".into(),
            types: types.to_vec(),
            current: None,
            config: counts.to_vec(),
            cost_per_hour: None,
            demand: None,
            evidence: None,
        });
        let reason = format!("set mix {counts:?} of {types:?}");
        let decide = |action: Action| Decision {
            pool: model.to_owned(),
            action,
            weight: 0.0,
            demand: 0.0,
            capacity: 0.0,
            reason: reason.clone(),
        };
        let mut changed = Vec::new();
        for decision in reconcile(&catalog_types, counts, &have, decide) {
            changed.push(decision_id(&decision));
            self.execute("manual", 0.0, decision).await;
        }
        Ok(changed)
    }

    /// One interval of a pool's mix optimiser: the configuration it wants now, recorded
    /// with its evidence, and the decisions that reach it.
    pub(super) fn mix_step(
        &self,
        mix: &MixConfig,
        pool: &PoolMeasure,
        demand: f64,
        satisfaction: Option<f64>,
    ) -> Vec<Decision> {
        let types: Vec<&InstanceType> = mix
            .types
            .iter()
            .filter_map(|t| self.catalog.get(t))
            .collect();
        let space = Space {
            types: types.iter().map(|t| t.name.clone()).collect(),
            prices: types.iter().map(|t| t.on_demand_per_hour).collect(),
            max: vec![mix.max_per_type; types.len()],
        };
        let current: Config = space
            .types
            .iter()
            .map(|n| {
                pool.instances
                    .iter()
                    .filter(|i| &i.instance_type == n)
                    .count() as u32
            })
            .collect();
        let (target, evidence) = match mix.optimiser {
            Optimiser::Kairos => self.kairos_choice(mix, &pool.model, &types, space.clone()),
            Optimiser::Ribbon => {
                let deployed = (!pool.booting).then_some(&current);
                self.ribbon_choice(&pool.model, space.clone(), deployed, demand, satisfaction)
            }
        };
        let Some(target) = target else {
            return Vec::new();
        };
        self.store.save(&MixDecisionRecord {
            at: now_s(),
            model: pool.model.clone(),
            optimiser: format!("{:?}", mix.optimiser).to_lowercase(),
            types: space.types.clone(),
            current: Some(current.clone()),
            config: target.clone(),
            cost_per_hour: Some(space.cost(&target)),
            demand: Some(demand),
            evidence: Some(evidence),
        });
        let have: Vec<(String, String, f64)> = pool
            .instances
            .iter()
            .map(|i| (i.id.clone(), i.instance_type.clone(), i.idle_s))
            .collect();
        let capacity = pool.capacity(&self.config.control.autoscale);
        let reason = format!("{:?} mix {target:?} of {:?}", mix.optimiser, space.types);
        let decide = |action: Action| Decision {
            pool: pool.model.clone(),
            action,
            weight: 0.0,
            demand,
            capacity,
            reason: reason.clone(),
        };
        reconcile(&types, &target, &have, decide)
    }

    /// Kairos (§5.2): every configuration within the budget ranked by its
    /// throughput bound on the pool's recent batch sizes, the pick by similarity.
    fn kairos_choice(
        &self,
        mix: &MixConfig,
        model: &str,
        types: &[&InstanceType],
        space: Space,
    ) -> (Option<Config>, Value) {
        let Some(speed) = self.master.registry.speed(model) else {
            return (None, Value::Null);
        };
        // Before any query the batch mix is unknown: single items.
        let batches = self
            .master
            .registry
            .pool(model)
            .map(|p| p.recent_batches())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| vec![1]);
        let latency = |t: usize, b: usize| {
            types.get(t).map_or(f64::INFINITY, |ty| {
                speed.latency.ms_on(ty, &self.catalog.gpu, b)
            })
        };
        let budget = Space::within_budget(space.types, space.prices, mix.budget_per_hour);
        let configs = budget.configs_within(mix.budget_per_hour);
        let (base, rates) = kairos::type_rates(&batches, types.len(), latency, mix.qos_ms);
        let ranked = kairos::rank(&configs, base, &rates);
        let chosen = kairos::choose_by_similarity(&ranked, base).cloned();
        let top: Vec<_> = ranked.iter().take(10).collect();
        let evidence = json!({
            "batches": batches.len(),
            "base": budget.types.get(base),
            "rates": rates,
            "top_bounds": top,
        });
        (chosen, evidence)
    }

    /// Ribbon (§4), one window per interval ([`IntervalSearch`]): a
    /// configuration is measured by a window it served entirely, and a load change
    /// measures the old optimum again before warm-starting a new search.
    fn ribbon_choice(
        &self,
        model: &str,
        space: Space,
        deployed: Option<&Config>,
        demand: f64,
        satisfaction: Option<f64>,
    ) -> (Option<Config>, Value) {
        let mut searches = self.searches.lock();
        let search = searches
            .entry(model.to_owned())
            .or_insert_with(|| IntervalSearch::new(space, Settings::default()));
        let (next, step) = search.step(deployed, demand, satisfaction);
        let ribbon = search.ribbon();
        let evidence = json!({
            "measured": ribbon.record(),
            "open": ribbon.open(),
            "best": ribbon.best(),
            "satisfaction": satisfaction,
            "settled": step.settled,
            "remeasuring": step.remeasuring,
        });
        (next, evidence)
    }
}

/// The decisions that take a pool from `have` (`(id, type, idle_s)`) to `target`
/// instances of `types`: on-demand launches of the missing, terminations of the extra
/// (the longest idle first). `decide` wraps each action with the pool, figures and reason.
fn reconcile(
    types: &[&InstanceType],
    target: &[u32],
    have: &[(String, String, f64)],
    decide: impl Fn(Action) -> Decision,
) -> Vec<Decision> {
    let names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
    let (launch, terminate) = mix::reconcile(target, &names, have);
    let launches = launch.into_iter().filter_map(|(t, count)| {
        let ty = types.get(t)?;
        Some(decide(Action::Launch {
            instance_type: ty.name.clone(),
            count,
            spot: false,
            price_per_hour: ty.on_demand_per_hour,
        }))
    });
    launches
        .chain(
            terminate
                .into_iter()
                .map(|id| decide(Action::Terminate { id })),
        )
        .collect()
}
