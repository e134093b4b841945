//! `kind = "tensor"`: no preprocessing. A request carries every input of the model, by
//! name, in the model's element type, shaped `[n, ...]` with the model's fixed axes after
//! the batch axis; JSON `data` or binary (Triton's extension, gRPC's raw contents) alike.

use cocktail_common::oip::InferRequest;
use cocktail_common::oip::limits::MAX_ITEMS;
use cocktail_common::oip::tensor::{self, Typed};
use cocktail_common::zoo::TensorSpec;

use crate::{Batch, WorkerError};

/// The inputs of a tensor model.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPreprocessor {
    inputs: Vec<TensorSpec>,
}

/// One request's tensors, in the manifest's input order, each `count` items long.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRows {
    pub count: usize,
    pub values: Vec<Typed>,
}

impl TensorPreprocessor {
    pub fn new(inputs: Vec<TensorSpec>) -> Self {
        Self { inputs }
    }

    pub fn inputs(&self) -> &[TensorSpec] {
        &self.inputs
    }

    /// The shape of one item of `input` (its axes after the batch axis).
    fn item_shape(input: &TensorSpec) -> Vec<usize> {
        input
            .shape
            .iter()
            .skip(1)
            .map(|&d| d.max(1) as usize)
            .collect()
    }

    /// Reads the request's tensors, checking names, types and shapes against the model's.
    pub fn prepare(&self, request: &InferRequest) -> Result<TensorRows, WorkerError> {
        let expected: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
        if let Some(extra) = request
            .inputs
            .iter()
            .find(|r| !expected.contains(&r.name.as_str()))
        {
            return Err(WorkerError::invalid(
                "inputs",
                format!("names `{}`; this model takes {expected:?}", extra.name),
            ));
        }
        let mut count = None;
        let mut values = Vec::with_capacity(self.inputs.len());
        for spec in &self.inputs {
            let found: Vec<_> = request
                .inputs
                .iter()
                .filter(|r| r.name == spec.name)
                .collect();
            let [given] = found.as_slice() else {
                return Err(WorkerError::invalid(
                    "inputs",
                    format!(
                        "must hold `{}` once; given {} times (this model takes {expected:?})",
                        spec.name,
                        found.len()
                    ),
                ));
            };
            let item = Self::item_shape(spec);
            let n = given.shape.first().copied().unwrap_or(0);
            let shape_ok = given.shape.len() == spec.shape.len()
                && given.shape[1..]
                    .iter()
                    .zip(&item)
                    .all(|(&g, &e)| g == e as i64);
            if !shape_ok || n < 1 || n as usize > MAX_ITEMS {
                let dims: Vec<String> = item.iter().map(ToString::to_string).collect();
                return Err(WorkerError::invalid(
                    "shape",
                    format!(
                        "of `{}` must be [n, {}] with n from 1 to {MAX_ITEMS}; given {:?}",
                        spec.name,
                        dims.join(", "),
                        given.shape
                    ),
                ));
            }
            let n = n as usize;
            if *count.get_or_insert(n) != n {
                return Err(WorkerError::invalid(
                    "shape",
                    format!(
                        "of `{}` says {n} items; the other inputs say {}",
                        spec.name,
                        count.unwrap_or(n)
                    ),
                ));
            }
            let elements = n * item.iter().product::<usize>();
            values.push(tensor::typed(*given, spec.dtype, elements)?);
        }
        Ok(TensorRows {
            count: count.unwrap_or(0),
            values,
        })
    }

    /// Requests' tensors joined along the batch axis, in order.
    pub fn join(&self, parts: &[&TensorRows]) -> Result<Batch, WorkerError> {
        let items: usize = parts.iter().map(|p| p.count).sum();
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for (i, spec) in self.inputs.iter().enumerate() {
            let mut joined = Typed::empty(spec.dtype);
            for part in parts {
                let Some(values) = part.values.get(i) else {
                    return Err(WorkerError::invalid("inputs", "rows of another model"));
                };
                if !joined.extend(values) {
                    return Err(WorkerError::invalid("inputs", "rows of another type"));
                }
            }
            let mut shape = vec![items];
            shape.extend(Self::item_shape(spec));
            inputs.push((shape, joined));
        }
        Ok(Batch::Tensors { items, inputs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cocktail_common::oip::RequestInput;
    use cocktail_common::zoo::DType;
    use serde_json::json;

    fn model() -> TensorPreprocessor {
        TensorPreprocessor::new(vec![
            TensorSpec {
                name: "x".into(),
                dtype: DType::Float64,
                shape: vec![-1, 2],
            },
            TensorSpec {
                name: "flags".into(),
                dtype: DType::Bool,
                shape: vec![-1, 1],
            },
        ])
    }

    fn input(name: &str, datatype: &str, shape: Vec<i64>, data: serde_json::Value) -> RequestInput {
        RequestInput {
            name: name.into(),
            shape,
            datatype: datatype.into(),
            data,
            parameters: None,
            raw: None,
        }
    }

    fn request(inputs: Vec<RequestInput>) -> InferRequest {
        InferRequest {
            inputs,
            ..InferRequest::default()
        }
    }

    #[test]
    fn prepares_and_joins_any_type() {
        let pre = model();
        let a = pre
            .prepare(&request(vec![
                input("flags", "BOOL", vec![1, 1], json!([true])),
                input("x", "FP64", vec![1, 2], json!([[0.5, 1.5]])),
            ]))
            .unwrap();
        let mut b = a.clone();
        b.values[0] = Typed::F64(vec![2.0, 3.0]);
        let Batch::Tensors { items, inputs } = pre.join(&[&a, &b]).unwrap() else {
            panic!("tensors")
        };
        assert_eq!(items, 2);
        assert_eq!(
            inputs[0],
            (vec![2, 2], Typed::F64(vec![0.5, 1.5, 2.0, 3.0]))
        );
        assert_eq!(inputs[1], (vec![2, 1], Typed::Bool(vec![true, true])));
    }

    #[test]
    fn refusals_name_the_field() {
        let pre = model();
        let x = || input("x", "FP64", vec![1, 2], json!([0.5, 1.5]));
        let flags = || input("flags", "BOOL", vec![1, 1], json!([true]));
        let cases = [
            (vec![x()], "`inputs`", "`flags` once"),
            (
                vec![x(), flags(), input("y", "FP64", vec![1], json!([1]))],
                "`inputs`",
                "`y`",
            ),
            (
                vec![input("x", "FP64", vec![1, 3], json!([1, 2, 3])), flags()],
                "`shape`",
                "[n, 2]",
            ),
            (
                vec![input("x", "FP32", vec![1, 2], json!([1, 2])), flags()],
                "`datatype`",
                "FP64",
            ),
            (
                vec![x(), input("flags", "BOOL", vec![1, 1], json!([2]))],
                "`data`",
                "true or false",
            ),
            (
                vec![input("x", "FP64", vec![2, 2], json!([1, 2, 3, 4])), flags()],
                "`shape`",
                "other inputs",
            ),
        ];
        for (inputs, field, needle) in cases {
            let err = pre.prepare(&request(inputs)).unwrap_err().to_string();
            assert!(err.contains(field) && err.contains(needle), "{err}");
        }
    }
}
