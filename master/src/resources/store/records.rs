//! The documents of each collection, as types: what the controller writes is checked by
//! the compiler, and what the API and the tests read back has one definition.

use cocktail_policy::autoscale::Decision;
use cocktail_policy::control::{ControlConfig, Measurements, Trigger};
use cocktail_policy::mix::Config;
use cocktail_policy::predict::PredictorKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Collection;
use crate::resources::provider::InstanceRecord;

/// A document of one collection.
pub trait Record: Serialize {
    const COLLECTION: Collection;
}

/// One predictive interval's load: measured and predicted request rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilisationRecord {
    /// Seconds since the Unix epoch.
    pub at: f64,
    /// Requests per second measured over the interval, and predicted for the horizon.
    pub rate: f64,
    pub predicted: f64,
    /// Requests served in the interval.
    pub requests: u64,
}

impl Record for UtilisationRecord {
    const COLLECTION: Collection = Collection::Utilisation;
}

/// One instance type's prices at one moment, in dollars per hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpotPriceRecord {
    pub at: f64,
    pub instance_type: String,
    pub price: f64,
    pub on_demand: f64,
}

impl Record for SpotPriceRecord {
    const COLLECTION: Collection = Collection::SpotPrices;
}

/// One autoscaler decision with what triggered it and the instances it touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub at: f64,
    /// `predictive`, `reactive`, `interruption`, `standby`, `manual`, ...
    pub trigger: String,
    /// The predicted request rate the decision was made for.
    pub predicted: f64,
    pub decision: Decision,
    /// The instances launched or terminated.
    pub instances: Vec<String>,
}

impl Record for DecisionRecord {
    const COLLECTION: Collection = Collection::Decisions;
}

/// A control step that decided nothing because the provider could not list the
/// instances; kept with the decisions so that `/v1/decisions` shows the gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlindRecord {
    pub at: f64,
    /// Always `blind`.
    pub trigger: String,
    /// `control`, `warm start`, `health`, `notice` or `standby`.
    pub step: String,
    /// The provider's error.
    pub error: String,
}

impl Record for BlindRecord {
    const COLLECTION: Collection = Collection::Decisions;
}

/// A pool's instance mix chosen by Ribbon or Kairos (or set by hand), with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixDecisionRecord {
    pub at: f64,
    pub model: String,
    /// `ribbon`, `kairos` or `manual`.
    pub optimiser: String,
    /// The instance types, in the order of the counts in `current` and `config`.
    pub types: Vec<String>,
    /// Instances of each type before, when the optimiser chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Config>,
    /// Instances of each type wanted.
    pub config: Config,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<f64>,
    /// Requests per second the pool must serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<f64>,
    /// What the optimiser based the choice on (its own shape per optimiser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Value>,
}

impl Record for MixDecisionRecord {
    const COLLECTION: Collection = Collection::MixDecisions;
}

/// An instance as the provider described it.
impl Record for InstanceRecord {
    const COLLECTION: Collection = Collection::Instances;
}

/// One step of the control loop (`--record-control-steps`): what it measured and
/// decided, with what it needs to replay it (`policy::control::Control::new(config,
/// predictor, start)`, then `step(measurements, at)` for each step in order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlStepRecord {
    /// When the loop started and when this step ran (seconds since the Unix epoch).
    pub start: f64,
    pub at: f64,
    pub predictor: PredictorKind,
    pub config: ControlConfig,
    pub measurements: Measurements,
    pub decisions: Vec<(Trigger, Decision)>,
}

impl Record for ControlStepRecord {
    const COLLECTION: Collection = Collection::ControlSteps;
}
