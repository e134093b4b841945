//! Reading a tensor's elements whichever way they travelled (JSON `data` or raw
//! little-endian bytes), and writing raw elements. Every check names the field and the
//! limit, so master and worker pass these errors straight to the client.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use super::{RequestInput, ResponseOutput};
use crate::zoo::DType;

/// A request or response the peer got wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    /// Not parseable at all (not JSON): a 400.
    #[error("{0}")]
    Malformed(String),
    /// Parseable but not valid: a 422 naming the field.
    #[error("`{field}` {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

impl WireError {
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            message: message.into(),
        }
    }
}

/// A tensor's name, type and elements, input or output alike.
pub trait Tensor {
    fn name(&self) -> &str;
    fn datatype(&self) -> &str;
    fn data(&self) -> &Value;
    fn raw(&self) -> Option<&Bytes>;
}

macro_rules! tensor {
    ($t:ty) => {
        impl Tensor for $t {
            fn name(&self) -> &str {
                &self.name
            }
            fn datatype(&self) -> &str {
                &self.datatype
            }
            fn data(&self) -> &Value {
                &self.data
            }
            fn raw(&self) -> Option<&Bytes> {
                self.raw.as_ref()
            }
        }
    };
}
tensor!(RequestInput);
tensor!(ResponseOutput);

/// One BYTES element: a JSON string (base64 for images, by this project's convention) or
/// raw bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ByteItem<'a> {
    Json(&'a str),
    Raw(&'a [u8]),
}

/// The elements of a BYTES tensor: exactly `n`.
pub fn byte_items(tensor: &impl Tensor, n: usize) -> Result<Vec<ByteItem<'_>>, WireError> {
    let items: Vec<ByteItem<'_>> = match tensor.raw() {
        Some(raw) => raw_byte_items(raw)?
            .into_iter()
            .map(ByteItem::Raw)
            .collect(),
        None => {
            let Value::Array(values) = tensor.data() else {
                return Err(WireError::invalid("data", "must be an array of strings"));
            };
            values
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(ByteItem::Json)
                        .ok_or_else(|| WireError::invalid("data", "must be an array of strings"))
                })
                .collect::<Result<_, _>>()?
        }
    };
    if items.len() != n {
        return Err(WireError::invalid(
            "data",
            format!(
                "of `{}` holds {} elements; shape says {n}",
                tensor.name(),
                items.len()
            ),
        ));
    }
    Ok(items)
}

/// How many elements a tensor holds (leaves of nested JSON arrays, or raw elements).
pub fn element_count(tensor: &impl Tensor) -> Result<usize, WireError> {
    match tensor.raw() {
        Some(raw) => match element_size(tensor.datatype()) {
            Some(size) if raw.len() % size == 0 => Ok(raw.len() / size),
            Some(size) => Err(WireError::invalid(
                "binary_data_size",
                format!(
                    "of `{}` is {} bytes, not a whole number of {size}-byte {} elements",
                    tensor.name(),
                    raw.len(),
                    tensor.datatype()
                ),
            )),
            None => Ok(raw_byte_items(raw)?.len()),
        },
        None => flat_len(tensor.data()).ok_or_else(|| {
            WireError::invalid("data", format!("of `{}` must be an array", tensor.name()))
        }),
    }
}

/// The elements of an FP32 tensor: exactly `n` finite values.
pub fn f32s(tensor: &impl Tensor, n: usize) -> Result<Vec<f32>, WireError> {
    let values = match tensor.raw() {
        Some(raw) => fixed::<4, f32>(tensor, raw, n, f32::from_le_bytes)?,
        None => json_numbers(tensor.data(), n)?
            .into_iter()
            .map(|v| {
                // A finite f64 beyond f32's range would reach the model as infinity.
                if v.abs() > f64::from(f32::MAX) {
                    Err(WireError::invalid(
                        "data",
                        format!("FP32 values must be within ±{:e}; given {v:e}", f32::MAX),
                    ))
                } else {
                    Ok(v as f32)
                }
            })
            .collect::<Result<_, _>>()?,
    };
    if values.iter().any(|v| !v.is_finite()) {
        return Err(WireError::invalid("data", "numbers must be finite"));
    }
    Ok(values)
}

/// The elements of an INT64 tensor: exactly `n` integers.
pub fn i64s(tensor: &impl Tensor, n: usize) -> Result<Vec<i64>, WireError> {
    match tensor.raw() {
        Some(raw) => fixed::<8, i64>(tensor, raw, n, i64::from_le_bytes),
        None => json_numbers(tensor.data(), n)?
            .into_iter()
            .map(|v| {
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    Ok(v as i64)
                } else {
                    Err(WireError::invalid(
                        "data",
                        format!("INT64 values must be integers; given {v}"),
                    ))
                }
            })
            .collect(),
    }
}

/// Bytes per element of a fixed-size type; `None` for BYTES and unknown types.
pub fn element_size(datatype: &str) -> Option<usize> {
    match datatype {
        "BOOL" | "UINT8" | "INT8" => Some(1),
        "UINT16" | "INT16" | "FP16" | "BF16" => Some(2),
        "UINT32" | "INT32" | "FP32" => Some(4),
        "UINT64" | "INT64" | "FP64" => Some(8),
        _ => None,
    }
}

/// BYTES elements in raw form: each a 4-byte little-endian length, then its bytes.
pub fn bytes_raw<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Bytes {
    let mut out = BytesMut::new();
    for item in items {
        // An element over 4 GiB cannot be framed; bodies are limited far below that.
        out.put_u32_le(u32::try_from(item.len()).unwrap_or(u32::MAX));
        out.put_slice(item);
    }
    out.freeze()
}

/// FP32 elements in raw form.
pub fn f32_raw(values: &[f32]) -> Bytes {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

/// FP64 elements in raw form.
pub fn f64_raw(values: &[f64]) -> Bytes {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

/// INT64 elements in raw form.
pub fn i64_raw(values: &[i64]) -> Bytes {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>()
        .into()
}

/// An output's elements, sent as JSON or raw as the request asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Elements {
    Int64(Vec<i64>),
    Fp32(Vec<f32>),
    Fp64(Vec<f64>),
    Bytes(Vec<String>),
}

impl Elements {
    pub fn datatype(&self) -> &'static str {
        match self {
            Self::Int64(_) => "INT64",
            Self::Fp32(_) => "FP32",
            Self::Fp64(_) => "FP64",
            Self::Bytes(_) => "BYTES",
        }
    }

    fn json(self) -> Value {
        match self {
            Self::Int64(v) => v.into(),
            Self::Fp32(v) => v.into(),
            Self::Fp64(v) => v.into(),
            Self::Bytes(v) => v.into(),
        }
    }

    fn raw(&self) -> Bytes {
        match self {
            Self::Int64(v) => i64_raw(v),
            Self::Fp32(v) => f32_raw(v),
            Self::Fp64(v) => f64_raw(v),
            Self::Bytes(v) => bytes_raw(v.iter().map(String::as_bytes)),
        }
    }
}

/// One output a server can answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub name: &'static str,
    pub shape: Vec<i64>,
    pub elements: Elements,
}

/// The outputs `request` asks for (all when it names none), each in the form it asks for
/// (see [`super::binary::wants_binary`]). Naming an output the server lacks is an error.
pub fn answer(
    request: &super::InferRequest,
    outputs: Vec<Output>,
) -> Result<Vec<ResponseOutput>, WireError> {
    if let Some(asked) = &request.outputs
        && let Some(unknown) = asked
            .iter()
            .find(|a| !outputs.iter().any(|o| o.name == a.name))
    {
        let names: Vec<&str> = outputs.iter().map(|o| o.name).collect();
        return Err(WireError::invalid(
            "outputs",
            format!("names `{}`; the outputs are {names:?}", unknown.name),
        ));
    }
    Ok(outputs
        .into_iter()
        .filter(|o| {
            request
                .outputs
                .as_ref()
                .is_none_or(|asked| asked.iter().any(|a| a.name == o.name))
        })
        .map(|o| {
            let binary = super::binary::wants_binary(request, o.name);
            let datatype = o.elements.datatype().to_owned();
            let (data, raw) = if binary {
                (Value::Null, Some(o.elements.raw()))
            } else {
                (o.elements.json(), None)
            };
            ResponseOutput {
                name: o.name.to_owned(),
                shape: o.shape,
                datatype,
                data,
                parameters: None,
                raw,
            }
        })
        .collect())
}

fn raw_byte_items(mut raw: &[u8]) -> Result<Vec<&[u8]>, WireError> {
    let mut items = Vec::new();
    while !raw.is_empty() {
        let (length, rest) = raw.split_first_chunk::<4>().ok_or_else(|| {
            WireError::invalid("data", "BYTES element is cut inside its 4-byte length")
        })?;
        let length = u32::from_le_bytes(*length) as usize;
        if length > rest.len() {
            return Err(WireError::invalid(
                "data",
                format!(
                    "BYTES element says {length} bytes but {} remain",
                    rest.len()
                ),
            ));
        }
        let (item, rest) = rest.split_at(length);
        items.push(item);
        raw = rest;
    }
    Ok(items)
}

fn fixed<const N: usize, T>(
    tensor: &impl Tensor,
    raw: &[u8],
    n: usize,
    decode: fn([u8; N]) -> T,
) -> Result<Vec<T>, WireError> {
    if raw.len() != n * N {
        return Err(WireError::invalid(
            "binary_data_size",
            format!(
                "of `{}` is {} bytes; shape says {n} elements of {N} bytes",
                tensor.name(),
                raw.len()
            ),
        ));
    }
    Ok(raw
        .chunks_exact(N)
        .filter_map(|c| c.try_into().ok().map(decode))
        .collect())
}

/// The elements of a numeric or BOOL tensor of any fixed-size type the project feeds.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
}

impl Typed {
    /// An empty list of the type of `dtype`.
    pub fn empty(dtype: DType) -> Self {
        match dtype {
            DType::Float32 => Self::F32(Vec::new()),
            DType::Float64 => Self::F64(Vec::new()),
            DType::Int8 => Self::I8(Vec::new()),
            DType::Int16 => Self::I16(Vec::new()),
            DType::Int32 => Self::I32(Vec::new()),
            DType::Int64 => Self::I64(Vec::new()),
            DType::Uint8 => Self::U8(Vec::new()),
            DType::Uint16 => Self::U16(Vec::new()),
            DType::Uint32 => Self::U32(Vec::new()),
            DType::Uint64 => Self::U64(Vec::new()),
            DType::Bool => Self::Bool(Vec::new()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Self::F32(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::U8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows `rows` (each `row_len` elements; repeats allowed), in that order.
    pub fn rows(&self, rows: &[usize], row_len: usize) -> Self {
        fn pick<T: Clone>(v: &[T], rows: &[usize], row_len: usize) -> Vec<T> {
            rows.iter()
                .flat_map(|&r| v[r * row_len..(r + 1) * row_len].iter().cloned())
                .collect()
        }
        match self {
            Self::F32(v) => Self::F32(pick(v, rows, row_len)),
            Self::F64(v) => Self::F64(pick(v, rows, row_len)),
            Self::I8(v) => Self::I8(pick(v, rows, row_len)),
            Self::I16(v) => Self::I16(pick(v, rows, row_len)),
            Self::I32(v) => Self::I32(pick(v, rows, row_len)),
            Self::I64(v) => Self::I64(pick(v, rows, row_len)),
            Self::U8(v) => Self::U8(pick(v, rows, row_len)),
            Self::U16(v) => Self::U16(pick(v, rows, row_len)),
            Self::U32(v) => Self::U32(pick(v, rows, row_len)),
            Self::U64(v) => Self::U64(pick(v, rows, row_len)),
            Self::Bool(v) => Self::Bool(pick(v, rows, row_len)),
        }
    }

    /// Appends `other`'s elements; `false` when the types differ.
    pub fn extend(&mut self, other: &Self) -> bool {
        match (self, other) {
            (Self::F32(a), Self::F32(b)) => a.extend_from_slice(b),
            (Self::F64(a), Self::F64(b)) => a.extend_from_slice(b),
            (Self::I8(a), Self::I8(b)) => a.extend_from_slice(b),
            (Self::I16(a), Self::I16(b)) => a.extend_from_slice(b),
            (Self::I32(a), Self::I32(b)) => a.extend_from_slice(b),
            (Self::I64(a), Self::I64(b)) => a.extend_from_slice(b),
            (Self::U8(a), Self::U8(b)) => a.extend_from_slice(b),
            (Self::U16(a), Self::U16(b)) => a.extend_from_slice(b),
            (Self::U32(a), Self::U32(b)) => a.extend_from_slice(b),
            (Self::U64(a), Self::U64(b)) => a.extend_from_slice(b),
            (Self::Bool(a), Self::Bool(b)) => a.extend_from_slice(b),
            _ => return false,
        }
        true
    }
}

/// The elements of a tensor of type `dtype`: exactly `n`, each in the type's range (JSON
/// numbers must be integers for integer types, `true`/`false` for BOOL).
pub fn typed(tensor: &impl Tensor, dtype: DType, n: usize) -> Result<Typed, WireError> {
    if tensor.datatype() != dtype.oip() {
        return Err(WireError::invalid(
            "datatype",
            format!(
                "of `{}` must be {}; given `{}`",
                tensor.name(),
                dtype.oip(),
                tensor.datatype()
            ),
        ));
    }
    if let Some(raw) = tensor.raw() {
        return Ok(match dtype {
            DType::Float32 => Typed::F32(f32s(tensor, n)?),
            DType::Float64 => {
                let v = fixed::<8, f64>(tensor, raw, n, f64::from_le_bytes)?;
                if v.iter().any(|x| !x.is_finite()) {
                    return Err(WireError::invalid("data", "numbers must be finite"));
                }
                Typed::F64(v)
            }
            DType::Int8 => Typed::I8(fixed::<1, i8>(tensor, raw, n, i8::from_le_bytes)?),
            DType::Int16 => Typed::I16(fixed::<2, i16>(tensor, raw, n, i16::from_le_bytes)?),
            DType::Int32 => Typed::I32(fixed::<4, i32>(tensor, raw, n, i32::from_le_bytes)?),
            DType::Int64 => Typed::I64(fixed::<8, i64>(tensor, raw, n, i64::from_le_bytes)?),
            DType::Uint8 => Typed::U8(fixed::<1, u8>(tensor, raw, n, u8::from_le_bytes)?),
            DType::Uint16 => Typed::U16(fixed::<2, u16>(tensor, raw, n, u16::from_le_bytes)?),
            DType::Uint32 => Typed::U32(fixed::<4, u32>(tensor, raw, n, u32::from_le_bytes)?),
            DType::Uint64 => Typed::U64(fixed::<8, u64>(tensor, raw, n, u64::from_le_bytes)?),
            DType::Bool => {
                let bytes = fixed::<1, u8>(tensor, raw, n, u8::from_le_bytes)?;
                if bytes.iter().any(|&b| b > 1) {
                    return Err(WireError::invalid("data", "BOOL bytes must be 0 or 1"));
                }
                Typed::Bool(bytes.into_iter().map(|b| b == 1).collect())
            }
        });
    }
    let leaves = json_leaves(tensor.data(), n)?;
    fn ints<T: TryFrom<i64>>(leaves: &[&Value], kind: &str) -> Result<Vec<T>, WireError> {
        leaves
            .iter()
            .map(|v| {
                v.as_i64().and_then(|i| T::try_from(i).ok()).ok_or_else(|| {
                    WireError::invalid(
                        "data",
                        format!("{kind} values must be integers in range; given {v}"),
                    )
                })
            })
            .collect()
    }
    let floats = |leaves: &[&Value]| -> Result<Vec<f64>, WireError> {
        leaves
            .iter()
            .map(|v| {
                v.as_f64().filter(|f| f.is_finite()).ok_or_else(|| {
                    WireError::invalid("data", format!("must hold finite numbers; given {v}"))
                })
            })
            .collect()
    };
    Ok(match dtype {
        DType::Float32 => Typed::F32(f32s(tensor, n)?),
        DType::Float64 => Typed::F64(floats(&leaves)?),
        DType::Int8 => Typed::I8(ints(&leaves, "INT8")?),
        DType::Int16 => Typed::I16(ints(&leaves, "INT16")?),
        DType::Int32 => Typed::I32(ints(&leaves, "INT32")?),
        DType::Int64 => Typed::I64(ints(&leaves, "INT64")?),
        DType::Uint8 => Typed::U8(ints(&leaves, "UINT8")?),
        DType::Uint16 => Typed::U16(ints(&leaves, "UINT16")?),
        DType::Uint32 => Typed::U32(ints(&leaves, "UINT32")?),
        DType::Uint64 => Typed::U64(
            leaves
                .iter()
                .map(|v| {
                    v.as_u64().ok_or_else(|| {
                        WireError::invalid(
                            "data",
                            format!("UINT64 values must be integers in range; given {v}"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
        DType::Bool => Typed::Bool(
            leaves
                .iter()
                .map(|v| {
                    v.as_bool().ok_or_else(|| {
                        WireError::invalid(
                            "data",
                            format!("BOOL values must be true or false; given {v}"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// The leaves of JSON `data`, flat or nested: exactly `expected`, none an object or null.
fn json_leaves(data: &Value, expected: usize) -> Result<Vec<&Value>, WireError> {
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Value>, expected: usize) -> Result<(), WireError> {
        match v {
            Value::Array(items) => items.iter().try_for_each(|i| walk(i, out, expected)),
            Value::Number(_) | Value::Bool(_) if out.len() < expected => {
                out.push(v);
                Ok(())
            }
            Value::Number(_) | Value::Bool(_) => Err(WireError::invalid(
                "data",
                format!("holds more than the {expected} elements its shape says"),
            )),
            _ => Err(WireError::invalid(
                "data",
                "must hold only numbers or booleans",
            )),
        }
    }
    if !data.is_array() {
        return Err(WireError::invalid("data", "must be an array"));
    }
    let mut out = Vec::with_capacity(expected);
    walk(data, &mut out, expected)?;
    if out.len() != expected {
        return Err(WireError::invalid(
            "data",
            format!("holds {} elements; shape says {expected}", out.len()),
        ));
    }
    Ok(out)
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

/// The numbers of JSON `data`, flat or nested: exactly `expected` finite numbers.
fn json_numbers(data: &Value, expected: usize) -> Result<Vec<f64>, WireError> {
    fn walk(v: &Value, out: &mut Vec<f64>, expected: usize) -> Result<(), WireError> {
        match v {
            Value::Array(items) => items.iter().try_for_each(|i| walk(i, out, expected)),
            Value::Number(n) if out.len() < expected => {
                out.push(n.as_f64().filter(|f| f.is_finite()).unwrap_or(f64::NAN));
                Ok(())
            }
            // One number past `expected` is enough to say the shape is wrong.
            Value::Number(_) => Err(WireError::invalid(
                "data",
                format!("holds more than the {expected} numbers its shape says"),
            )),
            _ => Err(WireError::invalid("data", "must hold only numbers")),
        }
    }
    let mut out = Vec::with_capacity(expected);
    walk(data, &mut out, expected)?;
    if out.len() != expected {
        return Err(WireError::invalid(
            "data",
            format!("holds {} numbers; shape says {expected}", out.len()),
        ));
    }
    if out.iter().any(|v| v.is_nan()) {
        return Err(WireError::invalid("data", "numbers must be finite"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tensor(datatype: &str, data: Value, raw: Option<Bytes>) -> RequestInput {
        RequestInput {
            name: "t".into(),
            shape: vec![],
            datatype: datatype.into(),
            data,
            parameters: None,
            raw,
        }
    }

    #[test]
    fn fp32_from_json_or_raw_alike() {
        let json = tensor("FP32", json!([[0.5, 1], [2, -3]]), None);
        let raw = tensor("FP32", Value::Null, Some(f32_raw(&[0.5, 1.0, 2.0, -3.0])));
        assert_eq!(f32s(&json, 4).unwrap(), f32s(&raw, 4).unwrap());
        assert_eq!(element_count(&json).unwrap(), 4);
        assert_eq!(element_count(&raw).unwrap(), 4);
        assert!(
            f32s(&raw, 3)
                .unwrap_err()
                .to_string()
                .contains("shape says 3")
        );
        let nan = tensor("FP32", Value::Null, Some(f32_raw(&[f32::NAN])));
        assert!(f32s(&nan, 1).unwrap_err().to_string().contains("finite"));
    }

    #[test]
    fn fp32_stays_within_f32() {
        // Found by fuzzing (worker_request): 1e308 became +inf on its way to the model.
        let huge = tensor("FP32", json!([0.5, 1e308]), None);
        let err = f32s(&huge, 2).unwrap_err().to_string();
        assert!(
            err.contains("`data`") && err.contains("3.4028235e38"),
            "{err}"
        );
        let edge = tensor(
            "FP32",
            json!([f64::from(f32::MAX), -f64::from(f32::MAX)]),
            None,
        );
        assert!(f32s(&edge, 2).unwrap().iter().all(|v| v.is_finite()));
    }

    #[test]
    fn numbers_are_counted_and_finite() {
        let err = |data: Value, n| {
            f32s(&tensor("FP32", data, None), n)
                .unwrap_err()
                .to_string()
        };
        assert!(err(json!([1, 2]), 3).contains("holds 2 numbers"));
        assert!(err(json!([1, 2, 3, 4]), 3).contains("more than the 3"));
        assert!(err(json!([1, "x"]), 2).contains("only numbers"));
        assert!(i64s(&tensor("INT64", json!([1.5]), None), 1).is_err());
    }

    #[test]
    fn bytes_elements_are_framed() {
        let raw = bytes_raw([&b"ab"[..], &b""[..], &b"xyz"[..]]);
        let t = tensor("BYTES", Value::Null, Some(raw.clone()));
        assert_eq!(
            byte_items(&t, 3).unwrap(),
            vec![
                ByteItem::Raw(b"ab"),
                ByteItem::Raw(b""),
                ByteItem::Raw(b"xyz")
            ]
        );
        assert_eq!(element_count(&t).unwrap(), 3);
        let cut = tensor("BYTES", Value::Null, Some(raw.slice(..raw.len() - 1)));
        assert!(
            byte_items(&cut, 3)
                .unwrap_err()
                .to_string()
                .contains("remain")
        );
        let json = tensor("BYTES", json!(["a", "b"]), None);
        assert_eq!(byte_items(&json, 2).unwrap()[1], ByteItem::Json("b"));
        assert!(
            byte_items(&json, 3)
                .unwrap_err()
                .to_string()
                .contains("shape says 3")
        );
    }
}
