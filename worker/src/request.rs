//! Parsing an inference request into model-ready rows ("parse, don't validate"): every
//! check on client input happens here and names the field and the limit.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cocktail_common::oip::limits::MAX_ITEMS;
use cocktail_common::oip::tensor::{self, ByteItem, Elements, Output, Typed};
use cocktail_common::oip::{IMAGE, InferRequest, InferResponse, PIXELS, RequestInput, binary};
use cocktail_common::preprocess::PixelType;
use cocktail_common::zoo::DType;

use crate::preprocess::{
    ImagePreprocessor, PixelValues, Preprocessor, TensorRows, TextPreprocessor, TokenRow,
    decode_image, pad,
};
use crate::{Batch, WorkerError};

/// A request's items, ready to join other requests' items in a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    /// One tensor's values per image, in the model's layout and type.
    Images(Vec<PixelValues>),
    Tokens(Vec<TokenRow>),
    Tensors(TensorRows),
}

impl Prepared {
    pub fn len(&self) -> usize {
        match self {
            Self::Images(items) => items.len(),
            Self::Tokens(rows) => rows.len(),
            Self::Tensors(rows) => rows.count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Joins several requests' items into one batch, in order; token rows are right-padded
/// with id 0 and mask 0 to the longest.
pub fn join(parts: &[&Prepared], pre: &Preprocessor) -> Result<Batch, WorkerError> {
    let mismatch = || WorkerError::invalid("inputs", "rows of another kind of model");
    match pre {
        Preprocessor::Image(image) => {
            let mut items = Vec::new();
            for part in parts {
                let Prepared::Images(values) = part else {
                    return Err(mismatch());
                };
                items.extend(values);
            }
            image.join(&items)
        }
        Preprocessor::Text(_) => {
            let mut rows: Vec<&TokenRow> = Vec::new();
            for part in parts {
                let Prepared::Tokens(r) = part else {
                    return Err(mismatch());
                };
                rows.extend(r);
            }
            Ok(pad(&rows))
        }
        Preprocessor::Tensor(tensors) => {
            let mut rows = Vec::new();
            for part in parts {
                let Prepared::Tensors(r) = part else {
                    return Err(mismatch());
                };
                rows.push(r);
            }
            tensors.join(&rows)
        }
    }
}

/// Parses an OIP v2 request for a model with this preprocessing.
pub fn prepare(request: &InferRequest, pre: &Preprocessor) -> Result<Prepared, WorkerError> {
    match pre {
        Preprocessor::Image(image) => prepare_images(request, image),
        Preprocessor::Text(text) => prepare_text(request, text),
        Preprocessor::Tensor(tensors) => Ok(Prepared::Tensors(tensors.prepare(request)?)),
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

/// One raw image body (JPEG, PNG, WebP or GIF bytes).
pub fn prepare_raw_image(bytes: &[u8], pre: &Preprocessor) -> Result<Prepared, WorkerError> {
    let Preprocessor::Image(image) = pre else {
        return Err(WorkerError::invalid(
            "body",
            "this model takes no images; send OIP JSON with its inputs",
        ));
    };
    let decoded = decode_image(bytes)?;
    Ok(Prepared::Images(vec![image.item(&decoded)]))
}

/// `parameters.parts`: the item counts of the calls a master joined into this one, in
/// order, summing to its `items`; the largest part, or `items` when absent. An instance
/// emulating a type answers in the largest part's time, as if the calls had come side by
/// side (`crate::batcher::Pace`).
pub fn largest_part(request: &InferRequest, items: usize) -> Result<usize, WorkerError> {
    let Some(parts) = request.parameters.as_ref().and_then(|p| p.get("parts")) else {
        return Ok(items);
    };
    let refuse = || {
        WorkerError::invalid(
            "parameters.parts",
            format!("must be an array of item counts of at least 1 summing to the batch's {items}"),
        )
    };
    let parts: Vec<usize> = parts
        .as_array()
        .ok_or_else(refuse)?
        .iter()
        .map(|p| {
            p.as_u64()
                .and_then(|p| usize::try_from(p).ok())
                .filter(|&p| p >= 1)
        })
        .collect::<Option<_>>()
        .ok_or_else(refuse)?;
    if parts.iter().sum::<usize>() != items {
        return Err(refuse());
    }
    parts.into_iter().max().ok_or_else(refuse)
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
    let pixel_type = match pre.spec().dtype {
        PixelType::Float32 => "FP32",
        PixelType::Uint8 => "UINT8",
    };
    match (input.name.as_str(), input.datatype.as_str()) {
        (IMAGE, "BYTES") => {
            if input.shape.len() != 1 {
                return Err(WorkerError::invalid(
                    "shape",
                    format!("BYTES images take shape [n]; given {:?}", input.shape),
                ));
            }
            let n = item_count(&input.shape, "shape")?;
            let items = tensor::byte_items(input, n)?
                .into_iter()
                .map(|item| {
                    let decoded = match item {
                        ByteItem::Raw(bytes) => decode_image(bytes),
                        ByteItem::Json(text) => {
                            let bytes = BASE64.decode(text.trim()).map_err(|e| {
                                WorkerError::invalid("image", format!("not valid base64: {e}"))
                            })?;
                            decode_image(&bytes)
                        }
                    }?;
                    Ok(pre.item(&decoded))
                })
                .collect::<Result<Vec<_>, WorkerError>>()?;
            Ok(Prepared::Images(items))
        }
        (PIXELS, datatype) if datatype == pixel_type => {
            let n = item_count(&input.shape, "shape")?;
            let shape = pre.spec().shape(n).map(|d| d as i64);
            if input.shape != shape {
                return Err(WorkerError::invalid(
                    "shape",
                    format!(
                        "{pixel_type} pixels take shape [n, {}, {}, {}]; given {:?}",
                        shape[1], shape[2], shape[3], input.shape
                    ),
                ));
            }
            let per_item = pre.item_len();
            let items = match pre.spec().dtype {
                PixelType::Float32 => tensor::f32s(input, n * per_item)?
                    .chunks_exact(per_item)
                    .map(|c| PixelValues::F32(c.to_vec()))
                    .collect(),
                PixelType::Uint8 => {
                    let Typed::U8(values) = tensor::typed(input, DType::Uint8, n * per_item)?
                    else {
                        return Err(WorkerError::invalid("datatype", "pixels must be UINT8"));
                    };
                    values
                        .chunks_exact(per_item)
                        .map(|c| PixelValues::U8(c.to_vec()))
                        .collect()
                }
            };
            Ok(Prepared::Images(items))
        }
        (name, datatype) => Err(WorkerError::invalid(
            "inputs",
            format!(
                "image models take `{IMAGE}` (BYTES: JPEG, PNG, WebP or GIF files, base64 in JSON) or `{PIXELS}` ({pixel_type}, prepared as the model's metadata says); given `{name}` ({datatype})"
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
        use cocktail_common::preprocess::{Colour, CropMode, ImageSpec, Interpolation, Layout};
        Preprocessor::Image(ImagePreprocessor::new(ImageSpec {
            colour: Colour::Grey,
            input_size: [1, 2, 2],
            interpolation: Interpolation::Bilinear,
            crop_pct: Some(1.0),
            crop_mode: CropMode::Squash,
            resize_size: None,
            scale: Some(1.0),
            mean: Some(vec![0.0]),
            std: Some(vec![1.0]),
            layout: Layout::Nchw,
            dtype: PixelType::Float32,
        }))
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
        let expected = Prepared::Images(vec![PixelValues::F32(vec![1.0, 2.0, 3.0, 4.0])]);
        assert_eq!(prepare(&flat, &image_pre()).unwrap(), expected);
        assert_eq!(prepare(&nested, &image_pre()).unwrap(), expected);
    }

    #[test]
    fn join_pads_token_rows_and_keeps_order() {
        let pre = image_pre();
        let a = Prepared::Images(vec![PixelValues::F32(vec![0.0; 4])]);
        let b = Prepared::Images(vec![PixelValues::F32(vec![1.0; 4]); 2]);
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

    #[test]
    fn a_joined_calls_parts_must_sum_to_its_batch() {
        let with = |parts: Value| InferRequest {
            parameters: Some(serde_json::Map::from_iter([("parts".to_owned(), parts)])),
            ..InferRequest::default()
        };
        assert_eq!(largest_part(&InferRequest::default(), 5).unwrap(), 5);
        assert_eq!(
            largest_part(&with(serde_json::json!([1, 3, 1])), 5).unwrap(),
            3
        );
        for bad in [
            serde_json::json!([1, 3]),
            serde_json::json!([0, 5]),
            serde_json::json!([]),
            serde_json::json!("5"),
            serde_json::json!([2.5, 2.5]),
        ] {
            let error = largest_part(&with(bad.clone()), 5).unwrap_err().to_string();
            assert!(error.contains("parameters.parts"), "{bad}: {error}");
        }
    }
}
