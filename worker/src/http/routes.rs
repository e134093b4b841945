//! Routes and handlers of the worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use cocktail_common::ModelEntry;
use cocktail_common::oip::limits::MAX_BODY_BYTES;
use cocktail_common::oip::{self, binary};
use cocktail_common::oip::{
    ErrorBody, InferRequest, InferResponse, ModelMetadata, ServerMetadata, TensorMetadata,
};
use cocktail_service::surface::{endpoint, not_found, oip_body};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Semaphore;

use crate::batcher::{BatcherHandle, Call};
use crate::preprocess::Preprocessor;
use crate::request::{largest_part, parse_body, respond};
use crate::{WorkerError, metrics};

/// Bodies up to this size are preprocessed on the async thread that received them: a
/// base64 thumbnail or a few sentences. Deflate compresses at most about 1000:1, so such a
/// body cannot hold more than a few million pixels, and decoding it blocks only briefly.
const INLINE_BODY_BYTES: usize = 4 * 1024;

/// Everything the handlers share.
#[derive(Debug)]
pub struct AppState {
    pub model: ModelEntry,
    pub labels: Vec<String>,
    pub preprocessor: Arc<Preprocessor>,
    pub batcher: BatcherHandle,
    /// Admission: one permit per item in service or queued (packing factor + queue).
    pub slots: Arc<Semaphore>,
    pub capacity: usize,
    pub draining: Arc<AtomicBool>,
    pub prometheus: Option<PrometheusHandle>,
}

impl AppState {
    fn serving(&self, requested: &str) -> Result<(), WorkerError> {
        if requested != self.model.name {
            return Err(WorkerError::UnknownModel {
                served: self.model.name.clone(),
                requested: requested.to_owned(),
            });
        }
        if self.draining.load(Ordering::Relaxed) {
            return Err(WorkerError::Draining);
        }
        Ok(())
    }
}

/// The routes of a worker serving `model`.
pub fn configure(cfg: &mut web::ServiceConfig, model: &str) {
    use actix_web::http::Method;
    // The served model's infer path first, as a plain path: actix-web tries routes in
    // order, and a templated one costs a regex match per request (docs/design.md,
    // "Per-call bookkeeping looked up once"). The template after it answers the others
    // (another model's name: 404). A name that is not plain (a hand-written manifest's,
    // perhaps with characters a route pattern reads) is left to the template.
    if cocktail_common::zoo::is_plain_name(model) {
        cfg.service(endpoint(
            &format!("/v2/models/{model}/infer"),
            Method::POST,
            infer_served,
        ));
    }
    cfg.service(endpoint("/v2/models/{model}/infer", Method::POST, infer))
        .service(endpoint("/v2", Method::GET, server_metadata))
        .service(endpoint("/v2/health/live", Method::GET, live))
        .service(endpoint("/v2/health/ready", Method::GET, ready))
        .service(endpoint("/v2/models/{model}", Method::GET, model_metadata))
        .service(endpoint(
            "/v2/models/{model}/ready",
            Method::GET,
            model_ready,
        ))
        .service(endpoint(
            "/openapi.json",
            Method::GET,
            super::openapi::document,
        ))
        .service(endpoint("/metrics", Method::GET, metrics_text))
        .default_service(web::to(not_found));
}

#[utoipa::path(get, path = "/v2", responses((status = 200, description = "Server metadata", body = ServerMetadata)))]
pub async fn server_metadata() -> HttpResponse {
    HttpResponse::Ok().json(ServerMetadata {
        name: "cocktail-worker".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        extensions: vec!["binary_tensor_data".into()],
    })
}

#[utoipa::path(get, path = "/v2/health/live", responses((status = 200, description = "Alive")))]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().finish()
}

/// Ready unless draining.
#[utoipa::path(get, path = "/v2/health/ready", responses(
    (status = 200, description = "Serving"),
    (status = 503, description = "Draining: no new requests", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds")))))]
pub async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, WorkerError> {
    state.serving(&state.model.name)?;
    Ok(HttpResponse::Ok().finish())
}

#[utoipa::path(get, path = "/v2/models/{model}/ready",
    params(("model" = String, Path, description = "The model this worker serves")),
    responses(
        (status = 200, description = "Serving"),
        (status = 404, description = "This worker serves another model", body = ErrorBody),
        (status = 503, description = "Draining: no new requests", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds")))))]
pub async fn model_ready(
    state: web::Data<AppState>,
    model: web::Path<String>,
) -> Result<HttpResponse, WorkerError> {
    state.serving(&model)?;
    Ok(HttpResponse::Ok().finish())
}

#[utoipa::path(get, path = "/v2/models/{model}",
    params(("model" = String, Path, description = "The model this worker serves")),
    responses(
        (status = 200, description = "Inputs and outputs of the model", body = ModelMetadata),
        (status = 404, description = "This worker serves another model", body = ErrorBody)))]
pub async fn model_metadata(
    state: web::Data<AppState>,
    model: web::Path<String>,
) -> Result<HttpResponse, WorkerError> {
    if *model != state.model.name {
        return Err(WorkerError::UnknownModel {
            served: state.model.name.clone(),
            requested: model.into_inner(),
        });
    }
    let m = &state.model;
    let inputs = match &*state.preprocessor {
        Preprocessor::Image(image) => oip::image_inputs(image.spec()),
        Preprocessor::Text(_) => {
            let mut inputs = oip::tensor_inputs(&m.inputs);
            inputs.push(TensorMetadata {
                name: oip::TEXT.into(),
                datatype: "BYTES".into(),
                shape: vec![-1],
                parameters: None,
            });
            inputs
        }
        Preprocessor::Tensor(tensors) => oip::tensor_inputs(tensors.inputs()),
    };
    let classes = state.labels.len() as i64;
    Ok(HttpResponse::Ok().json(ModelMetadata {
        name: m.name.clone(),
        versions: vec![m.sha256.chars().take(12).collect()],
        platform: "onnxruntime".into(),
        inputs,
        outputs: vec![
            TensorMetadata {
                name: "class".into(),
                datatype: "INT64".into(),
                shape: vec![-1],
                parameters: None,
            },
            TensorMetadata {
                name: "label".into(),
                datatype: "BYTES".into(),
                shape: vec![-1],
                parameters: None,
            },
            TensorMetadata {
                name: "probabilities".into(),
                datatype: "FP32".into(),
                shape: vec![-1, classes],
                parameters: None,
            },
        ],
    }))
}

#[utoipa::path(get, path = "/metrics", responses(
    (status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain")))]
pub async fn metrics_text(state: web::Data<AppState>) -> HttpResponse {
    let body = state
        .prometheus
        .as_ref()
        .map(PrometheusHandle::render)
        .unwrap_or_default();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(body)
}

/// Classifies a batch: OIP tensors or BYTES items (base64 PNG/JPEG for image models,
/// UTF-8 text for text models), or one raw PNG/JPEG body for an image model.
#[utoipa::path(post, path = "/v2/models/{model}/infer",
    params(("model" = String, Path, description = "The model this worker serves"),
        ("Inference-Header-Content-Length" = Option<u64>, Header, description = "Triton's binary tensor extension: the body (application/octet-stream) is the JSON request, this many bytes, then each binary input's raw elements; without it an octet-stream body is one raw image")),
    request_body(content(
        (InferRequest = "application/json"),
        (super::openapi::RawImage = "application/octet-stream"),
        (super::openapi::RawImage = "image/png"),
        (super::openapi::RawImage = "image/jpeg"))),
    responses(
        (status = 200, description = "Outputs `class`, `label` and `probabilities` (those asked for); binary outputs (asked with `binary_data`) follow the JSON",
            content((InferResponse = "application/json"), (cocktail_service::surface::BinaryTensors = "application/octet-stream")),
            headers(("Inference-Header-Content-Length" = u64, description = "With binary outputs: the length of the JSON before them"))),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 404, description = "This worker serves another model", body = ErrorBody),
        (status = 413, description = "Body over 10 MiB", body = ErrorBody),
        (status = 422, description = "Invalid input, naming the field and the limit", body = ErrorBody),
        (status = 429, description = "Overloaded: every slot is taken", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds"))),
        (status = 503, description = "Draining: no new requests", body = ErrorBody, headers(("Retry-After" = u32, description = "Seconds")))))]
pub async fn infer(
    state: web::Data<AppState>,
    model: web::Path<String>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, WorkerError> {
    timed_infer(&state, &model, request, payload).await
}

/// [`infer`] on the served model's own path (no template, so no path to extract).
pub async fn infer_served(
    state: web::Data<AppState>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, WorkerError> {
    timed_infer(&state, &state.model.name, request, payload).await
}

async fn timed_infer(
    state: &web::Data<AppState>,
    model: &str,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, WorkerError> {
    let started = Instant::now();
    let call = state.batcher.enter();
    let result = infer_inner(state, model, &request, payload, &call).await;
    metrics::request(
        result.as_ref().map_or_else(WorkerError::kind, |_| "ok"),
        started.elapsed(),
    );
    result
}

async fn infer_inner(
    state: &web::Data<AppState>,
    model: &str,
    request: &HttpRequest,
    payload: web::Payload,
    call: &Call,
) -> Result<HttpResponse, WorkerError> {
    state.serving(model)?;
    let body = match payload.to_bytes_limited(MAX_BODY_BYTES).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => return Err(WorkerError::invalid("body", format!("cannot read: {e}"))),
        Err(_) => {
            return Err(WorkerError::PayloadTooLarge {
                limit: MAX_BODY_BYTES,
            });
        }
    };
    let small_body = body.len() <= INLINE_BODY_BYTES;
    let header = binary::header_length(
        request
            .headers()
            .get(binary::HEADER_LENGTH)
            .map(|v| v.as_bytes()),
    )?;
    let raw_image = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/octet-stream") || ct.starts_with("image/"));
    let preprocessor = Arc::clone(&state.preprocessor);
    let parse = move || parse_body(body, raw_image, header, &preprocessor);
    // A small body parses in microseconds, less than a hop to the blocking pool costs;
    // larger images can take milliseconds to decode, so they leave the async threads.
    let (prepared, oip) = if small_body {
        parse()?
    } else {
        web::block(parse)
            .await
            .map_err(|e| WorkerError::Ort(format!("preprocessing thread: {e}")))??
    };

    let items = prepared.len();
    let largest_part = largest_part(&oip, items)?;
    if items > state.capacity {
        return Err(WorkerError::invalid(
            "shape",
            format!(
                "{items} items is over this worker's capacity of {}",
                state.capacity
            ),
        ));
    }
    let permit = Arc::clone(&state.slots)
        .try_acquire_many_owned(items as u32)
        .map_err(|_| WorkerError::Overloaded {
            capacity: state.capacity,
        })?;
    metrics::in_flight(state.capacity - state.slots.available_permits());
    let probabilities = state.batcher.infer(prepared, call, largest_part).await;
    drop(permit);
    let response = respond(&state.model.name, &state.labels, &oip, &probabilities?)?;
    let (body, header) = binary::encode_response(response)?;
    Ok(oip_body(header).body(body))
}
