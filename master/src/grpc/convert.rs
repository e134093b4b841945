//! Between the gRPC messages and the OIP types the rest of the master uses, and the one
//! place master errors become gRPC statuses.

use bytes::Bytes;
use cocktail_common::oip::tensor::{bytes_raw, f32_raw, f64_raw, i64_raw};
use cocktail_common::oip::{
    InferRequest, InferResponse, ModelMetadata, RequestInput, RequestedOutput, binary,
};
use serde_json::{Map, Value};
use tonic::{Code, Status};

use super::proto::infer_parameter::ParameterChoice;
use super::proto::model_infer_response::InferOutputTensor;
use super::proto::model_metadata_response::TensorMetadata;
use super::proto::{
    InferParameter, InferTensorContents, ModelInferRequest, ModelInferResponse,
    ModelMetadataResponse,
};
use crate::MasterError;

/// A request's inputs (each raw) and the rest of it; the outputs are asked for raw.
pub fn infer_request(
    request: ModelInferRequest,
) -> Result<(Vec<RequestInput>, InferRequest), MasterError> {
    let raw = request.raw_input_contents;
    if !raw.is_empty() && raw.len() != request.inputs.len() {
        return Err(MasterError::invalid(
            "raw_input_contents",
            format!(
                "holds {} tensors for {} inputs",
                raw.len(),
                request.inputs.len()
            ),
        ));
    }
    let mut raw = raw.into_iter();
    let inputs = request
        .inputs
        .into_iter()
        .map(|input| {
            let data = match (raw.next(), input.contents) {
                (Some(_), Some(_)) => {
                    return Err(MasterError::invalid(
                        "contents",
                        format!("of `{}` is set along with raw_input_contents", input.name),
                    ));
                }
                (Some(bytes), None) => bytes,
                (None, Some(contents)) => typed(&input.name, &input.datatype, contents)?,
                (None, None) => Bytes::new(),
            };
            Ok(RequestInput {
                name: input.name,
                shape: input.shape,
                datatype: input.datatype,
                data: Value::Null,
                parameters: Some(parameters(input.parameters)),
                raw: Some(data),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut parameters = parameters(request.parameters);
    parameters.insert(binary::BINARY_DATA_OUTPUT.into(), true.into());
    let outputs = (!request.outputs.is_empty()).then(|| {
        request
            .outputs
            .into_iter()
            .map(|o| RequestedOutput {
                name: o.name,
                parameters: None,
            })
            .collect()
    });
    let form = InferRequest {
        id: (!request.id.is_empty()).then_some(request.id),
        inputs: Vec::new(),
        parameters: Some(parameters),
        outputs,
    };
    Ok((inputs, form))
}

/// Typed contents in raw form; the types the master takes, others left empty (so the
/// element count names the mistake). INT8/INT16 and UINT8/UINT16 travel widened to 32
/// bits in gRPC; a value outside its type is refused, never wrapped.
fn typed(name: &str, datatype: &str, contents: InferTensorContents) -> Result<Bytes, MasterError> {
    fn narrow<W: Copy + std::fmt::Display, T: TryFrom<W>, const N: usize>(
        name: &str,
        datatype: &str,
        values: &[W],
        bytes: fn(T) -> [u8; N],
    ) -> Result<Bytes, MasterError> {
        let mut out = Vec::with_capacity(values.len() * N);
        for &v in values {
            let t = T::try_from(v).map_err(|_| {
                MasterError::invalid(
                    "contents",
                    format!("of `{name}` holds {v}, outside {datatype}"),
                )
            })?;
            out.extend_from_slice(&bytes(t));
        }
        Ok(out.into())
    }
    let c = &contents;
    Ok(match datatype {
        "FP32" => f32_raw(&c.fp32_contents),
        "FP64" => f64_raw(&c.fp64_contents),
        "INT64" => i64_raw(&c.int64_contents),
        "INT32" => narrow::<i32, i32, 4>(name, datatype, &c.int_contents, i32::to_le_bytes)?,
        "INT16" => narrow::<i32, i16, 2>(name, datatype, &c.int_contents, i16::to_le_bytes)?,
        "INT8" => narrow::<i32, i8, 1>(name, datatype, &c.int_contents, i8::to_le_bytes)?,
        "UINT64" => narrow::<u64, u64, 8>(name, datatype, &c.uint64_contents, u64::to_le_bytes)?,
        "UINT32" => narrow::<u32, u32, 4>(name, datatype, &c.uint_contents, u32::to_le_bytes)?,
        "UINT16" => narrow::<u32, u16, 2>(name, datatype, &c.uint_contents, u16::to_le_bytes)?,
        "UINT8" => narrow::<u32, u8, 1>(name, datatype, &c.uint_contents, u8::to_le_bytes)?,
        "BOOL" => c
            .bool_contents
            .iter()
            .map(|&b| u8::from(b))
            .collect::<Vec<u8>>()
            .into(),
        "BYTES" => bytes_raw(c.bytes_contents.iter().map(|b| &b[..])),
        _ => Bytes::new(),
    })
}

fn parameters(
    parameters: impl IntoIterator<Item = (String, InferParameter)>,
) -> Map<String, Value> {
    parameters
        .into_iter()
        .filter_map(|(name, p)| {
            let value = match p.parameter_choice? {
                ParameterChoice::BoolParam(b) => b.into(),
                ParameterChoice::Int64Param(i) => i.into(),
                ParameterChoice::StringParam(s) => s.into(),
                ParameterChoice::DoubleParam(d) => d.into(),
                ParameterChoice::Uint64Param(u) => u.into(),
            };
            Some((name, value))
        })
        .collect()
}

/// An answer whose outputs are all raw.
pub fn infer_response(response: InferResponse) -> ModelInferResponse {
    let mut raw = Vec::new();
    let outputs = response
        .outputs
        .into_iter()
        .map(|o| {
            raw.push(o.raw.unwrap_or_default());
            InferOutputTensor {
                name: o.name,
                datatype: o.datatype,
                shape: o.shape,
                parameters: Default::default(),
                contents: None,
            }
        })
        .collect();
    let parameters = response
        .parameters
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| (name, parameter(value)))
        .collect();
    ModelInferResponse {
        model_name: response.model_name,
        model_version: response.model_version.unwrap_or_default(),
        id: response.id.unwrap_or_default(),
        parameters,
        outputs,
        raw_output_contents: raw,
    }
}

/// A JSON value as a parameter: scalars as themselves, arrays and objects as JSON text.
fn parameter(value: Value) -> InferParameter {
    let choice = match value {
        Value::Bool(b) => ParameterChoice::BoolParam(b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => ParameterChoice::Int64Param(i),
            (None, Some(f)) => ParameterChoice::DoubleParam(f),
            _ => ParameterChoice::StringParam(n.to_string()),
        },
        Value::String(s) => ParameterChoice::StringParam(s),
        other => ParameterChoice::StringParam(other.to_string()),
    };
    InferParameter {
        parameter_choice: Some(choice),
    }
}

pub fn metadata(metadata: ModelMetadata) -> ModelMetadataResponse {
    let tensors = |tensors: Vec<cocktail_common::oip::TensorMetadata>| {
        tensors
            .into_iter()
            .map(|t| TensorMetadata {
                name: t.name,
                datatype: t.datatype,
                shape: t.shape,
            })
            .collect()
    };
    ModelMetadataResponse {
        name: metadata.name,
        versions: metadata.versions,
        platform: metadata.platform,
        inputs: tensors(metadata.inputs),
        outputs: tensors(metadata.outputs),
    }
}

/// The one place master errors become gRPC statuses, as `http::error` does for HTTP. The
/// match is exhaustive on purpose: a new variant must decide its code here.
impl From<MasterError> for Status {
    fn from(error: MasterError) -> Self {
        let code = match &error {
            MasterError::InvalidInput { .. }
            | MasterError::Malformed(_)
            | MasterError::UnsupportedMediaType(_) => Code::InvalidArgument,
            MasterError::Rejected { status, .. } if *status == 413 => Code::ResourceExhausted,
            MasterError::Rejected { .. } => Code::InvalidArgument,
            MasterError::PayloadTooLarge { .. }
            | MasterError::RateLimited { .. }
            | MasterError::Overloaded { .. } => Code::ResourceExhausted,
            MasterError::Unauthorized { .. } => Code::Unauthenticated,
            MasterError::Forbidden { .. } => Code::PermissionDenied,
            MasterError::UnknownTask { .. }
            | MasterError::UnknownRequest { .. }
            | MasterError::UnknownInstance { .. }
            | MasterError::UnknownPool { .. }
            | MasterError::NoController => Code::NotFound,
            MasterError::NoWorkers { .. } | MasterError::AllMembersFailed(_) => Code::Unavailable,
            MasterError::AllMembersLate(_) => Code::DeadlineExceeded,
            MasterError::Provider(_) => Code::Unavailable,
            MasterError::ZooRefused(_) => Code::FailedPrecondition,
            MasterError::Common(_) | MasterError::Internal(_) => Code::Internal,
        };
        let message = if code == Code::Internal {
            tracing::error!(error = %error, "gRPC request failed");
            "internal error in the master".to_owned()
        } else {
            error.to_string()
        };
        metrics::counter!("cocktail_master_grpc_errors_total", "code" => format!("{code:?}"))
            .increment(1);
        Status::new(code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
    use super::*;

    fn double(v: f64) -> InferParameter {
        InferParameter {
            parameter_choice: Some(ParameterChoice::DoubleParam(v)),
        }
    }

    #[test]
    fn raw_and_typed_contents_become_raw_inputs() {
        let request = ModelInferRequest {
            model_name: "fashion".into(),
            parameters: [("latency_ms".to_owned(), double(50.0))].into(),
            inputs: vec![InferInputTensor {
                name: "pixels".into(),
                datatype: "FP32".into(),
                shape: vec![1, 2],
                parameters: Default::default(),
                contents: Some(InferTensorContents {
                    fp32_contents: vec![0.5, 1.5],
                    ..Default::default()
                }),
            }],
            outputs: vec![InferRequestedOutputTensor {
                name: "class".into(),
                parameters: Default::default(),
            }],
            ..Default::default()
        };
        let (inputs, form) = infer_request(request).unwrap();
        assert_eq!(inputs[0].raw.as_deref(), Some(&f32_raw(&[0.5, 1.5])[..]));
        let parameters = form.parameters.as_ref().unwrap();
        assert_eq!(parameters["latency_ms"], 50.0);
        assert_eq!(parameters[binary::BINARY_DATA_OUTPUT], true);
        assert_eq!(form.outputs.unwrap()[0].name, "class");
        assert_eq!(form.id, None);
    }

    #[test]
    fn typed_contents_of_every_type_become_little_endian_bytes() {
        let contents = |f: fn(&mut InferTensorContents)| {
            let mut c = InferTensorContents::default();
            f(&mut c);
            c
        };
        let cases: Vec<(&str, InferTensorContents, Vec<u8>)> = vec![
            (
                "INT8",
                contents(|c| c.int_contents = vec![-1, 2]),
                vec![0xFF, 2],
            ),
            (
                "INT16",
                contents(|c| c.int_contents = vec![-2]),
                vec![0xFE, 0xFF],
            ),
            (
                "UINT8",
                contents(|c| c.uint_contents = vec![255, 0]),
                vec![255, 0],
            ),
            (
                "UINT64",
                contents(|c| c.uint64_contents = vec![1]),
                1_u64.to_le_bytes().to_vec(),
            ),
            (
                "FP64",
                contents(|c| c.fp64_contents = vec![0.5]),
                0.5_f64.to_le_bytes().to_vec(),
            ),
            (
                "BOOL",
                contents(|c| c.bool_contents = vec![true, false]),
                vec![1, 0],
            ),
        ];
        for (datatype, c, expected) in cases {
            assert_eq!(
                typed("t", datatype, c).unwrap().to_vec(),
                expected,
                "{datatype}"
            );
        }
        let error = typed("t", "INT8", contents(|c| c.int_contents = vec![300]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`contents`") && error.contains("300") && error.contains("INT8"),
            "{error}"
        );
    }

    #[test]
    fn raw_contents_must_match_the_inputs() {
        let request = ModelInferRequest {
            inputs: vec![InferInputTensor::default(), InferInputTensor::default()],
            raw_input_contents: vec![Bytes::new()],
            ..Default::default()
        };
        let error = infer_request(request).unwrap_err().to_string();
        assert!(error.contains("raw_input_contents") && error.contains("1 tensors for 2"));
    }

    #[test]
    fn input_errors_are_invalid_argument_and_name_the_field() {
        let status = Status::from(MasterError::invalid("latency_ms", "is required"));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("latency_ms"));
        let status = Status::from(MasterError::NoWorkers { task: "t".into() });
        assert_eq!(status.code(), Code::Unavailable);
        let late = vec![crate::error::MemberFailure {
            model: "cnn".into(),
            error: "missed the deadline".into(),
        }];
        let status = Status::from(MasterError::AllMembersLate(late));
        assert_eq!(status.code(), Code::DeadlineExceeded);
        assert!(status.message().contains("cnn: missed the deadline"));
    }
}
