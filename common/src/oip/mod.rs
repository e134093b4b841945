//! Open Inference Protocol v2 (KServe / Triton) wire types. A tensor's elements travel
//! either as JSON `data` or as raw little-endian bytes (`raw`): Triton's binary tensor
//! extension over HTTP ([`binary`]) and `raw_*_contents` over gRPC. [`tensor`] reads the
//! elements whichever way they came.

pub mod binary;
pub mod limits;
pub mod tensor;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::preprocess::{ImageSpec, PixelType};
use crate::zoo::TensorSpec;

/// The input of encoded images (JPEG, PNG, WebP or GIF), BYTES `[n]`.
pub const IMAGE: &str = "image";
/// The input of prepared pixels in the model's layout and type (FP32 normalised, or
/// UINT8), e.g. `[n, 1, H, W]`.
pub const PIXELS: &str = "pixels";
/// The input of UTF-8 texts, BYTES `[n]`.
pub const TEXT: &str = "text";

/// The two forms an image model or task takes: encoded images, and pixels prepared as the
/// model expects them (the manifest's block in `parameters`, so a client can prepare them).
pub fn image_inputs(spec: &ImageSpec) -> Vec<TensorMetadata> {
    let shape = spec.shape(1).map(|d| d as i64);
    let (datatype, content) = match spec.dtype {
        PixelType::Float32 => (
            "FP32",
            "pixels p (0-255) after resize and crop, each (p / 255 - mean) / std per channel (p * scale with `scale`), in `layout`",
        ),
        PixelType::Uint8 => ("UINT8", "pixels (0-255) after resize and crop, in `layout`"),
    };
    let mut preparation = serde_json::to_value(spec)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    preparation.insert("content".into(), content.into());
    vec![
        TensorMetadata {
            name: IMAGE.into(),
            datatype: "BYTES".into(),
            shape: vec![-1],
            parameters: Some(Map::from_iter([(
                "content".into(),
                "JPEG, PNG, WebP or GIF bytes (base64 strings in JSON, raw with the binary extension)".into(),
            )])),
        },
        TensorMetadata {
            name: PIXELS.into(),
            datatype: datatype.into(),
            shape: vec![-1, shape[1], shape[2], shape[3]],
            parameters: Some(preparation),
        },
    ]
}

/// The model's own inputs, as `kind = "tensor"` and text models take them.
pub fn tensor_inputs(inputs: &[TensorSpec]) -> Vec<TensorMetadata> {
    inputs
        .iter()
        .map(|i| TensorMetadata {
            name: i.name.clone(),
            datatype: i.dtype.oip().into(),
            shape: i.shape.clone(),
            parameters: None,
        })
        .collect()
}

/// `POST /v2/models/{model}/infer` request body.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
pub struct InferRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub inputs: Vec<RequestInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
    /// The outputs wanted (all when absent); `parameters.binary_data` asks for one in
    /// binary form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Vec<RequestedOutput>>,
}

/// One named input tensor. `data` is flat or nested row-major; BYTES elements are
/// strings (base64 for binary data such as images, plain UTF-8 for text). With the binary
/// extension `data` is absent and `parameters.binary_data_size` says how many bytes of
/// the body after the JSON header are this tensor's.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct RequestInput {
    pub name: String,
    #[serde(deserialize_with = "crate::whole::many")]
    pub shape: Vec<i64>,
    pub datatype: String,
    /// Flat or nested row-major values: numbers for numeric types, strings for BYTES.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    #[schema(value_type = Vec<Value>)]
    pub data: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
    /// The elements as raw little-endian bytes (BYTES: each a 4-byte length, then the
    /// bytes), instead of `data`.
    #[serde(skip)]
    pub raw: Option<Bytes>,
}

/// An output a request asks for.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct RequestedOutput {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
}

/// `POST /v2/models/{model}/infer` response body.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct InferResponse {
    pub model_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
    pub outputs: Vec<ResponseOutput>,
}

/// One named output tensor, data flat row-major (or raw, as for inputs).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ResponseOutput {
    pub name: String,
    pub shape: Vec<i64>,
    pub datatype: String,
    /// Flat row-major values: numbers for numeric types, strings for BYTES.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    #[schema(value_type = Vec<Value>)]
    pub data: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
    #[serde(skip)]
    pub raw: Option<Bytes>,
}

/// `GET /v2` response body: the server's name, version and protocol extensions.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ServerMetadata {
    pub name: String,
    pub version: String,
    pub extensions: Vec<String>,
}

/// `GET /v2/models/{model}` response body.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ModelMetadata {
    pub name: String,
    pub versions: Vec<String>,
    pub platform: String,
    pub inputs: Vec<TensorMetadata>,
    pub outputs: Vec<TensorMetadata>,
}

#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct TensorMetadata {
    pub name: String,
    pub datatype: String,
    pub shape: Vec<i64>,
    /// What the tensor means beyond its type, e.g. how FP32 pixels are normalised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
}

/// Error body of every non-2xx answer.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
    pub error_type: String,
}
