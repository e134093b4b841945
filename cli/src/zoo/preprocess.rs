//! An added model's `preprocess` block: from timm's `config.json`, a Hugging Face
//! `preprocessor_config.json` or flags (flags override a config), checked against the
//! model's input with the checks the worker runs (`Preprocess::check`).

use std::path::Path;

use anyhow::{Context as _, bail};
use clap::Args;
use cocktail_common::Preprocess;
use cocktail_common::preprocess::{Colour, CropMode, ImageSpec, Interpolation, Layout, PixelType};
use cocktail_common::zoo::TensorSpec;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Image preprocessing flags of `cocktail zoo add` (timm's names).
#[derive(Debug, Default, Args)]
pub struct ImageFlags {
    /// grey, rgb or bgr (default: rgb for 3 channels, grey for 1).
    #[arg(long)]
    colour: Option<String>,
    /// The model's [channels, height, width], e.g. 3,224,224 (default: from its input shape).
    #[arg(long, value_delimiter = ',')]
    input_size: Option<Vec<u32>>,
    /// nearest, bilinear or bicubic (default bicubic, timm's).
    #[arg(long)]
    interpolation: Option<String>,
    /// The share of the resized image the centre crop keeps (timm's; default 0.875).
    #[arg(long)]
    crop_pct: Option<f64>,
    /// center, squash or border (timm's; default center).
    #[arg(long)]
    crop_mode: Option<String>,
    /// torchvision's resize size: the shorter side before the centre crop.
    #[arg(long)]
    resize_size: Option<u32>,
    /// Multiply each pixel (0-255) by this instead of dividing by 255.
    #[arg(long)]
    scale: Option<f32>,
    /// Per-channel mean, e.g. 0.485,0.456,0.406.
    #[arg(long, value_delimiter = ',')]
    mean: Option<Vec<f32>>,
    /// Per-channel std, e.g. 0.229,0.224,0.225.
    #[arg(long, value_delimiter = ',')]
    std: Option<Vec<f32>>,
    /// nchw or nhwc (default: from the input's shape when that is unambiguous).
    #[arg(long)]
    layout: Option<String>,
    /// float32 or uint8 (default: the input's element type).
    #[arg(long)]
    pixel_type: Option<String>,
}

impl ImageFlags {
    fn any(&self) -> bool {
        self.colour.is_some()
            || self.input_size.is_some()
            || self.interpolation.is_some()
            || self.crop_pct.is_some()
            || self.crop_mode.is_some()
            || self.resize_size.is_some()
            || self.scale.is_some()
            || self.mean.is_some()
            || self.std.is_some()
            || self.layout.is_some()
            || self.pixel_type.is_some()
    }
}

/// An image block under construction: what a config or the flags said so far.
#[derive(Debug, Default)]
struct Partial {
    colour: Option<Colour>,
    input_size: Option<[u32; 3]>,
    interpolation: Option<Interpolation>,
    crop_pct: Option<f64>,
    crop_mode: Option<CropMode>,
    resize_size: Option<u32>,
    scale: Option<f32>,
    mean: Option<Vec<f32>>,
    std: Option<Vec<f32>>,
    layout: Option<Layout>,
    dtype: Option<PixelType>,
}

/// The image block for a model with `inputs`, from `config` (if any) then `flags`.
pub fn image(
    config: Option<&Path>,
    flags: &ImageFlags,
    inputs: &[TensorSpec],
    model: &Path,
) -> anyhow::Result<Option<Preprocess>> {
    let mut partial = match config {
        Some(path) => from_config(path)?,
        None if flags.any() => Partial::default(),
        None => return Ok(None),
    };
    apply_flags(&mut partial, flags)?;
    let [input] = inputs else {
        bail!(
            "`{}` has {} inputs; an image model takes one (serve it with --kind tensor instead)",
            model.display(),
            inputs.len()
        );
    };
    let spec = finish(partial, input).with_context(|| {
        format!(
            "preprocessing for input `{}` {:?} of `{}`",
            input.name,
            input.shape,
            model.display()
        )
    })?;
    Ok(Some(Preprocess::Image(spec)))
}

fn parse_enum<T: DeserializeOwned>(flag: &str, value: &str, choices: &str) -> anyhow::Result<T> {
    serde_json::from_value(Value::String(value.to_lowercase()))
        .with_context(|| format!("--{flag} `{value}` is not one of {choices}"))
}

fn apply_flags(p: &mut Partial, f: &ImageFlags) -> anyhow::Result<()> {
    if let Some(v) = &f.colour {
        p.colour = Some(parse_enum("colour", v, "grey, rgb, bgr")?);
    }
    if let Some(v) = &f.input_size {
        let [c, h, w] = v[..] else {
            bail!("--input-size takes three numbers: channels,height,width");
        };
        p.input_size = Some([c, h, w]);
    }
    if let Some(v) = &f.interpolation {
        p.interpolation = Some(parse_enum(
            "interpolation",
            v,
            "nearest, bilinear, bicubic",
        )?);
    }
    if let Some(v) = &f.crop_mode {
        p.crop_mode = Some(parse_enum("crop-mode", v, "center, squash, border")?);
    }
    if let Some(v) = &f.layout {
        p.layout = Some(parse_enum("layout", v, "nchw, nhwc")?);
    }
    if let Some(v) = &f.pixel_type {
        p.dtype = Some(parse_enum("pixel-type", v, "float32, uint8")?);
    }
    if f.crop_pct.is_some() {
        p.crop_pct = f.crop_pct;
        p.resize_size = None;
    }
    if f.resize_size.is_some() {
        p.resize_size = f.resize_size;
        p.crop_pct = None;
    }
    p.scale = f.scale.or(p.scale);
    p.mean = f.mean.clone().or(p.mean.take());
    p.std = f.std.clone().or(p.std.take());
    Ok(())
}

/// Fills what is left from the input: layout from its shape, size and colour from its
/// channels, pixel type from its element type; then the worker's own check.
fn finish(p: Partial, input: &TensorSpec) -> anyhow::Result<ImageSpec> {
    let shape = &input.shape;
    if shape.len() != 4 {
        bail!(
            "an image input is 4-D [batch, ...]; this one is not (serve the model with --kind tensor)"
        );
    }
    let dim = |i: usize| u32::try_from(shape[i]).ok();
    let channels_fit = |c: Option<u32>, axis: usize| match (c, dim(axis)) {
        (Some(c), Some(d)) => c == d,
        (None, Some(d)) => d == 1 || d == 3,
        (_, None) => false,
    };
    let want_c = p
        .input_size
        .map(|s| s[0])
        .or(p.colour.map(Colour::channels));
    let layout = match p.layout {
        Some(layout) => layout,
        None => match (channels_fit(want_c, 1), channels_fit(want_c, 3)) {
            (true, false) => Layout::Nchw,
            (false, true) => Layout::Nhwc,
            (true, true) => {
                bail!("both NCHW and NHWC fit this shape; pass --layout nchw or --layout nhwc")
            }
            (false, false) => bail!(
                "no axis of the shape holds {} channels; pass --layout and --input-size (channels,height,width)",
                want_c.map_or("1 or 3".to_owned(), |c| c.to_string())
            ),
        },
    };
    let (c_axis, h_axis, w_axis) = match layout {
        Layout::Nchw => (1, 2, 3),
        Layout::Nhwc => (3, 1, 2),
    };
    let input_size = match p.input_size {
        Some(size) => size,
        None => match (want_c.or(dim(c_axis)), dim(h_axis), dim(w_axis)) {
            (Some(c), Some(h), Some(w)) => [c, h, w],
            _ => bail!(
                "the input's height or width is dynamic; pass --input-size channels,height,width"
            ),
        },
    };
    let colour = match p.colour {
        Some(c) => c,
        None if input_size[0] == 1 => Colour::Grey,
        None if input_size[0] == 3 => Colour::Rgb,
        None => bail!("{} channels: pass --colour", input_size[0]),
    };
    let dtype = match p.dtype {
        Some(d) => d,
        None => match input.dtype {
            cocktail_common::zoo::DType::Uint8 => PixelType::Uint8,
            _ => PixelType::Float32,
        },
    };
    let spec = ImageSpec {
        colour,
        input_size,
        interpolation: p.interpolation.unwrap_or(Interpolation::Bicubic),
        crop_pct: p.crop_pct,
        crop_mode: p.crop_mode.unwrap_or(CropMode::Center),
        resize_size: p.resize_size,
        scale: p.scale,
        mean: p.mean,
        std: p.std,
        layout,
        dtype,
    };
    spec.check(std::slice::from_ref(input)).map_err(|m| {
        anyhow::anyhow!(
            "{m} (flags: --input-size, --layout, --mean, --std, --colour, --pixel-type)"
        )
    })?;
    Ok(spec)
}

fn from_config(path: &Path) -> anyhow::Result<Partial> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading `{}`", path.display()))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("`{}` is not valid JSON", path.display()))?;
    let parsed = if let Some(cfg) = json.get("pretrained_cfg") {
        timm(cfg)
    } else if json.get("input_size").is_some() {
        timm(&json)
    } else if json.get("image_mean").is_some() || json.get("crop_size").is_some() {
        hugging_face(&json)
    } else {
        bail!(
            "`{}` is neither timm's config.json (`pretrained_cfg` or `input_size`) nor a Hugging Face preprocessor_config.json (`image_mean`, `size`); give preprocessing flags instead",
            path.display()
        );
    };
    parsed.with_context(|| format!("`{}`", path.display()))
}

fn field<T: DeserializeOwned>(json: &Value, key: &str) -> anyhow::Result<Option<T>> {
    match json.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .with_context(|| format!("`{key}` = {v} is not what was expected")),
    }
}

/// timm's pretrained config: `input_size`, `interpolation`, `crop_pct`, `crop_mode`,
/// `mean`, `std` (and this project's exports' `layout`, ignored: the shape decides).
fn timm(cfg: &Value) -> anyhow::Result<Partial> {
    let input_size: Option<[u32; 3]> = field(cfg, "input_size")?;
    Ok(Partial {
        colour: input_size.map(|s| if s[0] == 1 { Colour::Grey } else { Colour::Rgb }),
        input_size,
        interpolation: field(cfg, "interpolation")?,
        crop_pct: field(cfg, "crop_pct")?,
        crop_mode: field(cfg, "crop_mode")?,
        mean: field(cfg, "mean")?,
        std: field(cfg, "std")?,
        ..Partial::default()
    })
}

/// A `size` or `crop_size`: a number, `{height, width}` or `{shortest_edge}`.
#[derive(Debug, Clone, Copy)]
enum HfSize {
    Square(u32),
    Exact(u32, u32),
    Shortest(u32),
}

fn hf_size(json: &Value, key: &str) -> anyhow::Result<Option<HfSize>> {
    let Some(v) = json.get(key).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let number = |k: &str| {
        v.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
    };
    if let Some(n) = v.as_u64().and_then(|n| u32::try_from(n).ok()) {
        return Ok(Some(HfSize::Square(n)));
    }
    if let (Some(h), Some(w)) = (number("height"), number("width")) {
        return Ok(Some(HfSize::Exact(h, w)));
    }
    if let Some(s) = number("shortest_edge") {
        return Ok(Some(HfSize::Shortest(s)));
    }
    bail!("`{key}` = {v}: expected a number, {{height, width}} or {{shortest_edge}}")
}

/// Hugging Face image processors (ViTImageProcessor, ConvNextImageProcessor, ...).
fn hugging_face(json: &Value) -> anyhow::Result<Partial> {
    let interpolation = match field::<u32>(json, "resample")? {
        None | Some(2) => Interpolation::Bilinear,
        Some(0) => Interpolation::Nearest,
        Some(3) => Interpolation::Bicubic,
        Some(other) => bail!(
            "`resample` = {other} (PIL's filter number) is not supported; Cocktail-rs has nearest (0), bilinear (2) and bicubic (3)"
        ),
    };
    let size = hf_size(json, "size")?;
    let crop = hf_size(json, "crop_size")?;
    let do_crop = field::<bool>(json, "do_center_crop")?.unwrap_or(crop.is_some());
    let mut p = Partial {
        colour: Some(Colour::Rgb),
        interpolation: Some(interpolation),
        ..Partial::default()
    };
    let (crop_h, crop_w) = match (do_crop, crop, size) {
        (true, Some(HfSize::Square(n)), _) => (n, n),
        (true, Some(HfSize::Exact(h, w)), _) => (h, w),
        (false, _, Some(HfSize::Square(n))) => (n, n),
        (false, _, Some(HfSize::Exact(h, w))) => (h, w),
        _ => bail!(
            "cannot tell the model's input size from `size` and `crop_size`; pass --input-size"
        ),
    };
    p.input_size = Some([3, crop_h, crop_w]);
    match (do_crop, size) {
        (true, Some(HfSize::Shortest(s))) => {
            p.resize_size = Some(s);
            p.crop_mode = Some(CropMode::Center);
        }
        (true, Some(HfSize::Square(n))) => {
            p.crop_mode = Some(CropMode::Squash);
            p.crop_pct = Some(f64::from(crop_h) / f64::from(n));
        }
        (true, Some(HfSize::Exact(h, w)))
            if u64::from(crop_h) * u64::from(w) == u64::from(crop_w) * u64::from(h) =>
        {
            p.crop_mode = Some(CropMode::Squash);
            p.crop_pct = Some(f64::from(crop_h) / f64::from(h));
        }
        (false, _) => {
            p.crop_mode = Some(CropMode::Squash);
            p.crop_pct = Some(1.0);
        }
        _ => bail!(
            "`size` and `crop_size` are not a resize Cocktail-rs reproduces; give preprocessing flags instead"
        ),
    }
    let do_rescale = field::<bool>(json, "do_rescale")?.unwrap_or(true);
    let factor = field::<f64>(json, "rescale_factor")?.unwrap_or(1.0 / 255.0);
    if !do_rescale {
        p.scale = Some(1.0);
    } else if (factor - 1.0 / 255.0).abs() > 1e-9 {
        p.scale = Some(factor as f32);
    }
    if field::<bool>(json, "do_normalize")?.unwrap_or(true) {
        p.mean = field(json, "image_mean")?;
        p.std = field(json, "image_std")?;
    } else {
        p.mean = Some(vec![0.0; 3]);
        p.std = Some(vec![1.0; 3]);
    }
    Ok(p)
}
