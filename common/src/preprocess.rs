//! The `preprocess` block of a manifest entry: how raw input becomes a model's tensors.
//!
//! Images follow timm's data config (`input_size`, `interpolation`, `crop_pct`,
//! `crop_mode`, `mean`, `std`) and torchvision's `resize_size`, so an entry can be copied
//! from a model card; the worker (`cocktail_worker::preprocess`) implements it the way
//! PIL and torchvision do. Checks against the model's inputs live here, so the master,
//! the worker and the CLI refuse the same manifests with the same messages.

use serde::{Deserialize, Serialize};

use crate::zoo::{DType, TensorSpec};

/// How raw input becomes the model's tensors; the worker does exactly what training did.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Preprocess {
    /// A decoded image resized, cropped and normalised ([`ImageSpec`]).
    Image(ImageSpec),
    /// Token ids and attention mask from a Hugging Face `tokenizer` file (relative to the
    /// manifest's folder; WordPiece, BPE or Unigram), no padding per item, truncated at
    /// `max_tokens`; `token_type_ids` (zeros) is fed when the model has that input.
    Text {
        tokenizer: String,
        max_tokens: usize,
    },
    /// No preprocessing: requests carry the model's input tensors themselves.
    Tensor,
}

/// The colour channels a model takes, in its channel order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Colour {
    /// One channel: PIL's `convert("L")` of a colour image (ITU-R 601-2 luma).
    #[serde(alias = "gray", alias = "l")]
    Grey,
    Rgb,
    /// Red and blue swapped, as OpenCV- and Caffe-trained models take them.
    Bgr,
}

impl Colour {
    pub fn channels(self) -> u32 {
        match self {
            Self::Grey => 1,
            Self::Rgb | Self::Bgr => 3,
        }
    }
}

/// PIL's resampling filters, as timm and torchvision name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    Nearest,
    Bilinear,
    Bicubic,
}

/// timm's `crop_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CropMode {
    /// Shorter side to `size / crop_pct`, then the centre `size` (aspect kept, edges lost).
    Center,
    /// Both sides to `size / crop_pct` (aspect changed), then the centre `size`.
    Squash,
    /// Longer side to `size / crop_pct`, then padded with the mean colour to `size`.
    Border,
}

/// The tensor's axis order after the batch axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    Nchw,
    Nhwc,
}

/// The element type of an image model's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PixelType {
    /// Normalised floats: `(pixel / 255 - mean) / std` (or `pixel * scale` with `scale`).
    Float32,
    /// The resized pixels themselves (0-255), for graphs that normalise inside.
    Uint8,
}

/// timm's default `crop_pct`.
pub const DEFAULT_CROP_PCT: f64 = 0.875;

fn default_interpolation() -> Interpolation {
    Interpolation::Bicubic
}
fn default_crop_mode() -> CropMode {
    CropMode::Center
}
fn default_layout() -> Layout {
    Layout::Nchw
}
fn default_pixel_type() -> PixelType {
    PixelType::Float32
}

/// An image model's preprocessing. Defaults are timm's (`bicubic`, `crop_pct = 0.875`,
/// `crop_mode = "center"`), plus NCHW float32.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    pub colour: Colour,
    /// timm's `[channels, height, width]` of the model's input.
    pub input_size: [u32; 3],
    #[serde(default = "default_interpolation")]
    pub interpolation: Interpolation,
    /// The share of the resized image the crop keeps (timm); absent with `resize_size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crop_pct: Option<f64>,
    #[serde(default = "default_crop_mode")]
    pub crop_mode: CropMode,
    /// torchvision's `resize_size`: the shorter side before the centre crop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize_size: Option<u32>,
    /// Multiplies each pixel (0-255) instead of torchvision's division by 255.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f32>,
    /// Per channel, in the model's channel order; float32 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<Vec<f32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<Vec<f32>>,
    #[serde(default = "default_layout")]
    pub layout: Layout,
    #[serde(default = "default_pixel_type")]
    pub dtype: PixelType,
}

impl ImageSpec {
    pub fn channels(&self) -> u32 {
        self.input_size[0]
    }
    pub fn height(&self) -> u32 {
        self.input_size[1]
    }
    pub fn width(&self) -> u32 {
        self.input_size[2]
    }

    /// `crop_pct` as used: timm's default when neither it nor `resize_size` is given.
    pub fn effective_crop_pct(&self) -> f64 {
        self.crop_pct.unwrap_or(DEFAULT_CROP_PCT)
    }

    /// The model's input shape for `n` items, in this layout.
    pub fn shape(&self, n: usize) -> [usize; 4] {
        let (c, h, w) = (
            self.channels() as usize,
            self.height() as usize,
            self.width() as usize,
        );
        match self.layout {
            Layout::Nchw => [n, c, h, w],
            Layout::Nhwc => [n, h, w, c],
        }
    }

    /// Per-channel mean and std as used (float32 only; zeros and ones for uint8).
    pub fn normalisation(&self) -> (Vec<f32>, Vec<f32>) {
        let c = self.channels() as usize;
        (
            self.mean.clone().unwrap_or_else(|| vec![0.0; c]),
            self.std.clone().unwrap_or_else(|| vec![1.0; c]),
        )
    }

    /// Checks the block on its own and against the model's inputs; the message names
    /// the field and the fix.
    pub fn check(&self, inputs: &[TensorSpec]) -> Result<(), String> {
        let [c, h, w] = self.input_size;
        if c != self.colour.channels() {
            return Err(format!(
                "`input_size` has {c} channels but `colour = \"{}\"` has {}; make them agree",
                colour_name(self.colour),
                self.colour.channels()
            ));
        }
        if h == 0 || w == 0 || h > 8192 || w > 8192 {
            return Err(format!(
                "`input_size` height and width must be 1 to 8192; given {h}x{w}"
            ));
        }
        if let Some(p) = self.crop_pct
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(format!("`crop_pct` must be in (0, 1]; given {p}"));
        }
        if let Some(r) = self.resize_size {
            if self.crop_pct.is_some() {
                return Err(
                    "give `resize_size` (torchvision) or `crop_pct` (timm), not both".into(),
                );
            }
            if self.crop_mode != CropMode::Center {
                return Err("`resize_size` takes `crop_mode = \"center\"`".into());
            }
            if r == 0 || r > 16384 {
                return Err(format!("`resize_size` must be 1 to 16384; given {r}"));
            }
        }
        match self.dtype {
            PixelType::Float32 => {
                for (field, values) in [("mean", &self.mean), ("std", &self.std)] {
                    let Some(values) = values else {
                        return Err(format!(
                            "`{field}` is missing: float32 input needs {c} values (one per channel)"
                        ));
                    };
                    if values.len() != c as usize {
                        return Err(format!(
                            "`{field}` has {} values for {c} channels; give one per channel",
                            values.len()
                        ));
                    }
                }
                if let Some(std) = &self.std
                    && std.iter().any(|&s| !(s.is_finite() && s > 0.0))
                {
                    return Err(format!("`std` values must be positive; given {std:?}"));
                }
                if let Some(s) = self.scale
                    && !(s.is_finite() && s > 0.0)
                {
                    return Err(format!("`scale` must be positive; given {s}"));
                }
            }
            PixelType::Uint8 => {
                if self.mean.is_some() || self.std.is_some() || self.scale.is_some() {
                    return Err("uint8 input takes the pixels as they are: remove `mean`, `std` and `scale`, or use `dtype = \"float32\"`".into());
                }
            }
        }
        let [input] = inputs else {
            return Err(format!(
                "an image model takes one input; the model has {}",
                inputs.len()
            ));
        };
        let want = match self.dtype {
            PixelType::Float32 => DType::Float32,
            PixelType::Uint8 => DType::Uint8,
        };
        if input.dtype != want {
            return Err(format!(
                "`dtype` is {want:?} but input `{}` is {:?}; set `dtype` to the model's",
                input.name, input.dtype
            ));
        }
        let expected = self.shape(1).map(|d| d as i64);
        let fits = input.shape.len() == 4
            && input
                .shape
                .iter()
                .zip(expected)
                .skip(1)
                .all(|(&dim, e)| dim < 0 || dim == e);
        if !fits {
            return Err(format!(
                "`input_size` [{c}, {h}, {w}] with `layout = \"{}\"` makes [n, {}, {}, {}] but input `{}` has shape {:?}; set `input_size` and `layout` to the model's",
                match self.layout {
                    Layout::Nchw => "nchw",
                    Layout::Nhwc => "nhwc",
                },
                expected[1],
                expected[2],
                expected[3],
                input.name,
                input.shape
            ));
        }
        Ok(())
    }
}

fn colour_name(colour: Colour) -> &'static str {
    match colour {
        Colour::Grey => "grey",
        Colour::Rgb => "rgb",
        Colour::Bgr => "bgr",
    }
}

/// The inputs a text model may have.
pub const TEXT_INPUTS: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];

impl Preprocess {
    /// Checks the block against the model's inputs (see [`ImageSpec::check`]).
    pub fn check(&self, inputs: &[TensorSpec]) -> Result<(), String> {
        match self {
            Self::Image(spec) => spec.check(inputs),
            Self::Text { max_tokens, .. } => {
                if *max_tokens == 0 {
                    return Err("`max_tokens` must be at least 1".into());
                }
                let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
                if !names.contains(&"input_ids") || !names.contains(&"attention_mask") {
                    return Err(format!(
                        "a text model takes `input_ids` and `attention_mask` (and optionally `token_type_ids`); the model has {names:?}"
                    ));
                }
                if let Some(other) = inputs
                    .iter()
                    .find(|i| !TEXT_INPUTS.contains(&i.name.as_str()) || i.dtype != DType::Int64)
                {
                    return Err(format!(
                        "text model input `{}` ({:?}) is not one of {TEXT_INPUTS:?} as int64; serve the model with `kind = \"tensor\"`",
                        other.name, other.dtype
                    ));
                }
                Ok(())
            }
            Self::Tensor => {
                if inputs.is_empty() {
                    return Err("a tensor model lists its inputs in `inputs`".into());
                }
                for input in inputs {
                    let Some((&batch, rest)) = input.shape.split_first() else {
                        return Err(format!(
                            "input `{}` has no axes; a tensor model's inputs start with the batch axis",
                            input.name
                        ));
                    };
                    if !(batch == -1 || batch >= 1) || rest.iter().any(|&d| d < 1) {
                        return Err(format!(
                            "input `{}` has shape {:?}: with `kind = \"tensor\"` the first axis must be the batch axis (-1, or a fixed size the worker fills slice by slice) and every later axis fixed, since requests are batched together",
                            input.name, input.shape
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(block: &str) -> Result<Preprocess, String> {
        #[derive(Deserialize)]
        struct Holder {
            preprocess: Preprocess,
        }
        toml::from_str::<Holder>(&format!("preprocess = {block}"))
            .map(|h| h.preprocess)
            .map_err(|e| e.to_string())
    }

    fn input(dtype: DType, shape: &[i64]) -> Vec<TensorSpec> {
        vec![TensorSpec {
            name: "x".into(),
            dtype,
            shape: shape.to_vec(),
        }]
    }

    #[test]
    fn fashion_block_parses_and_fits() {
        let p = parse(
            r#"{ kind = "image", colour = "grey", input_size = [1, 28, 28], interpolation = "bilinear", crop_pct = 1.0, crop_mode = "squash", scale = 0.00392156862745098, mean = [0.286], std = [0.353], layout = "nchw", dtype = "float32" }"#,
        )
        .unwrap();
        p.check(&input(DType::Float32, &[-1, 1, 28, 28])).unwrap();
        let Preprocess::Image(spec) = p else {
            panic!("an image block")
        };
        assert_eq!(spec.scale, Some(1.0 / 255.0));
        assert_eq!(spec.shape(2), [2, 1, 28, 28]);
    }

    #[test]
    fn timm_defaults() {
        let Preprocess::Image(spec) = parse(
            r#"{ kind = "image", colour = "rgb", input_size = [3, 224, 224], mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225] }"#,
        )
        .unwrap() else {
            panic!("an image block")
        };
        assert_eq!(spec.interpolation, Interpolation::Bicubic);
        assert_eq!(spec.effective_crop_pct(), 0.875);
        assert_eq!(spec.crop_mode, CropMode::Center);
        assert_eq!(spec.layout, Layout::Nchw);
        spec.check(&input(DType::Float32, &[1, 3, 224, 224]))
            .unwrap();
    }

    #[test]
    fn bad_blocks_name_the_field_and_the_fix() {
        let rgb = r#"kind = "image", colour = "rgb", input_size = [3, 224, 224], mean = [0.5, 0.5, 0.5], std = [0.5, 0.5, 0.5]"#;
        let err = parse(&format!(r#"{{ {rgb}, interpolation = "lanczos" }}"#)).unwrap_err();
        assert!(err.contains("lanczos") && err.contains("bicubic"), "{err}");
        let err = parse(&format!(r#"{{ {rgb}, bogus = 1 }}"#)).unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let cases: &[(&str, &[i64], DType, &str)] = &[
            (
                "",
                &[-1, 3, 256, 256],
                DType::Float32,
                "`input_size` [3, 224, 224]",
            ),
            ("", &[-1, 224, 224, 3], DType::Float32, "layout"),
            (
                ", layout = \"nhwc\"",
                &[-1, 224, 224, 3],
                DType::Float32,
                "",
            ),
            ("", &[-1, 3, 224, 224], DType::Uint8, "`dtype`"),
            (
                ", crop_pct = 1.5",
                &[-1, 3, 224, 224],
                DType::Float32,
                "`crop_pct`",
            ),
            (
                ", resize_size = 256, crop_pct = 0.9",
                &[-1, 3, 224, 224],
                DType::Float32,
                "not both",
            ),
            (
                ", resize_size = 256",
                &[-1, 3, 224, 224],
                DType::Float32,
                "",
            ),
        ];
        for (extra, shape, dtype, expected) in cases {
            let p = parse(&format!("{{ {rgb}{extra} }}")).unwrap();
            let result = p.check(&input(*dtype, shape));
            if expected.is_empty() {
                result.unwrap();
            } else {
                let err = result.unwrap_err();
                assert!(err.contains(expected), "{extra} {shape:?}: {err}");
            }
        }
        let grey3 = parse(
            r#"{ kind = "image", colour = "grey", input_size = [3, 28, 28], mean = [0.5], std = [0.5] }"#,
        )
        .unwrap();
        let err = grey3
            .check(&input(DType::Float32, &[-1, 3, 28, 28]))
            .unwrap_err();
        assert!(err.contains("channels"), "{err}");
        let short_mean = parse(
            r#"{ kind = "image", colour = "rgb", input_size = [3, 28, 28], mean = [0.5], std = [0.5, 0.5, 0.5] }"#,
        )
        .unwrap();
        let err = short_mean
            .check(&input(DType::Float32, &[-1, 3, 28, 28]))
            .unwrap_err();
        assert!(err.contains("`mean` has 1 values for 3 channels"), "{err}");
    }

    #[test]
    fn tensor_and_text_blocks() {
        let tensor = parse(r#"{ kind = "tensor" }"#).unwrap();
        assert_eq!(tensor, Preprocess::Tensor);
        tensor.check(&input(DType::Float64, &[-1, 4])).unwrap();
        let err = tensor.check(&input(DType::Float64, &[-1, -1])).unwrap_err();
        assert!(err.contains("fixed"), "{err}");
        let text = parse(r#"{ kind = "text", tokenizer = "t.json", max_tokens = 16 }"#).unwrap();
        let ids = |name: &str| TensorSpec {
            name: name.into(),
            dtype: DType::Int64,
            shape: vec![-1, -1],
        };
        text.check(&[
            ids("input_ids"),
            ids("attention_mask"),
            ids("token_type_ids"),
        ])
        .unwrap();
        assert!(text.check(&[ids("input_ids")]).is_err());
    }
}
