//! Where an image of any size goes on its way to the model's `input_size`: the size it is
//! resized to and the window the crop (or pad) takes, exactly as timm's
//! `transforms_imagenet_eval` and torchvision's `Resize` + `CenterCrop` compute them
//! (Python's `int()` truncation, `round()` half to even, `math.floor`).

use cocktail_common::preprocess::{CropMode, ImageSpec};

/// The resize, then the window of the resized image that becomes the model's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Width and height to resize to.
    pub resize: (u32, u32),
    /// Column and row of the resized image that lands at the output's top-left corner;
    /// negative when the output is padded. Pixels outside the resized image are `fill`.
    pub offset: (i64, i64),
}

/// torchvision's `Resize(size)` with an int: the shorter side becomes `size`, the longer
/// `int(size * long / short)`.
pub fn shorter_side(width: u32, height: u32, size: u32) -> (u32, u32) {
    let (short, long) = if width <= height {
        (width, height)
    } else {
        (height, width)
    };
    let new_long = (f64::from(size) * f64::from(long) / f64::from(short)) as u32;
    if width <= height {
        (size, new_long)
    } else {
        (new_long, size)
    }
}

/// timm's `ResizeKeepRatio.get_params` (no random scale): `longest` 1 fits the longer
/// side to the target, 0 the shorter.
pub fn keep_ratio(width: u32, height: u32, target: (u32, u32), longest: f64) -> (u32, u32) {
    let (target_w, target_h) = target;
    let ratio_h = f64::from(height) / f64::from(target_h);
    let ratio_w = f64::from(width) / f64::from(target_w);
    let ratio = ratio_h.max(ratio_w) * longest + ratio_h.min(ratio_w) * (1.0 - longest);
    let side = |x: u32| (f64::from(x) / ratio).round_ties_even().max(1.0) as u32;
    (side(width), side(height))
}

/// torchvision's `center_crop` (which pads with `fill` when the crop is larger) and
/// timm's `center_crop_or_pad`: the offset of the output window in the resized image.
pub fn centre_window(resized: (u32, u32), output: (u32, u32)) -> (i64, i64) {
    let axis = |image: u32, crop: u32| -> i64 {
        let (image, crop) = (i64::from(image), i64::from(crop));
        if crop > image {
            // Padded to exactly `crop` on this axis: the left/top pad is (crop - image) // 2.
            -((crop - image) / 2)
        } else {
            ((image - crop) as f64 / 2.0).round_ties_even() as i64
        }
    };
    (axis(resized.0, output.0), axis(resized.1, output.1))
}

/// The plan for an image of `width` x `height` under `spec`.
pub fn plan(spec: &ImageSpec, width: u32, height: u32) -> Plan {
    let output = (spec.width(), spec.height());
    let resize = if let Some(size) = spec.resize_size {
        shorter_side(width, height, size)
    } else {
        let pct = spec.effective_crop_pct();
        let scale = |x: u32| (f64::from(x) / pct).floor() as u32;
        let scale_size = (scale(output.0), scale(output.1));
        match spec.crop_mode {
            CropMode::Squash => scale_size,
            CropMode::Border => keep_ratio(width, height, scale_size, 1.0),
            CropMode::Center if scale_size.0 == scale_size.1 => {
                shorter_side(width, height, scale_size.0)
            }
            CropMode::Center => keep_ratio(width, height, scale_size, 0.0),
        }
    };
    Plan {
        resize,
        offset: centre_window(resize, output),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cocktail_common::preprocess::{Colour, Interpolation, Layout, PixelType};

    fn spec(
        size: (u32, u32),
        crop_pct: Option<f64>,
        mode: CropMode,
        resize: Option<u32>,
    ) -> ImageSpec {
        ImageSpec {
            colour: Colour::Rgb,
            input_size: [3, size.1, size.0],
            interpolation: Interpolation::Bicubic,
            crop_pct,
            crop_mode: mode,
            resize_size: resize,
            scale: None,
            mean: Some(vec![0.5; 3]),
            std: Some(vec![0.5; 3]),
            layout: Layout::Nchw,
            dtype: PixelType::Float32,
        }
    }

    #[test]
    fn shorter_side_cases() {
        // (width, height, size) -> resized; int() truncates the longer side.
        for (w, h, size, expected) in [
            (640, 480, 256, (341, 256)),
            (480, 640, 256, (256, 341)),
            (500, 375, 256, (341, 256)),
            (100, 100, 224, (224, 224)),
            (300, 451, 256, (256, 384)),
            (28, 28, 28, (28, 28)),
            (1, 1000, 10, (10, 10000)),
        ] {
            assert_eq!(shorter_side(w, h, size), expected, "{w}x{h} -> {size}");
        }
    }

    #[test]
    fn centre_window_cases() {
        // (resized, output) -> offset; round() is half to even, pads split low side first.
        for (resized, output, expected) in [
            ((256, 256), (224, 224), (16, 16)),
            ((341, 256), (224, 224), (58, 16)), // 117 / 2 = 58.5 -> 58
            ((343, 256), (224, 224), (60, 16)), // 119 / 2 = 59.5 -> 60
            ((224, 224), (224, 224), (0, 0)),
            ((200, 300), (224, 224), (-12, 38)), // pad 24: 12 left, 12 right
            ((201, 224), (224, 224), (-11, 0)),  // pad 23: 11 left, 12 right
            ((28, 28), (28, 28), (0, 0)),
        ] {
            assert_eq!(
                centre_window(resized, output),
                expected,
                "{resized:?} -> {output:?}"
            );
        }
    }

    #[test]
    fn plan_cases() {
        let centre = spec((224, 224), Some(0.875), CropMode::Center, None);
        let squash = spec((224, 224), Some(0.875), CropMode::Squash, None);
        let border = spec((224, 224), Some(1.0), CropMode::Border, None);
        let torchvision = spec((224, 224), None, CropMode::Center, Some(232));
        let wide = spec((320, 240), Some(1.0), CropMode::Center, None);
        let lite = spec((280, 280), Some(0.882), CropMode::Center, None);
        for (s, (w, h), resize, offset) in [
            (&centre, (640, 480), (341, 256), (58, 16)),
            (&centre, (224, 224), (256, 256), (16, 16)),
            (&squash, (640, 480), (256, 256), (16, 16)),
            (&border, (640, 480), (224, 168), (0, -28)),
            (&border, (480, 640), (168, 224), (-28, 0)),
            (&torchvision, (500, 375), (309, 232), (42, 4)),
            // Non-square target: timm's ResizeKeepRatio on the shorter side (longest = 0).
            (&wide, (1000, 1000), (320, 320), (0, 40)),
            // floor(280 / 0.882) = 317.
            (&lite, (451, 300), (476, 317), (98, 18)),
        ] {
            assert_eq!(
                plan(s, w, h),
                Plan { resize, offset },
                "{w}x{h} with {:?} {:?} {:?}",
                s.crop_mode,
                s.crop_pct,
                s.resize_size
            );
        }
    }
}
