//! Parsing an inference request into model-ready rows ("parse, don't validate"): every
//! check on client input happens here and names the field and the limit.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cocktail_common::oip::InferRequest;
use cocktail_common::testset::GreyImage;
use serde_json::Value;

use crate::preprocess::{
    ImagePreprocessor, Preprocessor, TextPreprocessor, TokenRow, decode_image, pad,
};
use crate::{Batch, WorkerError};

/// Most items one request may carry.
pub const MAX_ITEMS: usize = 64;

/// A request's items, ready to join other requests' items in a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    /// `count` normalised images, `count * height * width` values.
    Images {
        count: usize,
        values: Vec<f32>,
    },
    Tokens(Vec<TokenRow>),
}

impl Prepared {
    pub fn len(&self) -> usize {
        match self {
            Self::Images { count, .. } => *count,
            Self::Tokens(rows) => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Joins several requests' items into one batch, in order; token rows are right-padded
/// with id 0 and mask 0 to the longest.
pub fn join(parts: &[&Prepared], pre: &Preprocessor) -> Result<Batch, WorkerError> {
    match pre {
        Preprocessor::Image(image) => {
            let (h, w) = (image.height as usize, image.width as usize);
            let mut values = Vec::new();
            let mut count = 0;
            for part in parts {
                let Prepared::Images {
                    count: c,
                    values: v,
                } = part
                else {
                    return Err(WorkerError::invalid(
                        "inputs",
                        "text rows for an image model",
                    ));
                };
                count += c;
                values.extend_from_slice(v);
            }
            let array = ndarray::Array4::from_shape_vec((count, 1, h, w), values)
                .map_err(|e| WorkerError::Ort(format!("batch shape: {e}")))?;
            Ok(Batch::Images(array))
        }
        Preprocessor::Text(_) => {
            let mut rows: Vec<&TokenRow> = Vec::new();
            for part in parts {
                let Prepared::Tokens(r) = part else {
                    return Err(WorkerError::invalid(
                        "inputs",
                        "image rows for a text model",
                    ));
                };
                rows.extend(r);
            }
            Ok(pad(&rows))
        }
    }
}

/// Parses an OIP v2 request for a model with this preprocessing.
pub fn prepare(request: &InferRequest, pre: &Preprocessor) -> Result<Prepared, WorkerError> {
    match pre {
        Preprocessor::Image(image) => prepare_images(request, image),
        Preprocessor::Text(text) => prepare_text(request, text),
    }
}

/// A request body: raw PNG/JPEG bytes when `raw_image` (an `image/*` or
/// `application/octet-stream` content type), otherwise OIP v2 JSON; with the request's id.
pub fn parse_body(
    body: &[u8],
    raw_image: bool,
    pre: &Preprocessor,
) -> Result<(Prepared, Option<String>), WorkerError> {
    if raw_image {
        return Ok((prepare_raw_image(body, pre)?, None));
    }
    let request: InferRequest =
        serde_json::from_slice(body).map_err(|e| WorkerError::MalformedJson(e.to_string()))?;
    Ok((prepare(&request, pre)?, request.id))
}

/// One raw image body (PNG or JPEG bytes).
pub fn prepare_raw_image(bytes: &[u8], pre: &Preprocessor) -> Result<Prepared, WorkerError> {
    let Preprocessor::Image(image) = pre else {
        return Err(WorkerError::invalid(
            "body",
            "this model takes text; send JSON with a `text` input",
        ));
    };
    let decoded = decode_image(bytes)?;
    Ok(Prepared::Images {
        count: 1,
        values: image.tensor(&[&decoded]).into_raw_vec_and_offset().0,
    })
}

fn only_input(request: &InferRequest) -> Result<&cocktail_common::oip::RequestInput, WorkerError> {
    match request.inputs.as_slice() {
        [one] => Ok(one),
        [] => Err(WorkerError::invalid(
            "inputs",
            "must hold one input; given none",
        )),
        more => Err(WorkerError::invalid(
            "inputs",
            format!("must hold one input; given {}", more.len()),
        )),
    }
}

fn item_count(shape: &[i64], field: &'static str) -> Result<usize, WorkerError> {
    let n = shape.first().copied().unwrap_or(0);
    if n < 1 || n as usize > MAX_ITEMS {
        return Err(WorkerError::invalid(
            field,
            format!("batch dimension must be 1 to {MAX_ITEMS}; given {n}"),
        ));
    }
    Ok(n as usize)
}

fn prepare_images(
    request: &InferRequest,
    pre: &ImagePreprocessor,
) -> Result<Prepared, WorkerError> {
    let input = only_input(request)?;
    match input.datatype.as_str() {
        "BYTES" => {
            if input.shape.len() != 1 {
                return Err(WorkerError::invalid(
                    "shape",
                    format!("BYTES images take shape [n]; given {:?}", input.shape),
                ));
            }
            let n = item_count(&input.shape, "shape")?;
            let strings = strings(&input.data, n)?;
            let images = strings
                .iter()
                .map(|s| {
                    let bytes = BASE64.decode(s.trim()).map_err(|e| {
                        WorkerError::invalid("image", format!("not valid base64: {e}"))
                    })?;
                    decode_image(&bytes)
                })
                .collect::<Result<Vec<GreyImage>, _>>()?;
            let refs: Vec<&GreyImage> = images.iter().collect();
            Ok(Prepared::Images {
                count: n,
                values: pre.tensor(&refs).into_raw_vec_and_offset().0,
            })
        }
        "FP32" => {
            let (h, w) = (i64::from(pre.height), i64::from(pre.width));
            let n = item_count(&input.shape, "shape")?;
            if input.shape != [n as i64, 1, h, w] {
                return Err(WorkerError::invalid(
                    "shape",
                    format!(
                        "FP32 images take shape [n, 1, {h}, {w}]; given {:?}",
                        input.shape
                    ),
                ));
            }
            let values = numbers(&input.data, n * (h * w) as usize)?;
            // A finite f64 beyond f32's range would reach the model as infinity.
            if let Some(bad) = values.iter().find(|v| v.abs() > f64::from(f32::MAX)) {
                return Err(WorkerError::invalid(
                    "data",
                    format!("FP32 values must be within ±{:e}; given {bad:e}", f32::MAX),
                ));
            }
            Ok(Prepared::Images {
                count: n,
                values: values.into_iter().map(|v| v as f32).collect(),
            })
        }
        other => Err(WorkerError::invalid(
            "datatype",
            format!("image models take BYTES (PNG/JPEG, base64) or FP32; given `{other}`"),
        )),
    }
}

fn prepare_text(request: &InferRequest, pre: &TextPreprocessor) -> Result<Prepared, WorkerError> {
    if let [input] = request.inputs.as_slice() {
        if input.datatype != "BYTES" {
            return Err(WorkerError::invalid(
                "datatype",
                format!("text takes BYTES (UTF-8); given `{}`", input.datatype),
            ));
        }
        if input.shape.len() != 1 {
            return Err(WorkerError::invalid(
                "shape",
                format!("text takes shape [n]; given {:?}", input.shape),
            ));
        }
        let n = item_count(&input.shape, "shape")?;
        let rows = strings(&input.data, n)?
            .into_iter()
            .map(|text| pre.row(text))
            .collect::<Result<Vec<_>, WorkerError>>()?;
        return Ok(Prepared::Tokens(rows));
    }
    let find = |name: &str| request.inputs.iter().find(|i| i.name == name);
    let (Some(ids), Some(mask), 2) = (
        find("input_ids"),
        find("attention_mask"),
        request.inputs.len(),
    ) else {
        return Err(WorkerError::invalid(
            "inputs",
            "text models take one BYTES input `text`, or INT64 `input_ids` and `attention_mask`",
        ));
    };
    for t in [ids, mask] {
        if t.datatype != "INT64" {
            return Err(WorkerError::invalid(
                "datatype",
                format!("`{}` must be INT64; given `{}`", t.name, t.datatype),
            ));
        }
    }
    let n = item_count(&ids.shape, "shape")?;
    let seq = match ids.shape.as_slice() {
        [_, s] if *s >= 1 && (*s as usize) <= pre.max_tokens() && ids.shape == mask.shape => {
            *s as usize
        }
        _ => {
            return Err(WorkerError::invalid(
                "shape",
                format!(
                    "`input_ids` and `attention_mask` take equal shapes [n, s] with 1 <= s <= {}; given {:?} and {:?}",
                    pre.max_tokens(),
                    ids.shape,
                    mask.shape
                ),
            ));
        }
    };
    let vocab = pre.vocab_size() as f64;
    let id_values = numbers(&ids.data, n * seq)?;
    let mask_values = numbers(&mask.data, n * seq)?;
    if let Some(bad) = id_values
        .iter()
        .find(|&&v| v < 0.0 || v >= vocab || v.fract() != 0.0)
    {
        return Err(WorkerError::invalid(
            "input_ids",
            format!("ids must be integers in [0, {vocab}); given {bad}"),
        ));
    }
    if let Some(bad) = mask_values.iter().find(|&&v| v != 0.0 && v != 1.0) {
        return Err(WorkerError::invalid(
            "attention_mask",
            format!("must be 0 or 1; given {bad}"),
        ));
    }
    let rows = id_values
        .chunks_exact(seq)
        .zip(mask_values.chunks_exact(seq))
        .map(|(i, m)| TokenRow {
            ids: i.iter().map(|&v| v as i64).collect(),
            mask: m.iter().map(|&v| v as i64).collect(),
        })
        .collect();
    Ok(Prepared::Tokens(rows))
}

/// The `data` of a BYTES tensor: exactly `n` strings.
fn strings(data: &Value, n: usize) -> Result<Vec<&str>, WorkerError> {
    let Value::Array(items) = data else {
        return Err(WorkerError::invalid("data", "must be an array of strings"));
    };
    if items.len() != n {
        return Err(WorkerError::invalid(
            "data",
            format!("holds {} elements; shape says {n}", items.len()),
        ));
    }
    items
        .iter()
        .map(|v| {
            v.as_str()
                .ok_or_else(|| WorkerError::invalid("data", "must be an array of strings"))
        })
        .collect()
}

/// The `data` of a numeric tensor, flat or nested: exactly `expected` finite numbers.
fn numbers(data: &Value, expected: usize) -> Result<Vec<f64>, WorkerError> {
    fn walk(v: &Value, out: &mut Vec<f64>, expected: usize) -> Result<(), WorkerError> {
        match v {
            Value::Array(items) => items.iter().try_for_each(|i| walk(i, out, expected)),
            Value::Number(n) if out.len() < expected => {
                out.push(n.as_f64().filter(|f| f.is_finite()).unwrap_or(f64::NAN));
                Ok(())
            }
            // One number past `expected` is enough to say the shape is wrong.
            Value::Number(_) => Err(WorkerError::invalid(
                "data",
                format!("holds more than the {expected} numbers its shape says"),
            )),
            _ => Err(WorkerError::invalid("data", "must hold only numbers")),
        }
    }
    let mut out = Vec::with_capacity(expected);
    walk(data, &mut out, expected)?;
    if out.len() != expected {
        return Err(WorkerError::invalid(
            "data",
            format!("holds {} numbers; shape says {expected}", out.len()),
        ));
    }
    if out.iter().any(|v| v.is_nan()) {
        return Err(WorkerError::invalid("data", "numbers must be finite"));
    }
    Ok(out)
}

/// The OIP v2 answer for a request: per item its class id, label and probabilities.
pub fn respond(
    model: &str,
    labels: &[String],
    id: Option<String>,
    probabilities: &crate::Probabilities,
) -> cocktail_common::oip::InferResponse {
    use cocktail_common::oip::{InferResponse, ResponseOutput};
    let n = probabilities.len() as i64;
    let classes = probabilities.0.ncols() as i64;
    let top = probabilities.top();
    let label_of = |c: usize| labels.get(c).cloned().unwrap_or_else(|| c.to_string());
    InferResponse {
        model_name: model.to_owned(),
        model_version: None,
        id,
        parameters: None,
        outputs: vec![
            ResponseOutput {
                name: "class".into(),
                shape: vec![n],
                datatype: "INT64".into(),
                data: top.iter().map(|&(c, _)| c).collect(),
            },
            ResponseOutput {
                name: "label".into(),
                shape: vec![n],
                datatype: "BYTES".into(),
                data: top.iter().map(|&(c, _)| label_of(c)).collect(),
            },
            ResponseOutput {
                name: "probabilities".into(),
                shape: vec![n, classes],
                datatype: "FP32".into(),
                data: probabilities.0.iter().copied().collect(),
            },
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cocktail_common::oip::RequestInput;

    fn image_pre() -> Preprocessor {
        Preprocessor::Image(ImagePreprocessor {
            width: 2,
            height: 2,
            scale: 1.0,
            mean: 0.0,
            std: 1.0,
        })
    }

    fn request(inputs: Vec<RequestInput>) -> InferRequest {
        InferRequest {
            id: None,
            inputs,
            parameters: None,
        }
    }

    fn tensor(name: &str, datatype: &str, shape: Vec<i64>, data: Value) -> RequestInput {
        RequestInput {
            name: name.into(),
            shape,
            datatype: datatype.into(),
            data,
            parameters: None,
        }
    }

    #[test]
    fn fp32_images_flat_or_nested() {
        let flat = request(vec![tensor(
            "image",
            "FP32",
            vec![1, 1, 2, 2],
            serde_json::json!([1, 2, 3, 4]),
        )]);
        let nested = request(vec![tensor(
            "image",
            "FP32",
            vec![1, 1, 2, 2],
            serde_json::json!([[[[1, 2], [3, 4]]]]),
        )]);
        let expected = Prepared::Images {
            count: 1,
            values: vec![1.0, 2.0, 3.0, 4.0],
        };
        assert_eq!(prepare(&flat, &image_pre()).unwrap(), expected);
        assert_eq!(prepare(&nested, &image_pre()).unwrap(), expected);
    }

    #[test]
    fn fp32_images_stay_within_f32() {
        // Found by fuzzing (worker_request): 1e308 became +inf on its way to the model.
        let mut data = vec![serde_json::json!(0.5); 4];
        data[1] = serde_json::json!(1e308);
        let huge = request(vec![tensor(
            "image",
            "FP32",
            vec![1, 1, 2, 2],
            Value::Array(data),
        )]);
        let err = prepare(&huge, &image_pre()).unwrap_err().to_string();
        assert!(
            err.contains("`data`") && err.contains("3.4028235e38"),
            "{err}"
        );
        let edge = request(vec![tensor(
            "image",
            "FP32",
            vec![1, 1, 2, 2],
            serde_json::json!([f64::from(f32::MAX), -f64::from(f32::MAX), 0, 1]),
        )]);
        let Prepared::Images { values, .. } = prepare(&edge, &image_pre()).unwrap() else {
            panic!("images")
        };
        assert!(values.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn numbers_are_counted_and_finite() {
        assert!(
            numbers(&serde_json::json!([1, 2]), 3)
                .unwrap_err()
                .to_string()
                .contains("holds 2 numbers")
        );
        assert!(
            numbers(&serde_json::json!([1, 2, 3, 4]), 3)
                .unwrap_err()
                .to_string()
                .contains("more than the 3")
        );
        assert!(
            numbers(&serde_json::json!([1, "x"]), 2)
                .unwrap_err()
                .to_string()
                .contains("only numbers")
        );
    }

    #[test]
    fn join_pads_token_rows_and_keeps_order() {
        let pre = image_pre();
        let a = Prepared::Images {
            count: 1,
            values: vec![0.0; 4],
        };
        let b = Prepared::Images {
            count: 2,
            values: vec![1.0; 8],
        };
        let Batch::Images(images) = join(&[&a, &b], &pre).unwrap() else {
            panic!("images")
        };
        assert_eq!(images.shape(), &[3, 1, 2, 2]);
        assert_eq!(images[[0, 0, 0, 0]], 0.0);
        assert_eq!(images[[2, 0, 1, 1]], 1.0);
        let text = Prepared::Tokens(vec![TokenRow {
            ids: vec![1],
            mask: vec![1],
        }]);
        assert!(join(&[&a, &text], &pre).is_err());
    }

    #[test]
    fn item_counts_are_bounded() {
        assert!(item_count(&[0], "shape").is_err());
        assert!(
            item_count(&[65], "shape")
                .unwrap_err()
                .to_string()
                .contains("1 to 64")
        );
        assert_eq!(item_count(&[64, 3], "shape").unwrap(), 64);
    }
}
