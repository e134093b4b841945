//! Routes and handlers of the master.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{HttpRequest, HttpResponse, web};
use cocktail_common::control::{Deregistration, Heartbeat, Notice, Registered, Registration};
use cocktail_common::oip::{ModelMetadata, TensorMetadata};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::classify::classify_request;
use crate::control::check_registration;
use crate::controller::Controller;
use crate::mix::MAX_TYPES;
use crate::request::{self, MAX_BODY_BYTES};
use crate::service::Answer;
use crate::store::Collection;
use crate::tasks::InputKind;
use crate::{Master, MasterError};

/// Everything the handlers share.
#[derive(Debug)]
pub struct AppState {
    pub master: Arc<Master>,
    pub prometheus: Option<PrometheusHandle>,
    /// The resource controller, when the master manages its own instances.
    pub controller: Option<Arc<Controller>>,
}

impl AppState {
    fn controller(&self) -> Result<&Arc<Controller>> {
        self.controller.as_ref().ok_or(MasterError::NoController)
    }
}

type Result<T> = std::result::Result<T, MasterError>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(64 * 1024)
            .error_handler(|e, _| MasterError::Malformed(e.to_string()).into()),
    )
    .app_data(
        web::QueryConfig::default()
            .error_handler(|e, _| MasterError::invalid("query", e.to_string()).into()),
    )
    .route("/v2", web::get().to(server_metadata))
    .route("/v2/health/live", web::get().to(live))
    .route("/v2/health/ready", web::get().to(ready))
    .route("/v2/models", web::get().to(list_tasks))
    .route("/v2/models/{task}", web::get().to(task_metadata))
    .route("/v2/models/{task}/ready", web::get().to(task_ready))
    .route("/v2/models/{task}/infer", web::post().to(infer))
    .route("/v1/classify", web::post().to(classify))
    .route("/v1/feedback", web::post().to(feedback))
    .route("/v1/ensembles", web::get().to(ensembles))
    .route("/v1/workers", web::get().to(workers))
    .route("/v1/workers/register", web::post().to(register))
    .route("/v1/workers/heartbeat", web::post().to(heartbeat))
    .route("/v1/workers/notice", web::post().to(notice))
    .route("/v1/workers/deregister", web::post().to(deregister))
    .route("/v1/pools", web::get().to(pools))
    .route("/v1/pools/{model}/mix", web::put().to(set_mix))
    .route("/v1/mix-decisions", web::get().to(mix_decisions))
    .route("/v1/instances", web::get().to(instances))
    .route("/v1/decisions", web::get().to(decisions))
    .route("/v1/cost", web::get().to(cost))
    .route("/openapi.json", web::get().to(super::openapi::document))
    .route("/metrics", web::get().to(metrics_text));
}

#[utoipa::path(get, path = "/v2", responses((status = 200, description = "Server metadata")))]
pub async fn server_metadata() -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "name": "cocktail-master",
        "version": env!("CARGO_PKG_VERSION"),
        "extensions": ["cocktail-constraints"],
    }))
}

#[utoipa::path(get, path = "/v2/health/live", responses((status = 200, description = "Alive")))]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().finish()
}

/// Ready when some task has a worker to serve it.
#[utoipa::path(get, path = "/v2/health/ready", responses(
    (status = 200, description = "Some task can be served"),
    (status = 503, description = "No worker registered yet")))]
pub async fn ready(state: web::Data<AppState>) -> HttpResponse {
    let master = &state.master;
    if master.tasks.keys().any(|t| task_is_ready(master, t)) {
        HttpResponse::Ok().finish()
    } else {
        HttpResponse::ServiceUnavailable().finish()
    }
}

fn task_is_ready(master: &Master, task: &str) -> bool {
    master
        .tasks
        .get(task)
        .is_some_and(|t| t.models.iter().any(|m| master.registry.serves(m)))
}

#[utoipa::path(get, path = "/v2/models", responses((status = 200, description = "The tasks served, their models and readiness")))]
pub async fn list_tasks(state: web::Data<AppState>) -> HttpResponse {
    let master = &state.master;
    let tasks: Vec<Value> = master
        .tasks
        .values()
        .map(|t| {
            json!({
                "name": t.name,
                "ready": task_is_ready(master, &t.name),
                "labels": t.labels,
                "models": t.models.iter().zip(&t.candidates).map(|(m, c)| json!({
                    "name": m,
                    "accuracy": c.accuracy,
                    "latency_ms": c.latency_ms,
                    "packing_factor": c.packing_factor,
                    "ready": master.registry.serves(m),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({ "models": tasks }))
}

#[utoipa::path(get, path = "/v2/models/{task}", params(("task" = String, Path)),
    responses((status = 200, body = ModelMetadata), (status = 404, description = "Unknown task")))]
pub async fn task_metadata(
    state: web::Data<AppState>,
    task: web::Path<String>,
) -> Result<HttpResponse> {
    let table = state.master.task(&task)?;
    let tensor = |name: &str, datatype: &str, shape: Vec<i64>| TensorMetadata {
        name: name.into(),
        datatype: datatype.into(),
        shape,
    };
    let inputs = match table.kind {
        InputKind::Image => vec![
            tensor("image", "BYTES", vec![-1]),
            tensor("image", "FP32", vec![-1, 1, -1, -1]),
        ],
        InputKind::Text => vec![
            tensor("text", "BYTES", vec![-1]),
            tensor("input_ids", "INT64", vec![-1, -1]),
            tensor("attention_mask", "INT64", vec![-1, -1]),
        ],
    };
    let classes = table.labels.len() as i64;
    Ok(HttpResponse::Ok().json(ModelMetadata {
        name: table.name.clone(),
        versions: vec!["1".into()],
        platform: "cocktail-ensemble".into(),
        inputs,
        outputs: vec![
            tensor("class", "INT64", vec![-1]),
            tensor("label", "BYTES", vec![-1]),
            tensor("scores", "FP64", vec![-1, classes]),
        ],
    }))
}

#[utoipa::path(get, path = "/v2/models/{task}/ready", params(("task" = String, Path)),
    responses((status = 200, description = "Ready"), (status = 503, description = "No worker yet"), (status = 404, description = "Unknown task")))]
pub async fn task_ready(
    state: web::Data<AppState>,
    task: web::Path<String>,
) -> Result<HttpResponse> {
    state.master.task(&task)?;
    if task_is_ready(&state.master, &task) {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(MasterError::NoWorkers {
            task: task.into_inner(),
        })
    }
}

/// Classifies `n` items with the ensemble chosen for the constraints in `parameters`:
/// `latency_ms` and `accuracy` (required), `objective` (`accuracy` or `latency`),
/// `label` (one per item, to learn from) and `scheme` (`weighted`, `majority`, `average`).
#[utoipa::path(post, path = "/v2/models/{task}/infer", params(("task" = String, Path)),
    request_body = cocktail_common::oip::InferRequest,
    responses(
        (status = 200, description = "Outputs `class`, `label`, `scores`; `parameters` holds the models, votes, weights, cache hit, degraded flag and interval", body = cocktail_common::oip::InferResponse),
        (status = 400, description = "Malformed JSON"),
        (status = 404, description = "Unknown task"),
        (status = 413, description = "Body over 10 MB"),
        (status = 422, description = "Invalid input or constraint, naming the field"),
        (status = 502, description = "No member answered; lists each member's error"),
        (status = 503, description = "No worker registered for the task")))]
pub async fn infer(
    state: web::Data<AppState>,
    task: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse> {
    let started = Instant::now();
    let table = state.master.task(&task)?;
    let body = read_body(payload).await?;
    let request = request::parse_infer(table, body)?;
    let answer = state.master.infer(&task, request).await?;
    timed_json(started, &answer, &oip_response(&answer))
}

/// Encodes the answer and reports the master's own time (everything from the handler's
/// start to the encoded answer, minus waiting for members) in a `Server-Timing` header and
/// in `cocktail_master_overhead_seconds`.
fn timed_json(started: Instant, answer: &Answer, value: &Value) -> Result<HttpResponse> {
    let body = serde_json::to_vec(value)
        .map_err(|e| MasterError::Internal(format!("encoding the answer: {e}")))?;
    let wait = Duration::from_micros(answer.wait_us);
    let own = started.elapsed().saturating_sub(wait);
    metrics::histogram!("cocktail_master_overhead_seconds").record(own.as_secs_f64());
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((
            "Server-Timing",
            format!(
                "master;dur={:.3}, wait;dur={:.3}",
                own.as_secs_f64() * 1e3,
                wait.as_secs_f64() * 1e3
            ),
        ))
        .body(body))
}

async fn read_body(payload: web::Payload) -> Result<bytes::Bytes> {
    match payload.to_bytes_limited(MAX_BODY_BYTES).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(e)) => Err(MasterError::invalid("body", format!("cannot read: {e}"))),
        Err(_) => Err(MasterError::PayloadTooLarge {
            limit: MAX_BODY_BYTES,
        }),
    }
}

/// What every answer reports about how it was made, besides the votes.
fn provenance(answer: &Answer) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("models".into(), json!(answer.models));
    fields.insert("failed".into(), json!(answer.failed));
    fields.insert("scheme".into(), json!(answer.scheme));
    fields.insert("cache_hit".into(), json!(answer.cache_hit));
    fields.insert("degraded".into(), json!(answer.degraded));
    fields.insert("interval".into(), answer.interval.clone());
    fields.insert("master_us".into(), json!(answer.master_us));
    fields.insert("wait_us".into(), json!(answer.wait_us));
    fields
}

fn oip_response(answer: &Answer) -> Value {
    let mut parameters = provenance(answer);
    parameters.insert("votes".into(), json!(answer.votes));
    let n = answer.class.len() as i64;
    let classes = answer.scores.first().map_or(0, Vec::len) as i64;
    json!({
        "model_name": answer.task,
        "id": answer.id,
        "parameters": parameters,
        "outputs": [
            { "name": "class", "datatype": "INT64", "shape": [n], "data": answer.class },
            { "name": "label", "datatype": "BYTES", "shape": [n], "data": answer.label },
            { "name": "scores", "datatype": "FP64", "shape": [n, classes],
              "data": answer.scores.iter().flatten().collect::<Vec<_>>() },
        ],
    })
}

/// Classifies one image or text. JSON `{task, image (base64) | text, latency_ms,
/// accuracy, objective?, label?, scheme?, id?}`, or the same fields as multipart form
/// parts with `image` as a file.
#[utoipa::path(post, path = "/v1/classify",
    request_body(content = Object, description = "task, image (base64 or file part) or text, latency_ms, accuracy, objective, label, scheme, id",
        content_type = "application/json"),
    responses((status = 200, body = Answer), (status = 400, description = "Malformed body"),
        (status = 422, description = "Invalid input or constraint, naming the field")))]
pub async fn classify(
    state: web::Data<AppState>,
    http: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse> {
    let started = Instant::now();
    let (task_name, request) = classify_request(&state.master, http.headers(), payload).await?;
    let answer = state.master.infer(&task_name, request).await?;
    timed_json(started, &answer, &flatten(&answer))
}

/// The one-item answer of `/v1/classify`, without per-item arrays.
fn flatten(answer: &Answer) -> Value {
    let first = |v: &Vec<String>| v.first().cloned().unwrap_or_default();
    let mut fields = provenance(answer);
    fields.insert("id".into(), json!(answer.id));
    fields.insert("task".into(), json!(answer.task));
    fields.insert("class".into(), json!(answer.class.first()));
    fields.insert("label".into(), json!(first(&answer.label)));
    fields.insert("scores".into(), json!(answer.scores.first()));
    let votes: Vec<Value> = answer
        .votes
        .iter()
        .map(|v| {
            json!({
                "model": v.model,
                "class": v.class.first(),
                "label": first(&v.label),
                "weight": v.weight.first(),
            })
        })
        .collect();
    fields.insert("votes".into(), Value::Array(votes));
    Value::Object(fields)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct Feedback {
    pub id: String,
    /// A class index or label name, or one per item.
    #[schema(value_type = Object)]
    pub label: Option<Value>,
}

/// The true label of an answered request: it updates the voting weights and the
/// constraint's O2 window.
#[utoipa::path(post, path = "/v1/feedback", request_body = Feedback,
    responses((status = 200, description = "Applied"), (status = 404, description = "Unknown, already labelled or expired id"),
        (status = 422, description = "Invalid label")))]
pub async fn feedback(
    state: web::Data<AppState>,
    body: web::Json<Feedback>,
) -> Result<HttpResponse> {
    let items = state.master.feedback(&body.id, body.label.as_ref())?;
    Ok(HttpResponse::Ok().json(json!({ "id": body.id, "items": items })))
}

/// The ensemble of every constraint key seen, with its O2 window.
#[utoipa::path(get, path = "/v1/ensembles", responses((status = 200, description = "Ensembles by constraint key")))]
pub async fn ensembles(state: web::Data<AppState>) -> HttpResponse {
    let master = &state.master;
    let all: Vec<Value> = master
        .ensembles
        .snapshot()
        .into_iter()
        .map(|(key, s)| {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            let task = key.split('|').next().unwrap_or_default();
            let names = |ids: &[usize]| -> Vec<String> {
                master
                    .tasks
                    .get(task)
                    .map(|t| ids.iter().map(|&i| t.models[i].clone()).collect())
                    .unwrap_or_default()
            };
            json!({
                "key": key,
                "members": names(&s.members),
                "candidates": names(&s.pool),
                "generation": s.generation,
                "window_labelled": s.window_labelled(),
                "window_accuracy": s.window_accuracy(),
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({ "ensembles": all }))
}

#[utoipa::path(get, path = "/v1/workers", responses((status = 200, body = Vec<crate::registry::InstanceView>)))]
pub async fn workers(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "workers": state.master.registry.view() }))
}

#[utoipa::path(post, path = "/v1/workers/register", request_body = Registration,
    responses((status = 200, body = Registered), (status = 422, description = "Unknown model or bad URL")))]
pub async fn register(
    state: web::Data<AppState>,
    body: web::Json<Registration>,
) -> Result<HttpResponse> {
    let master = &state.master;
    check_registration(&master.tasks, &body)?;
    master.registry.register(&body);
    Ok(HttpResponse::Ok().json(Registered {
        heartbeat_ms: master.config.heartbeat.as_millis() as u64,
    }))
}

#[utoipa::path(post, path = "/v1/workers/heartbeat", request_body = Heartbeat,
    responses((status = 200, description = "Recorded"), (status = 404, description = "Unknown instance: register again")))]
pub async fn heartbeat(
    state: web::Data<AppState>,
    body: web::Json<Heartbeat>,
) -> Result<HttpResponse> {
    if state.master.registry.heartbeat(&body.id, body.draining) {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(MasterError::UnknownInstance {
            id: body.id.clone(),
        })
    }
}

#[utoipa::path(post, path = "/v1/workers/notice", request_body = Notice,
    responses((status = 200, description = "The instance gets no new work"), (status = 404, description = "Unknown instance")))]
pub async fn notice(state: web::Data<AppState>, body: web::Json<Notice>) -> Result<HttpResponse> {
    if body.action == "shutdown" {
        tracing::info!(id = %body.id, "worker shutting down: draining it");
    } else {
        tracing::warn!(id = %body.id, action = %body.action, time = ?body.time, "worker notice: draining it");
    }
    metrics::counter!("cocktail_master_worker_notices_total", "action" => notice_kind(&body.action))
        .increment(1);
    // An instance the controller launched is replaced first and drained once the
    // replacement serves; any other stops getting work now.
    if body.action != "shutdown"
        && let Some(controller) = &state.controller
        && controller.worker_notice(&body.id, &body.action).await
    {
        return Ok(HttpResponse::Ok().finish());
    }
    if state.master.registry.drain(&body.id) {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(MasterError::UnknownInstance {
            id: body.id.clone(),
        })
    }
}

fn notice_kind(action: &str) -> &'static str {
    match action {
        "terminate" => "terminate",
        "stop" => "stop",
        "hibernate" => "hibernate",
        "shutdown" => "shutdown",
        _ => "other",
    }
}

#[utoipa::path(post, path = "/v1/workers/deregister", request_body = Deregistration,
    responses((status = 200, description = "Removed"), (status = 404, description = "Unknown instance")))]
pub async fn deregister(
    state: web::Data<AppState>,
    body: web::Json<Deregistration>,
) -> Result<HttpResponse> {
    if state.master.registry.remove(&body.id) {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(MasterError::UnknownInstance {
            id: body.id.clone(),
        })
    }
}

/// Each managed pool: its importance weight, demand and capacity at the last interval.
#[utoipa::path(get, path = "/v1/pools", responses((status = 200, description = "Pools and the predicted load"),
    (status = 404, description = "No resource controller")))]
pub async fn pools(state: web::Data<AppState>) -> Result<HttpResponse> {
    let (predicted, pools) = state.controller()?.pools_report();
    Ok(HttpResponse::Ok().json(json!({ "predicted_rps": predicted, "pools": pools })))
}

/// Every instance the provider launched, terminated ones included.
#[utoipa::path(get, path = "/v1/instances", responses((status = 200, description = "Instances"),
    (status = 404, description = "No resource controller")))]
pub async fn instances(state: web::Data<AppState>) -> Result<HttpResponse> {
    let controller = state.controller()?;
    let all = controller.provider.describe().await?;
    Ok(
        HttpResponse::Ok()
            .json(json!({ "provider": controller.provider.name(), "instances": all })),
    )
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct Limit {
    /// How many, newest last (1 to 1000, default 100).
    pub limit: Option<usize>,
}

/// The autoscaler's recent decisions with their reasons.
#[utoipa::path(get, path = "/v1/decisions", params(Limit), responses((status = 200, description = "Decisions"),
    (status = 404, description = "No resource controller"), (status = 422, description = "Bad limit")))]
pub async fn decisions(
    state: web::Data<AppState>,
    query: web::Query<Limit>,
) -> Result<HttpResponse> {
    recent(&state, &query, Collection::Decisions)
}

/// The newest `limit` records of a store collection, as `{"decisions": [...]}`.
fn recent(state: &AppState, query: &Limit, collection: Collection) -> Result<HttpResponse> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(MasterError::invalid(
            "limit",
            format!("must be 1 to 1000; given {limit}"),
        ));
    }
    let recent = state.controller()?.store.recent(collection, limit);
    Ok(HttpResponse::Ok().json(json!({ "decisions": recent })))
}

/// `PUT /v1/pools/{model}/mix`: the instances of each type a pool should have.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct MixRequest {
    /// Catalog instance types, 1 to 4.
    pub types: Vec<String>,
    /// Instances of each type, 0 to 16 each.
    pub counts: Vec<u32>,
}

/// Sets a pool's mix of instance types now (the launches and terminations it took).
#[utoipa::path(put, path = "/v1/pools/{model}/mix", request_body = MixRequest,
    responses((status = 200, description = "Instances launched and terminated"),
    (status = 404, description = "No resource controller"), (status = 422, description = "Bad mix")))]
pub async fn set_mix(
    state: web::Data<AppState>,
    model: web::Path<String>,
    body: web::Json<MixRequest>,
) -> Result<HttpResponse> {
    let MixRequest { types, counts } = body.into_inner();
    if !(1..=MAX_TYPES).contains(&types.len()) {
        return Err(MasterError::invalid(
            "types",
            format!(
                "takes 1 to {MAX_TYPES} instance types; given {}",
                types.len()
            ),
        ));
    }
    if counts.len() != types.len() {
        return Err(MasterError::invalid(
            "counts",
            format!(
                "needs one count per type ({}); given {}",
                types.len(),
                counts.len()
            ),
        ));
    }
    if let Some(c) = counts.iter().find(|&&c| c > 16) {
        return Err(MasterError::invalid(
            "counts",
            format!("each must be 0 to 16; given {c}"),
        ));
    }
    let changed = state.controller()?.set_mix(&model, &types, &counts).await?;
    Ok(HttpResponse::Ok().json(json!({ "model": model.into_inner(), "changed": changed })))
}

/// Mixes chosen by Ribbon, Kairos or an operator, with their evidence.
#[utoipa::path(get, path = "/v1/mix-decisions", params(Limit), responses((status = 200, description = "Mix decisions"),
    (status = 404, description = "No resource controller"), (status = 422, description = "Bad limit")))]
pub async fn mix_decisions(
    state: web::Data<AppState>,
    query: web::Query<Limit>,
) -> Result<HttpResponse> {
    recent(&state, &query, Collection::MixDecisions)
}

/// What the instances have cost so far (per-second billing), per pool and in total.
#[utoipa::path(get, path = "/v1/cost", responses((status = 200, description = "Cost in USD"),
    (status = 404, description = "No resource controller")))]
pub async fn cost(state: web::Data<AppState>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(state.controller()?.cost().await))
}

async fn metrics_text(state: web::Data<AppState>) -> HttpResponse {
    let body = state
        .prometheus
        .as_ref()
        .map(PrometheusHandle::render)
        .unwrap_or_default();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body)
}
