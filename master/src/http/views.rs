//! The JSON bodies the master answers with, besides the OIP and control-plane wire types
//! of `cocktail_common`: the handlers build these, and `/openapi.json` describes them
//! from the same types.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::config::Interval;
use crate::error::MemberFailure;
use crate::resources::controller::PoolReport;
use crate::resources::provider::InstanceRecord;
use crate::serving::answer::Substitute;
use crate::serving::registry::InstanceView;

/// `GET /v2/models`: the tasks served.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskList {
    pub models: Vec<TaskSummary>,
}

/// A task, its labels and its candidate models.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskSummary {
    pub name: String,
    /// Some model of the task has a worker.
    pub ready: bool,
    pub labels: Vec<String>,
    pub models: Vec<ModelSummary>,
}

/// A candidate model of a task, with its profile.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelSummary {
    pub name: String,
    pub accuracy: f64,
    /// Profiled inference latency of one item.
    pub latency_ms: f64,
    /// Predicted response time of a member call now: inference on the fastest type its
    /// pool runs on plus the overhead measured on the pool. Selection compares this with
    /// a request's `latency_ms`. Absent while no worker serves the model.
    pub predicted_ms: Option<f64>,
    /// The part of `predicted_ms` beyond inference: the overhead measured on the pool's
    /// calls; before its first call, once its readiness probe answered, the median of
    /// the measured pools' (of the probes' before any call was measured).
    pub overhead_ms: Option<f64>,
    pub packing_factor: u32,
    /// Some worker serves it.
    pub ready: bool,
}

/// How an answer was made, besides the votes (`parameters` of an OIP answer, fields of a
/// `/v1/classify` answer). Borrowed from the answer: the handlers serialise it once,
/// without copying it first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Provenance<'a> {
    /// The ensemble chosen for the constraint.
    pub models: &'a [String],
    /// Every model asked that gave no answer, and why (members and substitutes).
    pub failed: &'a [MemberFailure],
    /// Members that could not answer in time and the candidates that voted instead.
    pub substitutes: &'a [Substitute],
    /// The voting scheme: `weighted`, `majority` or `average`.
    pub scheme: &'static str,
    pub cache_hit: bool,
    /// Fewer models voted than the ensemble has: some member gave no answer and no
    /// substitute could stand in.
    pub degraded: bool,
    /// The O2 interval: `{"seconds": s}` or `{"requests": n}`.
    #[schema(value_type = Object)]
    pub interval: Interval,
    /// The master's own time up to the vote, in microseconds.
    pub master_us: u64,
    /// Time spent waiting for the members, in microseconds.
    pub wait_us: u64,
    /// The vote was ready within the request's `latency_ms` of its arrival (encoding
    /// the answer adds microseconds); false is an SLO violation.
    pub latency_met: bool,
}

/// `POST /v1/classify`: the answer for the one item.
#[derive(Debug, Serialize, ToSchema)]
pub struct Classified<'a> {
    pub id: &'a str,
    pub task: &'a str,
    pub class: usize,
    pub label: &'a str,
    /// The vote's score per class.
    pub scores: &'a [f64],
    pub votes: Vec<ItemVote<'a>>,
    #[serde(flatten)]
    pub provenance: Provenance<'a>,
}

/// One member's vote on the one item of `/v1/classify`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemVote<'a> {
    pub model: &'a str,
    pub class: usize,
    pub label: &'a str,
    /// The runtime weight its vote carried.
    pub weight: f64,
}

/// The fields of `/v1/classify`, in JSON or as form parts; any other is refused.
pub const CLASSIFY_FIELDS: [&str; 11] = [
    "task",
    "image",
    "text",
    "latency_ms",
    "accuracy",
    "objective",
    "label",
    "scheme",
    "models",
    "strict_deadline",
    "id",
];

/// `POST /v1/classify` as JSON: one image (base64 PNG/JPEG) or one text, and the
/// constraints.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "a schema only: the handler reads the fields one by one, from JSON or a form"
)]
pub struct ClassifyRequest {
    /// The task to classify for, e.g. `fashion` or `sentiment`.
    pub task: String,
    /// An image task's item: a PNG or JPEG, base64.
    #[schema(content_encoding = "base64")]
    pub image: Option<String>,
    /// A text task's item.
    pub text: Option<String>,
    /// The end-to-end response time wanted, in milliseconds (above 0, at most 60,000),
    /// from the request's arrival to its answer: models predicted slower are not chosen,
    /// members not back by then do not vote, and a later answer is an SLO violation.
    #[schema(exclusive_minimum = 0.0, maximum = 60000.0)]
    pub latency_ms: f64,
    /// The accuracy target, above 0 and at most 1.
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub accuracy: f64,
    /// What to favour once both targets are met.
    pub objective: Option<ObjectiveName>,
    /// The true label, to learn from: a class index or a label name.
    #[schema(value_type = Option<Value>)]
    pub label: Option<Value>,
    /// The voting scheme for this request (default `majority`, the vote selection estimates).
    pub scheme: Option<SchemeName>,
    /// Pins the ensemble: these models (comma-separated, or an array of names), each
    /// served by some worker, vote as named; no selection, no substitutes, and the
    /// request teaches selection nothing.
    #[schema(value_type = Option<Value>)]
    pub models: Option<Value>,
    /// When true, members not back by `latency_ms` are not waited for even when none is
    /// (the request then fails with 504); by default the first late answer is taken.
    pub strict_deadline: Option<bool>,
    /// The id to answer with (and to give feedback on); generated when absent.
    pub id: Option<String>,
}

/// `POST /v1/classify` as `multipart/form-data`: the fields of [`ClassifyRequest`] as
/// parts, with `image` a PNG or JPEG file.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "a schema only: the handler reads the parts one by one"
)]
pub struct ClassifyForm {
    pub task: String,
    #[schema(value_type = Option<String>, format = Binary)]
    pub image: Option<Vec<u8>>,
    pub text: Option<String>,
    #[schema(exclusive_minimum = 0.0, maximum = 60000.0)]
    pub latency_ms: f64,
    #[schema(exclusive_minimum = 0.0, maximum = 1.0)]
    pub accuracy: f64,
    pub objective: Option<ObjectiveName>,
    /// A class index or label name.
    pub label: Option<String>,
    pub scheme: Option<SchemeName>,
    /// Model names, comma-separated.
    pub models: Option<String>,
    pub strict_deadline: Option<bool>,
    pub id: Option<String>,
}

/// The 502 (504: all late) when no ensemble member answered: each member's error.
#[derive(Debug, Serialize, ToSchema)]
pub struct MembersFailed {
    pub error: String,
    pub error_type: String,
    pub members: Vec<MemberFailure>,
}

/// `objective` of a constraint.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum ObjectiveName {
    Accuracy,
    Latency,
}

/// `scheme` of a request.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(rename_all = "lowercase")]
pub enum SchemeName {
    Weighted,
    Majority,
    Average,
}

/// `POST /v1/feedback`: the true label of an answered request.
#[derive(Debug, Deserialize, ToSchema)]
pub struct Feedback {
    /// The `id` of the answer.
    pub id: String,
    /// A class index or label name, or an array of them, one per item.
    #[schema(value_type = Value, required = true)]
    pub label: Option<Value>,
}

/// The answer to `POST /v1/feedback`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeedbackApplied {
    pub id: String,
    /// Items whose label was applied.
    pub items: usize,
}

/// `GET /v1/ensembles`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnsembleList {
    pub ensembles: Vec<EnsembleView>,
}

/// The ensemble of one constraint key, with its O2 window.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnsembleView {
    /// `task|latency|accuracy|objective`.
    pub key: String,
    pub members: Vec<String>,
    /// The models O1 chose among.
    pub candidates: Vec<String>,
    /// Bumped whenever O2 changes the members.
    pub generation: u64,
    pub window_labelled: usize,
    /// The ensemble's accuracy on the window's labelled items, once it has some.
    pub window_accuracy: Option<f64>,
    /// Labelled items kept with every candidate's answer (`--selection measured`).
    pub measured_items: usize,
    /// Under `--selection tracking --pace`, the two choices served in turn (`members` is
    /// the one serving now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced: Option<PacedView>,
}

/// A paced mix: the cheaper choice, short of the target, and the dearer one that clears
/// it, in the shares that meet it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PacedView {
    pub cheaper: Vec<String>,
    pub dearer: Vec<String>,
    /// The share of requests the dearer choice serves.
    pub dearer_share: f64,
}

/// `GET /v1/workers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkerList {
    pub workers: Vec<InstanceView>,
}

/// `GET /v1/pools`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolList {
    /// The load predicted for the next interval, requests per second.
    pub predicted_rps: f64,
    pub pools: Vec<PoolReport>,
}

/// `GET /v1/instances`.
#[derive(Debug, Serialize, ToSchema)]
pub struct InstanceList {
    /// `local` or `ec2`.
    pub provider: &'static str,
    pub instances: Vec<InstanceRecord>,
}

/// `GET /v1/decisions` and `GET /v1/mix-decisions`: store documents, newest last.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionList {
    #[schema(value_type = Vec<Object>)]
    pub decisions: Vec<Value>,
}

/// The `limit` query of `/v1/decisions` and `/v1/mix-decisions`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Limit {
    /// How many, newest last (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
}

/// Most instances of one type a mix may ask for.
pub const MAX_MIX_COUNT: u32 = 16;

/// `PUT /v1/pools/{model}/mix`: the instances of each type a pool should have, one
/// entry per type (a type and its count together, so that they cannot disagree).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MixRequest {
    /// 1 to 4 entries, each type once.
    #[schema(min_items = 1, max_items = 4)]
    pub instances: Vec<MixEntry>,
}

/// One instance type of a mix and how many of it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MixEntry {
    /// A catalog instance type.
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub instance_type: String,
    /// Instances of the type, 0 to 16.
    #[serde(deserialize_with = "cocktail_common::whole::one")]
    #[schema(minimum = 0, maximum = 16)]
    pub count: u32,
}

/// The answer to `PUT /v1/pools/{model}/mix`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MixChanged {
    pub model: String,
    /// Instances terminated (their ids) and launched (their types).
    pub changed: Vec<String>,
}
