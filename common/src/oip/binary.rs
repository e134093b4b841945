//! Triton's binary tensor data extension to OIP over HTTP, as `tritonclient` speaks it by
//! default: the body is a JSON header of `Inference-Header-Content-Length` bytes followed
//! by each binary tensor's bytes, in the order of the header's tensors; a tensor in binary
//! form says how many bytes are its own in `parameters.binary_data_size` and carries no
//! `data`. Requests ask for binary outputs with `parameters.binary_data_output` (all) or an
//! output's `parameters.binary_data`. Written by hand: no crate implements it.
//! <https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md>

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{InferRequest, InferResponse, RequestInput, ResponseOutput};
use crate::oip::tensor::WireError;

/// The HTTP header that gives the JSON header's length.
pub const HEADER_LENGTH: &str = "inference-header-content-length";
/// A tensor parameter: how many bytes after the JSON header are this tensor's.
pub const BINARY_DATA_SIZE: &str = "binary_data_size";
/// An output parameter: answer this output in binary form.
pub const BINARY_DATA: &str = "binary_data";
/// A request parameter: answer every output in binary form.
pub const BINARY_DATA_OUTPUT: &str = "binary_data_output";

/// A tensor that may travel in binary form.
pub trait BinaryTensor {
    fn name(&self) -> &str;
    fn parameters_mut(&mut self) -> &mut Option<Map<String, Value>>;
    fn raw_mut(&mut self) -> &mut Option<Bytes>;
    fn data_mut(&mut self) -> &mut Value;
}

macro_rules! binary_tensor {
    ($t:ty) => {
        impl BinaryTensor for $t {
            fn name(&self) -> &str {
                &self.name
            }
            fn parameters_mut(&mut self) -> &mut Option<Map<String, Value>> {
                &mut self.parameters
            }
            fn raw_mut(&mut self) -> &mut Option<Bytes> {
                &mut self.raw
            }
            fn data_mut(&mut self) -> &mut Value {
                &mut self.data
            }
        }
    };
}
binary_tensor!(RequestInput);
binary_tensor!(ResponseOutput);

/// The `Inference-Header-Content-Length` header's value, if the request has one.
pub fn header_length(value: Option<&[u8]>) -> Result<Option<usize>, WireError> {
    let Some(value) = value else {
        return Ok(None);
    };
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map(Some)
        .ok_or_else(|| {
            WireError::invalid(
                "Inference-Header-Content-Length",
                "must be the JSON header's length in bytes",
            )
        })
}

/// A request body: JSON alone, or (with a header length) JSON then binary tensors.
pub fn decode_request(body: Bytes, header: Option<usize>) -> Result<InferRequest, WireError> {
    let (json, rest) = split(body, header)?;
    let mut request: InferRequest = parse_json(&json)?;
    attach(&mut request.inputs, rest)?;
    Ok(request)
}

/// A response body, as [`decode_request`].
pub fn decode_response(body: Bytes, header: Option<usize>) -> Result<InferResponse, WireError> {
    let (json, rest) = split(body, header)?;
    let mut response: InferResponse = parse_json(&json)?;
    attach(&mut response.outputs, rest)?;
    Ok(response)
}

/// A request's body and, when some input is raw, the JSON header's length.
pub fn encode_request(mut request: InferRequest) -> Result<(Bytes, Option<usize>), WireError> {
    let chunks = detach(&mut request.inputs);
    encode(&request, chunks)
}

/// A response's body and, when some output is raw, the JSON header's length.
pub fn encode_response(mut response: InferResponse) -> Result<(Bytes, Option<usize>), WireError> {
    let outputs = std::mem::take(&mut response.outputs);
    encode_response_with(outputs, |outputs| InferResponse {
        outputs,
        ..response
    })
}

/// A response's body and, when some output is raw, the JSON header's length, for a
/// response of the caller's own type: `message` makes it from the outputs, their raw
/// data detached (the master serialises its answers borrowed, without an
/// [`InferResponse`] of copies).
pub fn encode_response_with<M: Serialize>(
    mut outputs: Vec<ResponseOutput>,
    message: impl FnOnce(Vec<ResponseOutput>) -> M,
) -> Result<(Bytes, Option<usize>), WireError> {
    let chunks = detach(&mut outputs);
    encode(&message(outputs), chunks)
}

/// Whether a request asks for `output` in binary form.
pub fn wants_binary(request: &InferRequest, output: &str) -> bool {
    let flag = |p: &Option<Map<String, Value>>, key: &str| {
        p.as_ref().and_then(|p| p.get(key)).and_then(Value::as_bool)
    };
    let asked = request
        .outputs
        .iter()
        .flatten()
        .find(|o| o.name == output)
        .and_then(|o| flag(&o.parameters, BINARY_DATA));
    asked
        .or_else(|| flag(&request.parameters, BINARY_DATA_OUTPUT))
        .unwrap_or(false)
}

fn parse_json<T: serde::de::DeserializeOwned>(json: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(json).map_err(|e| {
        if e.is_data() {
            WireError::invalid("body", e.to_string())
        } else {
            WireError::Malformed(format!("not valid JSON: {e}"))
        }
    })
}

fn split(mut body: Bytes, header: Option<usize>) -> Result<(Bytes, Bytes), WireError> {
    let Some(length) = header else {
        return Ok((body, Bytes::new()));
    };
    if length > body.len() {
        return Err(WireError::invalid(
            "Inference-Header-Content-Length",
            format!("is {length}, beyond the body's {} bytes", body.len()),
        ));
    }
    let json = body.split_to(length);
    Ok((json, body))
}

/// Hands each binary tensor its bytes from `rest`, in order.
fn attach<T: BinaryTensor>(tensors: &mut [T], mut rest: Bytes) -> Result<(), WireError> {
    for tensor in tensors {
        let size = match tensor
            .parameters_mut()
            .as_ref()
            .and_then(|p| p.get(BINARY_DATA_SIZE))
        {
            None => continue,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| format!("must be a byte count; given {v}")),
        };
        let size = size.map_err(|message| {
            WireError::invalid(
                BINARY_DATA_SIZE,
                format!("of `{}` {message}", tensor.name()),
            )
        })?;
        if !tensor.data_mut().is_null() {
            return Err(WireError::invalid(
                "data",
                format!("`{}` has both `data` and `binary_data_size`", tensor.name()),
            ));
        }
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size > rest.len() {
            return Err(WireError::invalid(
                BINARY_DATA_SIZE,
                format!(
                    "of `{}` is {size} but only {} bytes follow the header",
                    tensor.name(),
                    rest.len()
                ),
            ));
        }
        *tensor.raw_mut() = Some(rest.split_to(size));
    }
    if !rest.is_empty() {
        return Err(WireError::invalid(
            "body",
            format!(
                "{} bytes follow the binary tensors that no `binary_data_size` claims",
                rest.len()
            ),
        ));
    }
    Ok(())
}

/// Takes each raw tensor's bytes out, marking its size in the header.
fn detach<T: BinaryTensor>(tensors: &mut [T]) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    for tensor in tensors {
        let Some(raw) = tensor.raw_mut().take() else {
            continue;
        };
        tensor
            .parameters_mut()
            .get_or_insert_with(Map::new)
            .insert(BINARY_DATA_SIZE.into(), raw.len().into());
        *tensor.data_mut() = Value::Null;
        chunks.push(raw);
    }
    chunks
}

fn encode<M: Serialize>(
    message: &M,
    chunks: Vec<Bytes>,
) -> Result<(Bytes, Option<usize>), WireError> {
    let json = serde_json::to_vec(message)
        .map_err(|e| WireError::Malformed(format!("encoding JSON: {e}")))?;
    if chunks.is_empty() {
        return Ok((json.into(), None));
    }
    let length = json.len();
    let mut body = BytesMut::with_capacity(length + chunks.iter().map(Bytes::len).sum::<usize>());
    body.put_slice(&json);
    for chunk in chunks {
        body.put(chunk);
    }
    Ok((body.freeze(), Some(length)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oip::tensor::{bytes_raw, f32_raw};
    use serde_json::json;

    fn input(name: &str, datatype: &str, shape: Vec<i64>, raw: Bytes) -> RequestInput {
        RequestInput {
            name: name.into(),
            shape,
            datatype: datatype.into(),
            data: Value::Null,
            parameters: None,
            raw: Some(raw),
        }
    }

    #[test]
    fn requests_round_trip_in_tritonclients_layout() {
        let request = InferRequest {
            id: Some("7".into()),
            inputs: vec![
                input(
                    "image",
                    "BYTES",
                    vec![2],
                    bytes_raw([&b"png"[..], &b"jpeg!"[..]]),
                ),
                input("pixels", "FP32", vec![1, 2], f32_raw(&[0.5, -1.0])),
            ],
            parameters: Some(Map::from_iter([("latency_ms".into(), json!(10))])),
            outputs: None,
        };
        let (body, header) = encode_request(request).unwrap();
        let header = header.unwrap();
        let json: Value = serde_json::from_slice(&body[..header]).unwrap();
        assert_eq!(
            json["inputs"][0]["parameters"]["binary_data_size"],
            4 + 3 + 4 + 5
        );
        assert_eq!(json["inputs"][1]["parameters"]["binary_data_size"], 8);
        assert!(json["inputs"][0].get("data").is_none());
        assert_eq!(&body[header..header + 4], &3_u32.to_le_bytes());

        let back = decode_request(body, Some(header)).unwrap();
        assert_eq!(back.id.as_deref(), Some("7"));
        assert_eq!(
            back.inputs[1].raw.as_deref(),
            Some(&f32_raw(&[0.5, -1.0])[..])
        );
    }

    /// A response of the caller's own type encodes as the same [`InferResponse`] would.
    #[test]
    fn a_borrowed_response_encodes_as_an_infer_response() {
        let outputs = || {
            vec![ResponseOutput {
                name: "scores".into(),
                shape: vec![1, 2],
                datatype: "FP32".into(),
                data: Value::Null,
                parameters: None,
                raw: Some(f32_raw(&[0.25, 0.75])),
            }]
        };
        let parameters = Map::from_iter([("votes".into(), json!([1, 2]))]);
        let owned = encode_response(InferResponse {
            model_name: "fashion".into(),
            model_version: None,
            id: Some("r1".into()),
            parameters: Some(parameters.clone()),
            outputs: outputs(),
        })
        .unwrap();
        #[derive(Serialize)]
        struct Borrowed<'a> {
            model_name: &'a str,
            id: &'a str,
            parameters: &'a Map<String, Value>,
            outputs: Vec<ResponseOutput>,
        }
        let borrowed = encode_response_with(outputs(), |outputs| Borrowed {
            model_name: "fashion",
            id: "r1",
            parameters: &parameters,
            outputs,
        })
        .unwrap();
        assert_eq!(borrowed, owned);
        let (body, header) = borrowed;
        let back = decode_response(body, header).unwrap();
        assert_eq!(
            back.outputs[0].raw.as_deref(),
            Some(&f32_raw(&[0.25, 0.75])[..])
        );
    }

    #[test]
    fn sizes_must_add_up() {
        let header = br#"{"inputs":[{"name":"pixels","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":8}}]}"#;
        let mut body = header.to_vec();
        body.extend_from_slice(&[0; 4]);
        let short = decode_request(body.clone().into(), Some(header.len())).unwrap_err();
        assert!(short.to_string().contains("only 4 bytes follow"), "{short}");
        body.extend_from_slice(&[0; 8]);
        let long = decode_request(body.into(), Some(header.len())).unwrap_err();
        assert!(long.to_string().contains("4 bytes follow"), "{long}");
        let beyond = decode_request(Bytes::from_static(b"{}"), Some(3)).unwrap_err();
        assert!(beyond.to_string().contains("beyond the body"), "{beyond}");
    }

    #[test]
    fn binary_outputs_are_asked_per_output_or_for_all() {
        let mut request: InferRequest = serde_json::from_value(json!({
            "inputs": [],
            "outputs": [{"name": "class", "parameters": {"binary_data": false}}],
            "parameters": {"binary_data_output": true}
        }))
        .unwrap();
        assert!(!wants_binary(&request, "class"));
        assert!(wants_binary(&request, "scores"));
        request.parameters = None;
        assert!(!wants_binary(&request, "scores"));
    }
}
