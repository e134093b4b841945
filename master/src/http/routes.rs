//! Routes and handlers of the master.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::error::JsonPayloadError;
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, web};
use cocktail_common::control::{Deregistration, Heartbeat, Notice, Registered, Registration};
use cocktail_common::oip::{
    ErrorBody, InferRequest, InferResponse, ModelMetadata, ServerMetadata, binary,
};
use cocktail_service::surface::{endpoint, not_found, oip_body};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;

use super::auth::{Admin, Client, Cluster, MetricsReader};
use super::classify::{classify_request, read_limited};
use super::dashboard;
use super::present::{self, provenance};
use super::views::{
    Classified, ClassifyForm, ClassifyRequest, DecisionList, EnsembleList, EnsembleView, Feedback,
    FeedbackApplied, InstanceList, ItemVote, Limit, MAX_MIX_COUNT, MembersFailed, MixChanged,
    MixRequest, ModelSummary, PacedView, PoolList, TaskList, TaskSummary, WorkerList,
};
use crate::access::Access;
use crate::resources::controller::{Controller, CostReport};
use crate::resources::store::Collection;
use crate::serving::answer::Answer;
use crate::serving::control::at_most;
use crate::serving::request;
use crate::{Master, MasterError};
use cocktail_policy::mix::MAX_TYPES;

/// Everything the handlers share.
#[derive(Debug)]
pub struct AppState {
    pub master: Arc<Master>,
    pub prometheus: Option<PrometheusHandle>,
    /// The resource controller, when the master manages its own instances.
    pub controller: Option<Arc<Controller>>,
    /// Secrets and admission rules (`http::auth` checks them).
    pub access: Access,
    /// The dashboard's samples, taken in the background (`crate::history`).
    pub history: Arc<crate::history::History>,
    /// The dashboard's sign-in sessions.
    pub sessions: super::dashboard::Sessions,
    /// Zoo reloads (`POST /v1/zoo/reload`, SIGHUP).
    pub reloader: Arc<crate::reload::Reloader>,
}

impl AppState {
    fn controller(&self) -> Result<&Arc<Controller>> {
        self.controller.as_ref().ok_or(MasterError::NoController)
    }
}

type Result<T> = std::result::Result<T, MasterError>;

pub fn configure(cfg: &mut web::ServiceConfig) {
    use actix_web::http::Method;
    cfg.app_data(
        web::JsonConfig::default()
            .limit(JSON_BODY_BYTES)
            .error_handler(|e, _| json_error(e).into()),
    )
    .app_data(
        web::QueryConfig::default()
            .error_handler(|e, _| MasterError::invalid("query", e.to_string()).into()),
    )
    // The inference routes first: actix-web tries routes in order, and each templated
    // one a request passes costs a regex match.
    .service(endpoint("/v2/models/{task}/infer", Method::POST, infer))
    .service(endpoint("/v1/classify", Method::POST, classify))
    .service(endpoint("/v2", Method::GET, server_metadata))
    .service(endpoint("/v2/health/live", Method::GET, live))
    .service(endpoint("/v2/health/ready", Method::GET, ready))
    .service(endpoint("/v2/models", Method::GET, list_tasks))
    .service(endpoint("/v2/models/{task}", Method::GET, task_metadata))
    .service(endpoint("/v2/models/{task}/ready", Method::GET, task_ready))
    .service(endpoint("/v1/feedback", Method::POST, feedback))
    .service(endpoint("/v1/ensembles", Method::GET, ensembles))
    .service(endpoint("/v1/workers", Method::GET, workers))
    .service(endpoint("/v1/workers/register", Method::POST, register))
    .service(endpoint(
        "/v1/workers/certificate",
        Method::POST,
        super::certificate::certificate,
    ))
    .service(endpoint("/v1/workers/heartbeat", Method::POST, heartbeat))
    .service(endpoint("/v1/workers/notice", Method::POST, notice))
    .service(endpoint("/v1/workers/deregister", Method::POST, deregister))
    .service(endpoint("/v1/pools", Method::GET, pools))
    .service(endpoint("/v1/pools/{model}/mix", Method::PUT, set_mix))
    .service(endpoint("/v1/mix-decisions", Method::GET, mix_decisions))
    .service(endpoint("/v1/control-steps", Method::GET, control_steps))
    .service(endpoint("/v1/instances", Method::GET, instances))
    .service(endpoint("/v1/decisions", Method::GET, decisions))
    .service(endpoint("/v1/cost", Method::GET, cost))
    .service(endpoint(
        "/v2/repository/index",
        Method::POST,
        super::repository::repository_index,
    ))
    .service(endpoint(
        "/v1/zoo/reload",
        Method::POST,
        super::repository::reload,
    ))
    .app_data(
        web::FormConfig::default()
            .limit(dashboard::FORM_BYTES)
            .error_handler(|e, _| dashboard::form_error(e).into()),
    )
    .service(endpoint("/dashboard", Method::GET, dashboard::show))
    .service(endpoint(
        "/dashboard/sign-in",
        Method::POST,
        dashboard::sign_in,
    ))
    .service(endpoint(
        "/dashboard/sign-out",
        Method::POST,
        dashboard::sign_out,
    ))
    .service(endpoint("/dashboard/data", Method::GET, dashboard::data))
    .service(endpoint(
        "/dashboard/app.js",
        Method::GET,
        dashboard::script,
    ))
    .service(endpoint(
        "/openapi.json",
        Method::GET,
        super::openapi::document,
    ))
    .service(endpoint("/metrics", Method::GET, metrics_text))
    .default_service(web::to(not_found));
}

/// Largest JSON body of the control plane, feedback and mixes.
const JSON_BODY_BYTES: usize = 64 * 1024;

/// A JSON body the extractor refused: 415 for another media type, 413 over the limit,
/// else 400 naming what is wrong.
fn json_error(error: JsonPayloadError) -> MasterError {
    match error {
        JsonPayloadError::ContentType => {
            MasterError::UnsupportedMediaType("the body must be `application/json`".into())
        }
        JsonPayloadError::Overflow { .. } | JsonPayloadError::OverflowKnownLength { .. } => {
            MasterError::PayloadTooLarge {
                limit: JSON_BODY_BYTES,
            }
        }
        other => MasterError::Malformed(other.to_string()),
    }
}

#[utoipa::path(get, path = "/v2", responses((status = 200, description = "Server metadata", body = ServerMetadata)))]
pub async fn server_metadata() -> HttpResponse {
    HttpResponse::Ok().json(present::server_metadata())
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
    if master
        .tasks()
        .keys()
        .any(|t| present::task_is_ready(master, t))
    {
        HttpResponse::Ok().finish()
    } else {
        HttpResponse::ServiceUnavailable().finish()
    }
}

#[utoipa::path(get, path = "/v2/models", responses((status = 200, description = "The tasks served, their models and readiness", body = TaskList)))]
pub async fn list_tasks(state: web::Data<AppState>) -> HttpResponse {
    let master = &state.master;
    let models = master
        .tasks()
        .values()
        .map(|t| TaskSummary {
            name: t.name.clone(),
            ready: present::task_is_ready(master, &t.name),
            labels: t.labels.clone(),
            models: t
                .models
                .iter()
                .zip(&t.candidates)
                .zip(master.served(t))
                .zip(master.registry.overheads(&t.models))
                .map(|(((m, c), predicted), overhead_ms)| {
                    let ready = master.registry.serves(m);
                    ModelSummary {
                        name: m.clone(),
                        accuracy: c.accuracy,
                        latency_ms: c.latency_ms,
                        predicted_ms: ready.then_some(predicted.latency_ms),
                        overhead_ms,
                        packing_factor: c.packing_factor,
                        ready,
                    }
                })
                .collect(),
        })
        .collect();
    HttpResponse::Ok().json(TaskList { models })
}

#[utoipa::path(get, path = "/v2/models/{task}", params(("task" = String, Path, description = "A task this master serves")),
    responses((status = 200, description = "Inputs and outputs of the task's ensembles", body = ModelMetadata),
        (status = 404, description = "Unknown task", body = ErrorBody)))]
pub async fn task_metadata(
    state: web::Data<AppState>,
    task: web::Path<String>,
) -> Result<HttpResponse> {
    let table = state.master.task(&task)?;
    Ok(HttpResponse::Ok().json(present::task_metadata(&table)))
}

#[utoipa::path(get, path = "/v2/models/{task}/ready", params(("task" = String, Path, description = "A task this master serves")),
    responses((status = 200, description = "Some model of the task has a worker"),
        (status = 404, description = "Unknown task", body = ErrorBody),
        (status = 503, description = "No worker of the task yet", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds")))))]
pub async fn task_ready(
    state: web::Data<AppState>,
    task: web::Path<String>,
) -> Result<HttpResponse> {
    state.master.task(&task)?;
    if present::task_is_ready(&state.master, &task) {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(MasterError::NoWorkers {
            task: task.into_inner(),
        })
    }
}

/// Classifies `n` items with the ensemble chosen for the constraints in `parameters`:
/// `latency_ms` (required: the end-to-end response time wanted, from arrival to answer;
/// members predicted slower are not chosen, members not back by then do not vote, and a
/// later answer is an SLO violation, `latency_met: false`) and `accuracy` (required),
/// `objective` (`accuracy` or `latency`),
/// `label` (one per item, to learn from), `scheme` (`weighted`, `majority`, `average`),
/// `models` (pins the ensemble: comma-separated model names, each served by a worker)
/// and `strict_deadline` (true: no late answer when no member is back by `latency_ms`;
/// by default the first late answer is taken, `latency_met: false`).
/// Triton's binary tensor extension is spoken both ways (`Inference-Header-Content-Length`).
#[utoipa::path(post, path = "/v2/models/{task}/infer", security(("api_key" = [])),
    params(("task" = String, Path, description = "A task this master serves"),
        ("Inference-Header-Content-Length" = Option<u64>, Header, description = "Triton's binary tensor extension: the body's first bytes, this many, are the JSON request; each input with `parameters.binary_data_size` has its raw elements after it, in order")),
    request_body(content(
        (InferRequest = "application/json"),
        (cocktail_service::surface::BinaryTensors = "application/octet-stream"))),
    responses((status = 401, description = "With `--api-keys`: no or an unknown key", body = ErrorBody),
        (status = 429, description = "Overloaded: a member's pool has so many calls queued that this one could not finish before the request stops waiting (`latency_ms` under `strict_deadline`, else 1 s; `error_type` `overloaded`), or, with `--api-keys`, the key is over its requests per second (`rate_limited`)", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds"))),
        (status = 200, description = "Outputs `class`, `label`, `scores` (those asked for); `parameters` holds the models, votes, weights, cache hit, degraded flag and interval. Binary outputs (asked with `binary_data`) follow the JSON, as in the request",
            content((InferResponse = "application/json"), (cocktail_service::surface::BinaryTensors = "application/octet-stream")),
            headers(("Server-Timing" = String, description = "The master's own time and the time waiting for members, ms"),
                ("Inference-Header-Content-Length" = u64, description = "With binary outputs: the length of the JSON before them"))),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "Unknown task", body = ErrorBody),
        (status = 413, description = "Body over 10 MiB", body = ErrorBody),
        (status = 422, description = "Invalid input or constraint, naming the field and the limit", body = ErrorBody),
        (status = 502, description = "No member answered and one at least failed; `members` lists each member's error", body = MembersFailed),
        (status = 504, description = "No member answered in time (`members_late`: every one still at work when the request stopped waiting, as under `strict_deadline`); `members` lists each", body = MembersFailed),
        (status = 503, description = "No worker registered for the task", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds")))))]
pub async fn infer(
    _: Client,
    state: web::Data<AppState>,
    task: web::Path<String>,
    http: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse> {
    let started = Instant::now();
    let table = state.master.task(&task)?;
    let header = binary::header_length(
        http.headers()
            .get(binary::HEADER_LENGTH)
            .map(|v| v.as_bytes()),
    )?;
    let body = read_limited(payload).await?;
    let mut request = request::parse_infer(&table, body, header, state.master.config.member_wire)?;
    let form = std::mem::take(&mut request.form);
    let answer = state.master.infer(&task, request).await?;
    let (body, header) = present::oip_body(&answer, &form)?;
    Ok(timed(started, &answer, header).body(body))
}

fn timed_json(started: Instant, answer: &Answer, value: &impl Serialize) -> Result<HttpResponse> {
    let body = serde_json::to_vec(value)
        .map_err(|e| MasterError::Internal(format!("encoding the answer: {e}")))?;
    Ok(timed(started, answer, None).body(body))
}

/// A 200 for an answer whose body is ready, reporting the master's own time (everything
/// from the handler's start to the encoded answer, minus waiting for members) in a
/// `Server-Timing` header and in `cocktail_master_overhead_seconds`.
fn timed(started: Instant, answer: &Answer, header: Option<usize>) -> HttpResponseBuilder {
    let wait = Duration::from_micros(answer.wait_us);
    let own = started.elapsed().saturating_sub(wait);
    metrics::histogram!("cocktail_master_overhead_seconds").record(own.as_secs_f64());
    let mut response = oip_body(header);
    response.insert_header((
        "Server-Timing",
        format!(
            "master;dur={:.3}, wait;dur={:.3}",
            own.as_secs_f64() * 1e3,
            wait.as_secs_f64() * 1e3
        ),
    ));
    response
}

/// Classifies one image or text. JSON `{task, image (base64) | text, latency_ms,
/// accuracy, objective?, label?, scheme?, id?}`, or the same fields as multipart form
/// parts with `image` as a file.
#[utoipa::path(post, path = "/v1/classify", security(("api_key" = [])),
    request_body(content(
        (ClassifyRequest = "application/json"),
        (ClassifyForm = "multipart/form-data"))),
    responses((status = 401, description = "With `--api-keys`: no or an unknown key", body = ErrorBody),
        (status = 429, description = "Overloaded: a member's pool has so many calls queued that this one could not finish before the request stops waiting (`latency_ms` under `strict_deadline`, else 1 s; `error_type` `overloaded`), or, with `--api-keys`, the key is over its requests per second (`rate_limited`)", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds"))),
        (status = 200, description = "The class of the one item, with the votes", body = Classified,
            headers(("Server-Timing" = String, description = "The master's own time and the time waiting for members, ms"))),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 404, description = "Unknown task", body = ErrorBody),
        (status = 413, description = "Body over 10 MiB", body = ErrorBody),
        (status = 422, description = "Invalid input or constraint, naming the field and the limit", body = ErrorBody),
        (status = 502, description = "No member answered and one at least failed; `members` lists each member's error", body = MembersFailed),
        (status = 504, description = "No member answered in time (`members_late`: every one still at work when the request stopped waiting, as under `strict_deadline`); `members` lists each", body = MembersFailed),
        (status = 503, description = "No worker registered for the task", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds")))))]
pub async fn classify(
    _: Client,
    state: web::Data<AppState>,
    http: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse> {
    let started = Instant::now();
    let (task_name, request) = classify_request(&state.master, http.headers(), payload).await?;
    let answer = state.master.infer(&task_name, request).await?;
    timed_json(started, &answer, &classified(&answer))
}

/// The one-item answer of `/v1/classify`, without per-item arrays.
fn classified(answer: &Answer) -> Classified<'_> {
    fn first(v: &[String]) -> &str {
        v.first().map_or("", String::as_str)
    }
    Classified {
        id: &answer.id,
        task: &answer.task,
        class: answer.class.first().copied().unwrap_or_default(),
        label: first(&answer.label),
        scores: answer.scores.first().map_or(&[], Vec::as_slice),
        votes: answer
            .votes
            .iter()
            .map(|v| ItemVote {
                model: &v.model,
                class: v.class.first().copied().unwrap_or_default(),
                label: first(&v.label),
                weight: v.weight.first().copied().unwrap_or_default(),
            })
            .collect(),
        provenance: provenance(answer),
    }
}

/// The true label of an answered request: it updates the voting weights and the
/// constraint's O2 window.
#[utoipa::path(post, path = "/v1/feedback", security(("api_key" = [])), request_body = Feedback,
    responses((status = 401, description = "With `--api-keys`: no or an unknown key", body = ErrorBody),
        (status = 429, description = "With `--api-keys`: the key is over its requests per second", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds"))),
        (status = 200, description = "Applied", body = FeedbackApplied),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 404, description = "Unknown, already labelled or expired id", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 422, description = "Invalid label, naming the classes", body = ErrorBody)))]
pub async fn feedback(
    _: Client,
    state: web::Data<AppState>,
    body: web::Json<Feedback>,
) -> Result<HttpResponse> {
    let items = state.master.feedback(&body.id, body.label.as_ref())?;
    Ok(HttpResponse::Ok().json(FeedbackApplied {
        id: body.into_inner().id,
        items,
    }))
}

/// The ensemble of every constraint key seen, with its O2 window.
#[utoipa::path(get, path = "/v1/ensembles", responses((status = 200, description = "Ensembles by constraint key", body = EnsembleList)))]
pub async fn ensembles(state: web::Data<AppState>) -> HttpResponse {
    let master = &state.master;
    let ensembles = master
        .ensembles
        .snapshot()
        .into_iter()
        .map(|(key, keyed)| {
            let s = keyed.state.lock();
            let names = |ids: &[usize]| -> Vec<String> {
                ids.iter()
                    .filter_map(|&i| keyed.task.models.get(i).cloned())
                    .collect()
            };
            EnsembleView {
                members: names(&s.members),
                candidates: names(&s.pool),
                generation: s.generation,
                window_labelled: s.window_labelled(),
                window_accuracy: s.window_accuracy(),
                measured_items: s.remembered(),
                paced: s.mix().map(|(lo, hi, share)| PacedView {
                    cheaper: names(lo),
                    dearer: names(hi),
                    dearer_share: share,
                }),
                key: key.to_string(),
            }
        })
        .collect();
    HttpResponse::Ok().json(EnsembleList { ensembles })
}

#[utoipa::path(get, path = "/v1/workers", security(("admin_token" = [])), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Every registered worker instance", body = WorkerList)))]
pub async fn workers(_: Admin, state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(WorkerList {
        workers: state.master.registry.view(),
    })
}

#[utoipa::path(post, path = "/v1/workers/register", security(("cluster_secret" = [])), request_body = Registration,
    responses((status = 401, description = "No or a wrong cluster secret", body = ErrorBody),
        (status = 403, description = "A URL outside `--worker-networks`, or an instance the controller did not launch at that address", body = ErrorBody),
        (status = 200, description = "Registered; heartbeat this often", body = Registered),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 422, description = "Unknown model, bad URL or id, naming the field", body = ErrorBody)))]
pub async fn register(
    _: Cluster,
    state: web::Data<AppState>,
    body: web::Json<Registration>,
) -> Result<HttpResponse> {
    let master = &state.master;
    super::certificate::admit(&state, &body).await?;
    super::certificate::require_tls(&state, &body)?;
    master.registry.register(&body)?;
    master.probe(&body.model, &body.url);
    Ok(HttpResponse::Ok().json(Registered {
        heartbeat_ms: master.config.heartbeat.as_millis() as u64,
    }))
}

#[utoipa::path(post, path = "/v1/workers/heartbeat", security(("cluster_secret" = [])), request_body = Heartbeat,
    responses((status = 401, description = "No or a wrong cluster secret", body = ErrorBody),
        (status = 200, description = "Recorded"),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 404, description = "Unknown instance: register again", body = ErrorBody),
        (status = 422, description = "A count over its limit, naming the field", body = ErrorBody)))]
pub async fn heartbeat(
    _: Cluster,
    state: web::Data<AppState>,
    body: web::Json<Heartbeat>,
) -> Result<HttpResponse> {
    at_most("in_flight", body.in_flight)?;
    if state.master.registry.heartbeat(&body.id, body.draining) {
        Ok(HttpResponse::Ok().finish())
    } else {
        Err(MasterError::UnknownInstance {
            id: body.id.clone(),
        })
    }
}

#[utoipa::path(post, path = "/v1/workers/notice", security(("cluster_secret" = [])), request_body = Notice,
    responses((status = 401, description = "No or a wrong cluster secret", body = ErrorBody),
        (status = 200, description = "The instance gets no new work"),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 404, description = "Unknown instance", body = ErrorBody)))]
pub async fn notice(
    _: Cluster,
    state: web::Data<AppState>,
    body: web::Json<Notice>,
) -> Result<HttpResponse> {
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
        "rebalance" => "rebalance",
        _ => "other",
    }
}

#[utoipa::path(post, path = "/v1/workers/deregister", security(("cluster_secret" = [])), request_body = Deregistration,
    responses((status = 401, description = "No or a wrong cluster secret", body = ErrorBody),
        (status = 200, description = "Removed"),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 404, description = "Unknown instance", body = ErrorBody)))]
pub async fn deregister(
    _: Cluster,
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
#[utoipa::path(get, path = "/v1/pools", security(("admin_token" = [])), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Pools and the predicted load", body = PoolList),
    (status = 404, description = "This master runs without a resource controller", body = ErrorBody)))]
pub async fn pools(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse> {
    let (predicted_rps, pools) = state.controller()?.pools_report();
    Ok(HttpResponse::Ok().json(PoolList {
        predicted_rps,
        pools,
    }))
}

/// Every instance the provider launched, terminated ones included.
#[utoipa::path(get, path = "/v1/instances", security(("admin_token" = [])), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Instances", body = InstanceList),
    (status = 404, description = "This master runs without a resource controller", body = ErrorBody),
    (status = 502, description = "The cloud provider failed", body = ErrorBody)))]
pub async fn instances(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse> {
    let controller = state.controller()?;
    Ok(HttpResponse::Ok().json(InstanceList {
        provider: controller.provider.name(),
        instances: controller.provider.describe().await?,
    }))
}

/// The autoscaler's recent decisions with their reasons.
#[utoipa::path(get, path = "/v1/decisions", security(("admin_token" = [])), params(Limit), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Decisions", body = DecisionList),
    (status = 404, description = "This master runs without a resource controller", body = ErrorBody), (status = 422, description = "Bad limit", body = ErrorBody)))]
pub async fn decisions(
    _: Admin,
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
    Ok(HttpResponse::Ok().json(DecisionList { decisions: recent }))
}

/// Sets a pool's mix of instance types now (the launches and terminations it took).
#[utoipa::path(put, path = "/v1/pools/{model}/mix", security(("admin_token" = [])), params(("model" = String, Path, description = "A pool the controller manages")),
    request_body = MixRequest,
    responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Instances launched and terminated", body = MixChanged),
        (status = 400, description = "Malformed JSON or a missing field", body = ErrorBody),
        (status = 413, description = "Body over 64 KiB", body = ErrorBody),
        (status = 415, description = "Body not `application/json`", body = ErrorBody),
        (status = 404, description = "No resource controller, or not a pool it manages", body = ErrorBody),
        (status = 422, description = "Bad mix, naming the field and the limit", body = ErrorBody),
        (status = 502, description = "The cloud provider failed", body = ErrorBody)))]
pub async fn set_mix(
    _: Admin,
    state: web::Data<AppState>,
    model: web::Path<String>,
    body: web::Json<MixRequest>,
) -> Result<HttpResponse> {
    let MixRequest { instances } = body.into_inner();
    if !(1..=MAX_TYPES).contains(&instances.len()) {
        return Err(MasterError::invalid(
            "instances",
            format!(
                "takes 1 to {MAX_TYPES} instance types; given {}",
                instances.len()
            ),
        ));
    }
    if let Some(e) = instances.iter().find(|e| e.count > MAX_MIX_COUNT) {
        return Err(MasterError::invalid(
            "count",
            format!(
                "must be 0 to {MAX_MIX_COUNT}; given {} for `{}`",
                e.count, e.instance_type
            ),
        ));
    }
    let (types, counts): (Vec<String>, Vec<u32>) = instances
        .into_iter()
        .map(|e| (e.instance_type, e.count))
        .unzip();
    if let Some((i, t)) = types
        .iter()
        .enumerate()
        .find(|(i, t)| types[..*i].contains(t))
    {
        return Err(MasterError::invalid(
            "type",
            format!("`{t}` is named twice (entry {i}); give each type once"),
        ));
    }
    let changed = state.controller()?.set_mix(&model, &types, &counts).await?;
    Ok(HttpResponse::Ok().json(MixChanged {
        model: model.into_inner(),
        changed,
    }))
}

/// The control loop's steps, each with the measurements it decided on and its decisions
/// (kept with `--record-control-steps`), to replay in the simulator's loop.
#[utoipa::path(get, path = "/v1/control-steps", security(("admin_token" = [])), params(Limit), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Control steps", body = DecisionList),
    (status = 404, description = "This master runs without a resource controller", body = ErrorBody), (status = 422, description = "Bad limit", body = ErrorBody)))]
pub async fn control_steps(
    _: Admin,
    state: web::Data<AppState>,
    query: web::Query<Limit>,
) -> Result<HttpResponse> {
    recent(&state, &query, Collection::ControlSteps)
}

/// Mixes chosen by Ribbon, Kairos or an operator, with their evidence.
#[utoipa::path(get, path = "/v1/mix-decisions", security(("admin_token" = [])), params(Limit), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Mix decisions", body = DecisionList),
    (status = 404, description = "This master runs without a resource controller", body = ErrorBody), (status = 422, description = "Bad limit", body = ErrorBody)))]
pub async fn mix_decisions(
    _: Admin,
    state: web::Data<AppState>,
    query: web::Query<Limit>,
) -> Result<HttpResponse> {
    recent(&state, &query, Collection::MixDecisions)
}

/// What the instances have cost so far (per-second billing), per pool and in total.
#[utoipa::path(get, path = "/v1/cost", security(("admin_token" = [])), responses((status = 401, description = "No or a wrong admin token", body = ErrorBody),
        (status = 200, description = "Cost in USD", body = CostReport),
    (status = 404, description = "This master runs without a resource controller", body = ErrorBody)))]
pub async fn cost(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(state.controller()?.cost().await?))
}

#[utoipa::path(get, path = "/metrics", responses((status = 401, description = "A caller beyond this host without the admin token or the cluster secret", body = ErrorBody),
    (status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain")))]
pub async fn metrics_text(_: MetricsReader, state: web::Data<AppState>) -> HttpResponse {
    let body = state
        .prometheus
        .as_ref()
        .map(PrometheusHandle::render)
        .unwrap_or_default();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body)
}
