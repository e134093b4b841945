//! Turning a client's request into a [`ValidRequest`]: the task, the body the workers
//! get, the item count, the constraints and any labels. The master checks the structure
//! and the limits it can see without decoding (item count, names, types, sizes, text
//! length); decoding images and tokenising is the workers' job, and when every member
//! refuses an input as invalid their 4xx is passed on.

use bytes::Bytes;
use cocktail_common::oip::{InferRequest, RequestInput};
use serde_json::{Map, Value};

use crate::error::MasterError;
use crate::selection::{Constraint, Objective};
use crate::tasks::{InputKind, TaskTable};
use crate::voting::Scheme;

/// Largest request body accepted, as the workers.
pub const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// Items per request, as the workers.
pub const MAX_ITEMS: usize = 64;
/// Characters per text item, as the workers.
pub const MAX_TEXT_CHARS: usize = 10_000;
/// Latency targets above a minute are a client's mistake.
pub const MAX_LATENCY_MS: f64 = 60_000.0;

/// A request that passed the master's checks.
#[derive(Debug, Clone)]
pub struct ValidRequest {
    pub id: Option<String>,
    /// The OIP body sent to every member (the client's own bytes when it sent OIP).
    pub body: Bytes,
    pub items: usize,
    pub constraint: Constraint,
    /// One label per item, or none.
    pub labels: Option<Vec<usize>>,
    pub scheme: Option<Scheme>,
}

/// Parses and checks a `POST /v2/models/{task}/infer` body.
pub fn parse_infer(task: &TaskTable, body: Bytes) -> Result<ValidRequest, MasterError> {
    let request: InferRequest = serde_json::from_slice(&body).map_err(|e| {
        if e.is_data() {
            MasterError::invalid("body", e.to_string())
        } else {
            MasterError::Malformed(format!("not valid JSON: {e}"))
        }
    })?;
    let items = check_inputs(task, &request.inputs)?;
    let empty = Map::new();
    let parameters = request.parameters.as_ref().unwrap_or(&empty);
    Ok(ValidRequest {
        id: request.id,
        body,
        items,
        constraint: constraint(parameters)?,
        labels: labels(task, parameters.get("label"), items)?,
        scheme: scheme(parameters.get("scheme"))?,
    })
}

/// The constraints from request parameters (OIP `parameters` or `/v1/classify` fields).
pub fn constraint(parameters: &Map<String, Value>) -> Result<Constraint, MasterError> {
    let latency_ms = number(parameters, "latency_ms")?.ok_or_else(|| {
        MasterError::invalid(
            "latency_ms",
            "is required: the latency target in milliseconds",
        )
    })?;
    if !(latency_ms > 0.0 && latency_ms <= MAX_LATENCY_MS) {
        return Err(MasterError::invalid(
            "latency_ms",
            format!("must be above 0 and at most {MAX_LATENCY_MS}; given {latency_ms}"),
        ));
    }
    let accuracy = number(parameters, "accuracy")?.ok_or_else(|| {
        MasterError::invalid("accuracy", "is required: the accuracy target, from 0 to 1")
    })?;
    if !(0.0..=1.0).contains(&accuracy) {
        return Err(MasterError::invalid(
            "accuracy",
            format!("must be from 0 to 1; given {accuracy}"),
        ));
    }
    let objective = match parameters.get("objective") {
        None | Some(Value::Null) => Objective::default(),
        Some(Value::String(s)) if s == "accuracy" => Objective::Accuracy,
        Some(Value::String(s)) if s == "latency" => Objective::Latency,
        Some(other) => {
            return Err(MasterError::invalid(
                "objective",
                format!("must be \"accuracy\" or \"latency\"; given {other}"),
            ));
        }
    };
    Ok(Constraint {
        latency_ms,
        accuracy,
        objective,
    })
}

fn number(parameters: &Map<String, Value>, field: &str) -> Result<Option<f64>, MasterError> {
    match parameters.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        // Multipart forms carry numbers as text.
        Some(Value::String(s)) => {
            s.trim().parse::<f64>().map(Some).map_err(|_| {
                MasterError::invalid(field, format!("must be a number; given \"{s}\""))
            })
        }
        Some(other) => Err(MasterError::invalid(
            field,
            format!("must be a number; given {other}"),
        )),
    }
}

/// `label`: a class index or label name for one item, or an array of them, one per item.
pub fn labels(
    task: &TaskTable,
    value: Option<&Value>,
    items: usize,
) -> Result<Option<Vec<usize>>, MasterError> {
    let one = |v: &Value| {
        task.class_of(v).ok_or_else(|| {
            MasterError::invalid(
                "label",
                format!(
                    "must be a class index from 0 to {} or one of {:?}; given {v}",
                    task.labels.len().saturating_sub(1),
                    task.labels
                ),
            )
        })
    };
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(values)) => {
            if values.len() != items {
                return Err(MasterError::invalid(
                    "label",
                    format!("needs one label per item ({items}); given {}", values.len()),
                ));
            }
            values.iter().map(one).collect::<Result<_, _>>().map(Some)
        }
        Some(v) if items == 1 => one(v).map(|c| Some(vec![c])),
        Some(_) => Err(MasterError::invalid(
            "label",
            format!("needs an array of {items} labels, one per item"),
        )),
    }
}

/// `scheme`: overrides the voting scheme for one request, to compare schemes.
pub fn scheme(value: Option<&Value>) -> Result<Option<Scheme>, MasterError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match s.as_str() {
            "weighted" => Ok(Some(Scheme::Weighted)),
            "majority" => Ok(Some(Scheme::Majority)),
            "average" => Ok(Some(Scheme::Average)),
            _ => Err(MasterError::invalid(
                "scheme",
                format!("must be \"weighted\", \"majority\" or \"average\"; given \"{s}\""),
            )),
        },
        Some(other) => Err(MasterError::invalid(
            "scheme",
            format!("must be a string; given {other}"),
        )),
    }
}

/// Checks names, types, shapes and sizes; returns the item count.
fn check_inputs(task: &TaskTable, inputs: &[RequestInput]) -> Result<usize, MasterError> {
    let expected = match task.kind {
        InputKind::Image => "`image` (BYTES, base64 PNG/JPEG, or FP32 [n,1,H,W])",
        InputKind::Text => "`text` (BYTES, UTF-8) or `input_ids` and `attention_mask` (INT64)",
    };
    let first = inputs.first().ok_or_else(|| {
        MasterError::invalid("inputs", format!("must not be empty; expected {expected}"))
    })?;
    let items = batch(first)?;
    for input in inputs {
        let allowed = match (task.kind, input.name.as_str(), input.datatype.as_str()) {
            (InputKind::Image, "image", "BYTES" | "FP32") => true,
            (InputKind::Text, "text", "BYTES") => inputs.len() == 1,
            (InputKind::Text, "input_ids" | "attention_mask", "INT64") => inputs.len() == 2,
            _ => false,
        };
        if !allowed || (task.kind == InputKind::Image && inputs.len() != 1) {
            return Err(MasterError::invalid(
                "inputs",
                format!(
                    "task `{}` takes {expected}; given `{}` ({}) among {} input(s)",
                    task.name,
                    input.name,
                    input.datatype,
                    inputs.len()
                ),
            ));
        }
        if batch(input)? != items {
            return Err(MasterError::invalid(
                "shape",
                "every input must have the same batch dimension",
            ));
        }
        let expected_len = input
            .shape
            .iter()
            .try_fold(1_usize, |acc, &d| {
                usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
            })
            .ok_or_else(|| {
                MasterError::invalid("shape", format!("is not valid: {:?}", input.shape))
            })?;
        let len = flat_len(&input.data).ok_or_else(|| {
            MasterError::invalid("data", format!("of `{}` must be an array", input.name))
        })?;
        if len != expected_len {
            return Err(MasterError::invalid(
                "data",
                format!(
                    "of `{}` holds {len} values but shape {:?} needs {expected_len}",
                    input.name, input.shape
                ),
            ));
        }
        if input.name == "text" {
            check_texts(&input.data)?;
        }
    }
    Ok(items)
}

fn batch(input: &RequestInput) -> Result<usize, MasterError> {
    match input.shape.first() {
        Some(&n) if n >= 1 && n as usize <= MAX_ITEMS => Ok(n as usize),
        other => Err(MasterError::invalid(
            "shape",
            format!(
                "batch dimension of `{}` must be 1 to {MAX_ITEMS}; given {other:?}",
                input.name
            ),
        )),
    }
}

/// Number of leaves of a (possibly nested) array; `None` when `data` is not an array.
fn flat_len(data: &Value) -> Option<usize> {
    match data {
        Value::Array(values) => Some(
            values
                .iter()
                .map(|v| match v {
                    Value::Array(_) => flat_len(v).unwrap_or(0),
                    _ => 1,
                })
                .sum(),
        ),
        _ => None,
    }
}

fn check_texts(data: &Value) -> Result<(), MasterError> {
    let Value::Array(values) = data else {
        return Ok(());
    };
    for (i, v) in values.iter().enumerate() {
        let Value::String(text) = v else {
            return Err(MasterError::invalid(
                "text",
                format!("item {i} must be a string"),
            ));
        };
        if text.trim().is_empty() {
            return Err(MasterError::invalid("text", format!("item {i} is empty")));
        }
        let chars = text.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(MasterError::invalid(
                "text",
                format!("item {i} has {chars} characters; the limit is {MAX_TEXT_CHARS}"),
            ));
        }
    }
    Ok(())
}

/// The OIP body of one image (raw PNG/JPEG bytes) or one text, for `/v1/classify`.
pub fn single_item_body(kind: InputKind, payload: SingleItem<'_>) -> Result<Bytes, MasterError> {
    use base64::Engine as _;
    let input = match (kind, payload) {
        (InputKind::Image, SingleItem::Image(bytes)) => RequestInput {
            name: "image".into(),
            shape: vec![1],
            datatype: "BYTES".into(),
            data: Value::Array(vec![Value::String(
                base64::engine::general_purpose::STANDARD.encode(bytes),
            )]),
            parameters: None,
        },
        (InputKind::Text, SingleItem::Text(text)) => RequestInput {
            name: "text".into(),
            shape: vec![1],
            datatype: "BYTES".into(),
            data: Value::Array(vec![Value::String(text.to_owned())]),
            parameters: None,
        },
        (InputKind::Image, SingleItem::Text(_)) => {
            return Err(MasterError::invalid(
                "image",
                "is required for an image task",
            ));
        }
        (InputKind::Text, SingleItem::Image(_)) => {
            return Err(MasterError::invalid("text", "is required for a text task"));
        }
    };
    if input.name == "text" {
        check_texts(&input.data)?;
    }
    let request = InferRequest {
        id: None,
        inputs: vec![input],
        parameters: None,
    };
    serde_json::to_vec(&request)
        .map(Bytes::from)
        .map_err(|e| MasterError::Internal(format!("encoding a worker request: {e}")))
}

/// The one item of a `/v1/classify` request.
#[derive(Debug, Clone, Copy)]
pub enum SingleItem<'a> {
    Image(&'a [u8]),
    Text(&'a str),
}
