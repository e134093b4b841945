//! Parsing an inference request into model-ready rows ("parse, don't validate"): every
//! check on client input happens here and names the field and the limit.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cocktail_common::oip::limits::MAX_ITEMS;
use cocktail_common::oip::tensor::{self, ByteItem, Elements, Output};
use cocktail_common::oip::{IMAGE, InferRequest, InferResponse, PIXELS, RequestInput, binary};
use cocktail_common::testset::GreyImage;

use crate::preprocess::{
    ImagePreprocessor, Preprocessor, TextPreprocessor, TokenRow, decode_image, pad,
};
use crate::{Batch, WorkerError};

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
/// `application/octet-stream` content type without a binary-extension header), otherwise
/// OIP v2 JSON, with binary tensors after it when `header` (the
/// `Inference-Header-Content-Length`) is given.
pub fn parse_body(
    body: bytes::Bytes,
    raw_image: bool,
    header: Option<usize>,
    pre: &Preprocessor,
) -> Result<(Prepared, InferRequest), WorkerError> {
    if raw_image && header.is_none() {
        return Ok((prepare_raw_image(&body, pre)?, InferRequest::default()));
    }
    let request = binary::decode_request(body, header)?;
    Ok((prepare(&request, pre)?, request))
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

fn only_input(request: &InferRequest) -> Result<&RequestInput, WorkerError> {
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
    match (input.name.as_str(), input.datatype.as_str()) {
        (IMAGE, "BYTES") => {
            if input.shape.len() != 1 {
                return Err(WorkerError::invalid(
                    "shape",
                    format!("BYTES images take shape [n]; given {:?}", input.shape),
                ));
            }
            let n = item_count(&input.shape, "shape")?;
            let images = tensor::byte_items(input, n)?
                .into_iter()
                .map(|item| match item {
                    ByteItem::Raw(bytes) => decode_image(bytes),
                    ByteItem::Json(text) => {
                        let bytes = BASE64.decode(text.trim()).map_err(|e| {
                            WorkerError::invalid("image", format!("not valid base64: {e}"))
                        })?;
                        decode_image(&bytes)
                    }
                })
                .collect::<Result<Vec<GreyImage>, _>>()?;
            let refs: Vec<&GreyImage> = images.iter().collect();
            Ok(Prepared::Images {
                count: n,
                values: pre.tensor(&refs).into_raw_vec_and_offset().0,
            })
        }
        (PIXELS, "FP32") => {
            let (h, w) = (i64::from(pre.height), i64::from(pre.width));
            let n = item_count(&input.shape, "shape")?;
            if input.shape != [n as i64, 1, h, w] {
                return Err(WorkerError::invalid(
                    "shape",
                    format!(
                        "FP32 pixels take shape [n, 1, {h}, {w}]; given {:?}",
                        input.shape
                    ),
                ));
            }
            Ok(Prepared::Images {
                count: n,
                values: tensor::f32s(input, n * (h * w) as usize)?,
            })
        }
        (name, datatype) => Err(WorkerError::invalid(
            "inputs",
            format!(
                "image models take `{IMAGE}` (BYTES: PNG/JPEG, base64 in JSON) or `{PIXELS}` (FP32, normalised); given `{name}` ({datatype})"
            ),
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
        let rows = tensor::byte_items(input, n)?
            .into_iter()
            .map(|item| match item {
                ByteItem::Json(text) => pre.row(text),
                ByteItem::Raw(bytes) => std::str::from_utf8(bytes)
                    .map_err(|e| WorkerError::invalid("text", format!("is not UTF-8: {e}")))
                    .and_then(|text| pre.row(text)),
            })
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
    let vocab = pre.vocab_size() as i64;
    let id_values = tensor::i64s(ids, n * seq)?;
    let mask_values = tensor::i64s(mask, n * seq)?;
    if let Some(bad) = id_values.iter().find(|&&v| !(0..vocab).contains(&v)) {
        return Err(WorkerError::invalid(
            "input_ids",
            format!("ids must be integers in [0, {vocab}); given {bad}"),
        ));
    }
    if let Some(bad) = mask_values.iter().find(|&&v| v != 0 && v != 1) {
        return Err(WorkerError::invalid(
            "attention_mask",
            format!("must be 0 or 1; given {bad}"),
        ));
    }
    let rows = id_values
        .chunks_exact(seq)
        .zip(mask_values.chunks_exact(seq))
        .map(|(i, m)| TokenRow {
            ids: i.to_vec(),
            mask: m.to_vec(),
        })
        .collect();
    Ok(Prepared::Tokens(rows))
}

/// The OIP v2 answer for a request: per item its class id, label and probabilities, the
/// outputs it asks for in the form it asks for.
pub fn respond(
    model: &str,
    labels: &[String],
    request: &InferRequest,
    probabilities: &crate::Probabilities,
) -> Result<InferResponse, WorkerError> {
    let n = probabilities.len() as i64;
    let classes = probabilities.0.ncols() as i64;
    let top = probabilities.top();
    let label_of = |c: usize| labels.get(c).cloned().unwrap_or_else(|| c.to_string());
    let outputs = vec![
        Output {
            name: "class",
            shape: vec![n],
            elements: Elements::Int64(top.iter().map(|&(c, _)| c as i64).collect()),
        },
        Output {
            name: "label",
            shape: vec![n],
            elements: Elements::Bytes(top.iter().map(|&(c, _)| label_of(c)).collect()),
        },
        Output {
            name: "probabilities",
            shape: vec![n, classes],
            elements: Elements::Fp32(probabilities.0.iter().copied().collect()),
        },
    ];
    Ok(InferResponse {
        model_name: model.to_owned(),
        model_version: None,
        id: request.id.clone(),
        parameters: None,
        outputs: tensor::answer(request, outputs)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
            outputs: None,
        }
    }

    fn tensor(name: &str, datatype: &str, shape: Vec<i64>, data: Value) -> RequestInput {
        RequestInput {
            name: name.into(),
            shape,
            datatype: datatype.into(),
            data,
            parameters: None,
            raw: None,
        }
    }

    #[test]
    fn fp32_images_flat_or_nested() {
        let flat = request(vec![tensor(
            "pixels",
            "FP32",
            vec![1, 1, 2, 2],
            serde_json::json!([1, 2, 3, 4]),
        )]);
        let nested = request(vec![tensor(
            "pixels",
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
