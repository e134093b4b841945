//! Turning a client's request into a [`ValidRequest`]: the task, the body the workers
//! get, the item count, the constraints and any labels. The master checks the structure
//! and the limits it can see without decoding (item count, names, types, sizes, text
//! length); decoding images and tokenising is the workers' job, and when every member
//! refuses an input as invalid their 4xx is passed on.

use std::sync::Arc;

use bytes::Bytes;
use cocktail_common::oip::limits::{MAX_ITEMS, MAX_TEXT_CHARS};
use cocktail_common::oip::tensor::{self, ByteItem};
use cocktail_common::oip::{
    IMAGE, InferRequest, PIXELS, RequestInput, RequestedOutput, TEXT, binary,
};
use serde_json::{Map, Value};

use crate::error::MasterError;
use crate::serving::tasks::{InputKind, TaskTable};
use cocktail_policy::selection::{Constraint, Objective};
use cocktail_policy::voting::Scheme;

/// Latency targets above a minute are a client's mistake.
pub const MAX_LATENCY_MS: f64 = 60_000.0;

/// A request that passed the master's checks.
#[derive(Debug, Clone)]
pub struct ValidRequest {
    /// The task's table it was checked against (its labels, and the models `pinned`
    /// names by index): the request is served from this table even when a zoo reload
    /// replaces it meanwhile.
    pub task: Arc<TaskTable>,
    pub id: Option<String>,
    /// The request every member gets.
    pub member: MemberBody,
    pub items: usize,
    pub constraint: Constraint,
    /// One label per item, or none.
    pub labels: Option<Vec<usize>>,
    pub scheme: Option<Scheme>,
    /// `models`: the ensemble the client pinned (indices into the task's models), served
    /// as it is: no selection, no substitutes, and nothing learnt for the constraint.
    pub pinned: Option<Vec<usize>>,
    /// `strict_deadline`: members not back by the latency target are not waited for,
    /// even when none answered (the request then fails), instead of a late answer.
    pub strict_deadline: bool,
    /// What the client asked of the answer: which outputs, in which form (its inputs
    /// dropped).
    pub form: InferRequest,
}

/// The body of a member call: JSON, or JSON then binary tensors when `header` gives the
/// JSON's length (`Inference-Header-Content-Length`).
#[derive(Debug, Clone)]
pub struct MemberBody {
    pub body: Bytes,
    pub header: Option<usize>,
    /// On the binary wire, the inputs the body holds, which can join other requests'
    /// in one call to a worker ([`crate::serving::dispatch`]); `None` on the JSON wire.
    pub inputs: Option<Arc<[RequestInput]>>,
}

/// How the master sends inputs to members and reads their answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MemberWire {
    /// Triton's binary tensor extension: raw image bytes and raw FP32 outputs, no base64
    /// or JSON numbers.
    #[default]
    Binary,
    /// OIP JSON: base64 images, JSON numbers.
    Json,
}

/// Parses and checks a `POST /v2/models/{task}/infer` body (with its
/// `Inference-Header-Content-Length`, if any).
pub fn parse_infer(
    task: &Arc<TaskTable>,
    body: Bytes,
    header: Option<usize>,
    wire: MemberWire,
) -> Result<ValidRequest, MasterError> {
    let mut request = binary::decode_request(body, header)?;
    valid(task, std::mem::take(&mut request.inputs), request, wire)
}

/// Checks a request whose inputs are taken out of `form`, and builds the member body.
pub fn valid(
    task: &Arc<TaskTable>,
    inputs: Vec<RequestInput>,
    form: InferRequest,
    wire: MemberWire,
) -> Result<ValidRequest, MasterError> {
    let items = check_inputs(task, &inputs)?;
    let empty = Map::new();
    let parameters = form.parameters.as_ref().unwrap_or(&empty);
    let constraint = constraint(parameters)?;
    let labels = labels(task, parameters.get("label"), items)?;
    let scheme = scheme(parameters.get("scheme"))?;
    let pinned = pinned(task, parameters.get("models"))?;
    let strict_deadline = flag(parameters, "strict_deadline")?;
    Ok(ValidRequest {
        task: Arc::clone(task),
        id: form.id.clone(),
        member: member_body(inputs, wire)?,
        items,
        constraint,
        labels,
        scheme,
        pinned,
        strict_deadline,
        form,
    })
}

/// The request each member gets: the client's inputs in the wire's form, asking for the
/// two outputs the vote needs.
fn member_body(inputs: Vec<RequestInput>, wire: MemberWire) -> Result<MemberBody, MasterError> {
    let inputs: Vec<RequestInput> = inputs
        .into_iter()
        .map(|input| member_input(input, wire))
        .collect::<Result<_, _>>()?;
    let joinable = (wire == MemberWire::Binary).then(|| Arc::from(inputs.as_slice()));
    let (body, header) = binary::encode_request(member_request(inputs, wire, None))?;
    Ok(MemberBody {
        body,
        header,
        inputs: joinable,
    })
}

/// A member call's request: these inputs, asking for the two outputs the vote needs
/// (raw on the binary wire).
pub fn member_request(
    inputs: Vec<RequestInput>,
    wire: MemberWire,
    parameters: Option<Map<String, Value>>,
) -> InferRequest {
    let binary = (wire == MemberWire::Binary)
        .then(|| Map::from_iter([(binary::BINARY_DATA.into(), true.into())]));
    let outputs = ["class", "probabilities"]
        .map(|name| RequestedOutput {
            name: name.into(),
            parameters: binary.clone(),
        })
        .to_vec();
    InferRequest {
        id: None,
        inputs,
        parameters,
        outputs: Some(outputs),
    }
}

/// One input in the wire's form. Images travel as their encoded bytes either way (base64
/// in JSON): decoding them is the workers' job.
fn member_input(mut input: RequestInput, wire: MemberWire) -> Result<RequestInput, MasterError> {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
    let n = tensor::element_count(&input)?;
    if let Some(parameters) = &mut input.parameters {
        parameters.remove(binary::BINARY_DATA_SIZE);
    }
    match (wire, input.raw.take()) {
        (MemberWire::Binary, Some(raw)) => input.raw = Some(raw),
        (MemberWire::Binary, None) => {
            input.raw = Some(match input.datatype.as_str() {
                "FP32" => tensor::f32_raw(&tensor::f32s(&input, n)?),
                "INT64" => tensor::i64_raw(&tensor::i64s(&input, n)?),
                _ => {
                    let items = tensor::byte_items(&input, n)?
                        .into_iter()
                        .map(|item| match item {
                            ByteItem::Json(text) if input.name == IMAGE => {
                                BASE64.decode(text.trim()).map_err(|e| {
                                    MasterError::invalid("image", format!("not valid base64: {e}"))
                                })
                            }
                            ByteItem::Json(text) => Ok(text.as_bytes().to_vec()),
                            ByteItem::Raw(bytes) => Ok(bytes.to_vec()),
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    tensor::bytes_raw(items.iter().map(Vec::as_slice))
                }
            });
            input.data = Value::Null;
        }
        (MemberWire::Json, None) => {}
        (MemberWire::Json, Some(raw)) => {
            input.raw = Some(raw);
            let data: Value = match input.datatype.as_str() {
                "FP32" => tensor::f32s(&input, n)?.into(),
                "INT64" => tensor::i64s(&input, n)?.into(),
                _ => tensor::byte_items(&input, n)?
                    .into_iter()
                    .map(|item| match item {
                        ByteItem::Raw(bytes) if input.name == IMAGE => BASE64.encode(bytes),
                        ByteItem::Raw(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                        ByteItem::Json(text) => text.to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .into(),
            };
            input.raw = None;
            input.data = data;
        }
    }
    Ok(input)
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
        MasterError::invalid("accuracy", "is required: the accuracy target, in (0, 1]")
    })?;
    // A target of 0 asks for nothing: every ensemble, even an empty one, would meet it.
    if !(accuracy > 0.0 && accuracy <= 1.0) {
        return Err(MasterError::invalid(
            "accuracy",
            format!("must be in (0, 1]; given {accuracy}"),
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

/// `models`: a pinned ensemble, as a comma-separated string (OIP parameters are
/// scalars) or, in JSON, an array of names; each must be one of the task's models, once.
/// Whether a worker serves them is checked when the request is dispatched.
pub fn pinned(task: &TaskTable, value: Option<&Value>) -> Result<Option<Vec<usize>>, MasterError> {
    let names: Vec<&str> = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.split(',').map(str::trim).collect(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| {
                v.as_str().ok_or_else(|| {
                    MasterError::invalid("models", format!("must name models; given {v}"))
                })
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(MasterError::invalid(
                "models",
                format!("must be a comma-separated string of model names; given {other}"),
            ));
        }
    };
    if names.is_empty() || names.iter().any(|n| n.is_empty()) {
        return Err(MasterError::invalid(
            "models",
            format!("must name at least one model, separated by commas; given {value:?}"),
        ));
    }
    let mut pinned = Vec::with_capacity(names.len());
    for name in names {
        let model = task.model_index(name).ok_or_else(|| {
            MasterError::invalid(
                "models",
                format!(
                    "`{name}` is not a model of this task; it has {:?}",
                    task.models
                ),
            )
        })?;
        if pinned.contains(&model) {
            return Err(MasterError::invalid(
                "models",
                format!("names `{name}` twice"),
            ));
        }
        pinned.push(model);
    }
    Ok(Some(pinned))
}

/// A boolean parameter (absent: false); multipart forms carry it as text.
fn flag(parameters: &Map<String, Value>, field: &str) -> Result<bool, MasterError> {
    match parameters.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(other) => Err(MasterError::invalid(
            field,
            format!("must be true or false; given {other}"),
        )),
    }
}

/// Checks names, types, shapes and sizes; returns the item count.
fn check_inputs(task: &TaskTable, inputs: &[RequestInput]) -> Result<usize, MasterError> {
    let expected = match task.kind {
        InputKind::Image => {
            "`image` (BYTES: JPEG, PNG, WebP or GIF, base64 in JSON) or `pixels` (prepared as the task's metadata says)"
        }
        InputKind::Text => "`text` (BYTES, UTF-8) or `input_ids` and `attention_mask` (INT64)",
        InputKind::Tensor => "the models' input tensors, as the task's metadata lists them",
    };
    let first = inputs.first().ok_or_else(|| {
        MasterError::invalid("inputs", format!("must not be empty; expected {expected}"))
    })?;
    let items = batch(first)?;
    for input in inputs {
        let allowed = match (task.kind, input.name.as_str(), input.datatype.as_str()) {
            (InputKind::Image, IMAGE, "BYTES") | (InputKind::Image, PIXELS, "FP32" | "UINT8") => {
                inputs.len() == 1
            }
            (InputKind::Tensor, name, datatype) => {
                inputs.len() == task.inputs.len()
                    && task
                        .inputs
                        .iter()
                        .any(|i| i.name == name && i.dtype.oip() == datatype)
            }
            (InputKind::Text, TEXT, "BYTES") => inputs.len() == 1,
            (InputKind::Text, "input_ids" | "attention_mask", "INT64") => inputs.len() == 2,
            _ => false,
        };
        if !allowed {
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
        let len = tensor::element_count(input)?;
        if len != expected_len {
            return Err(MasterError::invalid(
                "data",
                format!(
                    "of `{}` holds {len} values but shape {:?} needs {expected_len}",
                    input.name, input.shape
                ),
            ));
        }
        if input.name == TEXT {
            check_texts(input, items)?;
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

fn check_texts(input: &RequestInput, items: usize) -> Result<(), MasterError> {
    for (i, item) in tensor::byte_items(input, items)?.into_iter().enumerate() {
        let text = match item {
            ByteItem::Json(text) => text,
            ByteItem::Raw(bytes) => std::str::from_utf8(bytes)
                .map_err(|_| MasterError::invalid("text", format!("item {i} is not UTF-8")))?,
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

/// The one input of a `/v1/classify` request: an image (raw PNG/JPEG bytes) or a text.
pub fn single_item_input(
    kind: InputKind,
    payload: SingleItem<'_>,
) -> Result<RequestInput, MasterError> {
    let (name, raw) = match (kind, payload) {
        (InputKind::Image, SingleItem::Image(bytes)) => (IMAGE, bytes),
        (InputKind::Text, SingleItem::Text(text)) => (TEXT, text.as_bytes()),
        (InputKind::Image, SingleItem::Text(_)) => {
            return Err(MasterError::invalid(
                "image",
                "is required for an image task",
            ));
        }
        (InputKind::Text, SingleItem::Image(_)) => {
            return Err(MasterError::invalid("text", "is required for a text task"));
        }
        (InputKind::Tensor, _) => {
            return Err(MasterError::invalid(
                "inputs",
                "a tensor task takes its input tensors through /v2/models/{task}/infer",
            ));
        }
    };
    Ok(RequestInput {
        name: name.into(),
        shape: vec![1],
        datatype: "BYTES".into(),
        data: Value::Null,
        parameters: None,
        raw: Some(tensor::bytes_raw([raw])),
    })
}

/// The one item of a `/v1/classify` request.
#[derive(Debug, Clone, Copy)]
pub enum SingleItem<'a> {
    Image(&'a [u8]),
    Text(&'a str),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn accuracy(value: Value) -> Result<f64, String> {
        let parameters = json!({ "latency_ms": 5, "accuracy": value });
        constraint(parameters.as_object().unwrap())
            .map(|c| c.accuracy)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn accuracy_targets_lie_in_zero_exclusive_to_one_inclusive() {
        for accepted in [1e-9, 0.5, 0.99, 1.0] {
            assert_eq!(accuracy(json!(accepted)), Ok(accepted));
        }
        // Multipart forms carry the number as text.
        assert_eq!(accuracy(json!("1")), Ok(1.0));
        for refused in [
            json!(0),
            json!(0.0),
            json!(-0.1),
            json!(1.000_001),
            json!("0"),
        ] {
            let error = accuracy(refused.clone()).unwrap_err();
            assert!(
                error.contains("`accuracy`") && error.contains("(0, 1]"),
                "{refused}: {error}"
            );
        }
    }

    #[test]
    fn a_target_written_to_json_reads_back_as_the_same_number() {
        // Found by fuzzing (master_classify): a form's latency_ms "0.999999999999999905"
        // is 0.9999999999999999 as f64; serde_json without `float_roundtrip` read that
        // back from the members' OIP parameters one ulp off.
        let latency_ms: f64 = "0.999999999999999905".parse().unwrap();
        let written =
            serde_json::to_vec(&json!({ "latency_ms": latency_ms, "accuracy": 0.93 })).unwrap();
        let read: Map<String, Value> = serde_json::from_slice(&written).unwrap();
        assert_eq!(constraint(&read).unwrap().latency_ms, latency_ms);
    }
}
