//! How the master presents itself and its answers over OIP, shared by the HTTP and gRPC
//! endpoints: server and task metadata, readiness, the outputs (as the client asked for
//! them) and the provenance every answer reports.

use bytes::Bytes;
use cocktail_common::Preprocess;
use cocktail_common::oip::tensor::{self, Elements, Output};
use cocktail_common::oip::{
    self, InferRequest, InferResponse, ModelMetadata, ResponseOutput, ServerMetadata,
    TensorMetadata, binary,
};
use serde::Serialize;
use serde_json::Value;

use super::views::Provenance;
use crate::serving::answer::{Answer, Vote};
use crate::serving::tasks::TaskTable;
use crate::{Master, MasterError};

/// What every answer reports about how it was made, besides the votes.
pub fn provenance(answer: &Answer) -> Provenance<'_> {
    Provenance {
        models: &answer.models,
        failed: &answer.failed,
        substitutes: &answer.substitutes,
        scheme: answer.scheme,
        cache_hit: answer.cache_hit,
        degraded: answer.degraded,
        interval: answer.interval,
        master_us: answer.master_us,
        wait_us: answer.wait_us,
        latency_met: answer.latency_met,
    }
}

/// An OIP answer's `parameters`: its provenance and the votes.
#[derive(Serialize)]
struct Parameters<'a> {
    #[serde(flatten)]
    provenance: Provenance<'a>,
    votes: &'a [Vote],
}

impl<'a> Parameters<'a> {
    fn of(answer: &'a Answer) -> Self {
        Self {
            provenance: provenance(answer),
            votes: &answer.votes,
        }
    }
}

/// The OIP answer over HTTP, borrowed from the answer and serialised once: building
/// [`InferResponse`]'s JSON map of the parameters first cost the master about 2 % of its
/// CPU per request (perf, `master-bench`'s 3-model ensemble at 8 clients).
#[derive(Serialize)]
struct HttpAnswer<'a> {
    model_name: &'a str,
    id: &'a str,
    parameters: Parameters<'a>,
    outputs: Vec<ResponseOutput>,
}

/// The OIP answer's HTTP body, and the JSON header's length when some output is binary.
pub fn oip_body(
    answer: &Answer,
    form: &InferRequest,
) -> Result<(Bytes, Option<usize>), MasterError> {
    Ok(binary::encode_response_with(
        outputs(answer, form)?,
        |outputs| HttpAnswer {
            model_name: &answer.task,
            id: &answer.id,
            parameters: Parameters::of(answer),
            outputs,
        },
    )?)
}

/// The OIP answer (gRPC's): the outputs the client asked for, in the form it asked for.
pub fn oip_response(answer: &Answer, form: &InferRequest) -> Result<InferResponse, MasterError> {
    let encoded = serde_json::to_value(Parameters::of(answer))
        .map_err(|e| MasterError::Internal(format!("encoding the answer's parameters: {e}")))?;
    let Value::Object(parameters) = encoded else {
        return Err(MasterError::Internal(format!(
            "the answer's parameters are not an object: {encoded}"
        )));
    };
    Ok(InferResponse {
        model_name: answer.task.clone(),
        model_version: None,
        id: Some(answer.id.clone()),
        parameters: Some(parameters),
        outputs: outputs(answer, form)?,
    })
}

/// The outputs the client asked for, in the form it asked for.
fn outputs(answer: &Answer, form: &InferRequest) -> Result<Vec<ResponseOutput>, MasterError> {
    let n = answer.class.len() as i64;
    let classes = answer.scores.first().map_or(0, Vec::len) as i64;
    let outputs = vec![
        Output {
            name: "class",
            shape: vec![n],
            elements: Elements::Int64(answer.class.iter().map(|&c| c as i64).collect()),
        },
        Output {
            name: "label",
            shape: vec![n],
            elements: Elements::Bytes(answer.label.clone()),
        },
        Output {
            name: "scores",
            shape: vec![n, classes],
            elements: Elements::Fp64(answer.scores.iter().flatten().copied().collect()),
        },
    ];
    Ok(tensor::answer(form, outputs)?)
}

pub fn server_metadata() -> ServerMetadata {
    ServerMetadata {
        name: "cocktail-master".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        extensions: vec!["cocktail-constraints".into(), "binary_tensor_data".into()],
    }
}

/// A task can be served when some model of it has a worker.
pub fn task_is_ready(master: &Master, task: &str) -> bool {
    master
        .tasks()
        .get(task)
        .is_some_and(|t| t.models.iter().any(|m| master.registry.serves(m)))
}

/// A task's inputs (each form it takes, with how to prepare FP32 pixels) and outputs.
pub fn task_metadata(table: &TaskTable) -> ModelMetadata {
    let tensor = |name: &str, datatype: &str, shape: Vec<i64>| TensorMetadata {
        name: name.into(),
        datatype: datatype.into(),
        shape,
        parameters: None,
    };
    let inputs = match &table.preprocess {
        Preprocess::Image(spec) => oip::image_inputs(spec),
        Preprocess::Text { .. } => vec![
            tensor(oip::TEXT, "BYTES", vec![-1]),
            tensor("input_ids", "INT64", vec![-1, -1]),
            tensor("attention_mask", "INT64", vec![-1, -1]),
        ],
        Preprocess::Tensor => oip::tensor_inputs(&table.inputs),
    };
    let classes = table.labels.len() as i64;
    ModelMetadata {
        name: table.name.clone(),
        versions: vec!["1".into()],
        platform: "cocktail-ensemble".into(),
        inputs,
        outputs: vec![
            tensor("class", "INT64", vec![-1]),
            tensor("label", "BYTES", vec![-1]),
            tensor("scores", "FP64", vec![-1, classes]),
        ],
    }
}
