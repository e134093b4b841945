//! How the master presents itself and its answers over OIP, shared by the HTTP and gRPC
//! endpoints: server and task metadata, readiness, the outputs (as the client asked for
//! them) and the provenance every answer reports.

use cocktail_common::Preprocess;
use cocktail_common::oip::tensor::{self, Elements, Output};
use cocktail_common::oip::{
    self, InferRequest, InferResponse, ModelMetadata, ServerMetadata, TensorMetadata,
};
use serde_json::{Map, Value, json};

use super::views::Provenance;
use crate::serving::answer::Answer;
use crate::serving::tasks::TaskTable;
use crate::{Master, MasterError};

/// What every answer reports about how it was made, besides the votes.
pub fn provenance(answer: &Answer) -> Provenance {
    Provenance {
        models: answer.models.clone(),
        failed: answer.failed.clone(),
        substitutes: answer.substitutes.clone(),
        scheme: answer.scheme,
        cache_hit: answer.cache_hit,
        degraded: answer.degraded,
        interval: answer.interval.clone(),
        master_us: answer.master_us,
        wait_us: answer.wait_us,
        latency_met: answer.latency_met,
    }
}

/// [`provenance`] as the fields of a JSON object (OIP `parameters`).
pub fn provenance_fields(answer: &Answer) -> Map<String, Value> {
    match serde_json::to_value(provenance(answer)) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    }
}

/// The OIP answer: the outputs the client asked for, in the form it asked for.
pub fn oip_response(answer: &Answer, form: &InferRequest) -> Result<InferResponse, MasterError> {
    let mut parameters = provenance_fields(answer);
    parameters.insert("votes".into(), json!(answer.votes));
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
    Ok(InferResponse {
        model_name: answer.task.clone(),
        model_version: None,
        id: Some(answer.id.clone()),
        parameters: Some(parameters),
        outputs: tensor::answer(form, outputs)?,
    })
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
