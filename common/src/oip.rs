//! Open Inference Protocol v2 (KServe / Triton) wire types, as JSON over HTTP.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `POST /v2/models/{model}/infer` request body.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
pub struct InferRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub inputs: Vec<RequestInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Map<String, Value>>,
}

/// One named input tensor. `data` is flat or nested row-major; BYTES elements are
/// strings (base64 for binary data such as images, plain UTF-8 for text).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct RequestInput {
    pub name: String,
    #[serde(deserialize_with = "crate::whole::many")]
    pub shape: Vec<i64>,
    pub datatype: String,
    /// Flat or nested row-major values: numbers for numeric types, strings for BYTES.
    #[schema(value_type = Vec<Value>)]
    pub data: Value,
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

/// One named output tensor, data flat row-major.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ResponseOutput {
    pub name: String,
    pub shape: Vec<i64>,
    pub datatype: String,
    /// Flat row-major values: numbers for numeric types, strings for BYTES.
    #[schema(value_type = Vec<Value>)]
    pub data: Value,
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
}

/// Error body of every non-2xx answer.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
    pub error_type: String,
}
