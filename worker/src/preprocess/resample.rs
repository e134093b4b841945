//! PIL's `Image.resize` for 8-bit images, ported from Pillow's `libImaging/Resample.c`
//! (bilinear and bicubic) and `Geometry.c` (nearest), so a model trained on PIL +
//! torchvision/timm transforms sees the same pixels here.
//!
//! Hand-written on purpose: the parity with PIL has to be exact, and no crate promises
//! it. `image::imageops::resize` uses its own kernels and float arithmetic, and
//! `fast_image_resize` picks its fixed-point precision per kernel rather than PIL's fixed
//! 22 bits, so either can land one grey level away from PIL on some pixels. This port keeps
//! PIL's order (horizontal pass first, into an 8-bit intermediate), its kernel support
//! widening when downscaling (antialias), its bicubic `a = -0.5`, its coefficient
//! rounding to 22-bit fixed point and its final clipping.

use cocktail_common::preprocess::Interpolation;

/// Fixed-point bits of PIL's 8-bit coefficients (`PRECISION_BITS` in Resample.c).
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// An 8-bit image with interleaved channels, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pixels {
    pub width: u32,
    pub height: u32,
    /// 1 (grey) or 3 (RGB).
    pub channels: u32,
    pub data: Vec<u8>,
}

impl Pixels {
    fn row_len(&self) -> usize {
        self.width as usize * self.channels as usize
    }
}

fn bilinear(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 { 1.0 - x } else { 0.0 }
}

fn bicubic(x: f64) -> f64 {
    // PIL's `bicubic_filter`, a = -0.5.
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Per output index: the first input index, and the fixed-point weights from there.
#[derive(Debug)]
struct Coefficients {
    bounds: Vec<(usize, usize)>,
    weights: Vec<Vec<i32>>,
}

/// `precompute_coeffs` + `normalize_coeffs_8bpc` of Resample.c for the whole input range.
fn coefficients(in_size: u32, out_size: u32, filter: fn(f64) -> f64, support: f64) -> Coefficients {
    let scale = f64::from(in_size) / f64::from(out_size);
    let filterscale = scale.max(1.0);
    let support = support * filterscale;
    let mut bounds = Vec::with_capacity(out_size as usize);
    let mut weights = Vec::with_capacity(out_size as usize);
    for xx in 0..out_size {
        let center = (f64::from(xx) + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C's `(int)` truncates toward zero, as `as i64` does.
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xmax = ((center + support + 0.5) as i64).min(i64::from(in_size));
        let count = (xmax - xmin).max(0) as usize;
        let mut k: Vec<f64> = (0..count)
            .map(|x| filter((x as f64 + xmin as f64 - center + 0.5) * ss))
            .collect();
        let total: f64 = k.iter().sum();
        if total != 0.0 {
            for w in &mut k {
                *w /= total;
            }
        }
        let fixed = k
            .iter()
            .map(|&w| {
                let scaled = w * f64::from(1_u32 << PRECISION_BITS);
                if w < 0.0 {
                    (-0.5 + scaled) as i32
                } else {
                    (0.5 + scaled) as i32
                }
            })
            .collect();
        bounds.push((xmin as usize, count));
        weights.push(fixed);
    }
    Coefficients { bounds, weights }
}

fn clip8(sum: i64) -> u8 {
    if sum >= (1_i64 << PRECISION_BITS << 8) {
        255
    } else if sum <= 0 {
        0
    } else {
        (sum >> PRECISION_BITS) as u8
    }
}

/// Resizes like `PIL.Image.resize((width, height), filter)`; the same size is a copy.
pub fn resize(image: &Pixels, width: u32, height: u32, filter: Interpolation) -> Pixels {
    if (image.width, image.height) == (width, height) {
        return image.clone();
    }
    match filter {
        Interpolation::Nearest => nearest(image, width, height),
        Interpolation::Bilinear => convolve(image, width, height, bilinear, 1.0),
        Interpolation::Bicubic => convolve(image, width, height, bicubic, 2.0),
    }
}

fn convolve(
    image: &Pixels,
    width: u32,
    height: u32,
    filter: fn(f64) -> f64,
    support: f64,
) -> Pixels {
    let c = image.channels as usize;
    let horizontal = coefficients(image.width, width, filter, support);
    let vertical = coefficients(image.height, height, filter, support);
    let need_horizontal = width != image.width;
    let need_vertical = height != image.height;
    // The rows the vertical pass reads; the horizontal pass computes only those.
    let (first_row, last_row) = if need_vertical {
        let first = vertical.bounds.first().map_or(0, |b| b.0);
        let last = vertical.bounds.last().map_or(0, |b| b.0 + b.1);
        (first, last)
    } else {
        (0, image.height as usize)
    };
    let temp = if need_horizontal {
        let out_row = width as usize * c;
        let mut data = vec![0_u8; out_row * (last_row - first_row)];
        for (y, out) in (first_row..last_row).zip(data.chunks_exact_mut(out_row)) {
            let row = &image.data[y * image.row_len()..(y + 1) * image.row_len()];
            for (xx, ((xmin, count), k)) in horizontal
                .bounds
                .iter()
                .zip(&horizontal.weights)
                .enumerate()
            {
                for ch in 0..c {
                    let mut sum: i64 = 1 << (PRECISION_BITS - 1);
                    for (x, &w) in k.iter().enumerate().take(*count) {
                        sum += i64::from(row[(xmin + x) * c + ch]) * i64::from(w);
                    }
                    out[xx * c + ch] = clip8(sum);
                }
            }
        }
        Pixels {
            width,
            height: (last_row - first_row) as u32,
            channels: image.channels,
            data,
        }
    } else {
        Pixels {
            width: image.width,
            height: (last_row - first_row) as u32,
            channels: image.channels,
            data: image.data[first_row * image.row_len()..last_row * image.row_len()].to_vec(),
        }
    };
    if !need_vertical {
        return temp;
    }
    let row_len = temp.row_len();
    let mut data = vec![0_u8; row_len * height as usize];
    for (yy, out) in data.chunks_exact_mut(row_len).enumerate() {
        let (ymin, count) = vertical.bounds[yy];
        let ymin = ymin - first_row;
        let k = &vertical.weights[yy];
        for (i, value) in out.iter_mut().enumerate() {
            let mut sum: i64 = 1 << (PRECISION_BITS - 1);
            for (y, &w) in k.iter().enumerate().take(count) {
                sum += i64::from(temp.data[(ymin + y) * row_len + i]) * i64::from(w);
            }
            *value = clip8(sum);
        }
    }
    Pixels {
        width: temp.width,
        height,
        channels: temp.channels,
        data,
    }
}

/// PIL's nearest resize: an affine scale (`ImagingScaleAffine`) that samples the input
/// at `(x + 0.5) * scale`, accumulated step by step in `f64` as Geometry.c does.
fn nearest(image: &Pixels, width: u32, height: u32) -> Pixels {
    let c = image.channels as usize;
    let index = |in_size: u32, out_size: u32| -> Vec<usize> {
        let step = f64::from(in_size) / f64::from(out_size);
        let mut at = step * 0.5;
        (0..out_size)
            .map(|_| {
                let i = (at.max(0.0) as usize).min(in_size as usize - 1);
                at += step;
                i
            })
            .collect()
    };
    let xs = index(image.width, width);
    let ys = index(image.height, height);
    let mut data = Vec::with_capacity(width as usize * height as usize * c);
    for &y in &ys {
        let row = &image.data[y * image.row_len()..(y + 1) * image.row_len()];
        for &x in &xs {
            data.extend_from_slice(&row[x * c..(x + 1) * c]);
        }
    }
    Pixels {
        width,
        height,
        channels: image.channels,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grey(width: u32, height: u32, data: Vec<u8>) -> Pixels {
        Pixels {
            width,
            height,
            channels: 1,
            data,
        }
    }

    #[test]
    fn bicubic_kernel_is_pils() {
        assert_eq!(bicubic(0.0), 1.0);
        assert_eq!(bicubic(1.0), 0.0);
        assert_eq!(bicubic(2.0), 0.0);
        // a = -0.5: at 0.5, (1.5 * 0.5 - 2.5) * 0.25 + 1 = 0.5625; at 1.5, -0.0625.
        assert_eq!(bicubic(0.5), 0.5625);
        assert_eq!(bicubic(1.5), -0.0625);
    }

    #[test]
    fn weights_sum_to_one_and_widen_when_downscaling() {
        for (input, output, support, expected_taps) in [
            (100_u32, 50_u32, 1.0, 4_usize),
            (100, 25, 2.0, 16),
            (10, 20, 1.0, 2),
            (10, 20, 2.0, 4),
        ] {
            let filter = if support == 1.0 { bilinear } else { bicubic };
            let c = coefficients(input, output, filter, support);
            let mid = output as usize / 2;
            assert_eq!(c.bounds[mid].1, expected_taps, "{input}->{output}");
            for k in &c.weights {
                let total: i64 = k.iter().map(|&w| i64::from(w)).sum();
                assert!((total - (1 << PRECISION_BITS)).abs() <= k.len() as i64);
            }
        }
    }

    #[test]
    fn uniform_images_stay_uniform_and_same_size_is_a_copy() {
        let flat = grey(37, 23, vec![200; 37 * 23]);
        for filter in [
            Interpolation::Nearest,
            Interpolation::Bilinear,
            Interpolation::Bicubic,
        ] {
            for (w, h) in [(10, 7), (80, 50), (37, 9)] {
                let out = resize(&flat, w, h, filter);
                assert_eq!((out.width, out.height), (w, h));
                assert!(out.data.iter().all(|&p| p == 200), "{filter:?} {w}x{h}");
            }
        }
        let ramp = grey(4, 1, vec![0, 50, 100, 150]);
        assert_eq!(resize(&ramp, 4, 1, Interpolation::Bicubic), ramp);
    }

    #[test]
    fn halving_averages_pairs_and_nearest_picks_centres() {
        // Bilinear 4 -> 2: each output is centred between two inputs, with support 2
        // (widened), weights 1/8, 3/8, 3/8, 1/8 clipped to the image at the edges.
        let ramp = grey(4, 1, vec![0, 40, 80, 120]);
        let out = resize(&ramp, 2, 1, Interpolation::Bilinear);
        // Left: taps 0..3 with weights 3/8,3/8,1/8 over 7/8 -> (0*3 + 40*3 + 80) / 7 = 28.57.
        assert_eq!(out.data, vec![29, 91]);
        let out = resize(&ramp, 2, 1, Interpolation::Nearest);
        assert_eq!(out.data, vec![40, 120]);
        let out = resize(&ramp, 8, 1, Interpolation::Nearest);
        assert_eq!(out.data, vec![0, 0, 40, 40, 80, 80, 120, 120]);
    }
}
