//! Image preprocessing: decode (JPEG, PNG, WebP, GIF's first frame; EXIF orientation
//! applied), convert to the model's colours as PIL's `convert` does, resize and crop as
//! timm/torchvision do (see [`super::geometry`], [`super::resample`]), then normalise and
//! lay out as the manifest's `preprocess` block says.

use std::borrow::Cow;

use cocktail_common::preprocess::{Colour, ImageSpec, Layout, PixelType};
use cocktail_common::testset::GreyImage;
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader};
use ndarray::Array4;

use super::geometry::{Plan, plan};
use super::resample::{self, Pixels};
use crate::{Batch, WorkerError};

/// Largest width or height accepted; larger images are refused from their header,
/// before any pixel is decoded (decompression bombs).
pub const MAX_IMAGE_SIDE: u32 = 4096;

/// A decoded image: grey when the file is grey, RGB otherwise (alpha dropped, as PIL's
/// `convert("RGB")` drops it).
pub type DecodedImage = Pixels;

/// Decodes JPEG, PNG, WebP or GIF bytes (the first frame), turned upright by their EXIF
/// orientation, refusing oversized images from their header.
pub fn decode_image(bytes: &[u8]) -> Result<DecodedImage, WorkerError> {
    let bad = |what: &str, e: image::ImageError| {
        WorkerError::invalid(
            "image",
            format!("{what}: {e}; send a whole JPEG, PNG, WebP or GIF file"),
        )
    };
    let reader = ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| WorkerError::invalid("image", format!("cannot read: {e}")))?;
    let Some(format) = reader.format() else {
        return Err(WorkerError::invalid(
            "image",
            "is not a JPEG, PNG, WebP or GIF file",
        ));
    };
    if format == ImageFormat::Jpeg && !jpeg_is_whole(bytes) {
        return Err(WorkerError::invalid(
            "image",
            "is a truncated JPEG (no end-of-image marker after its last scan); send the whole file",
        ));
    }
    // The decoder reads only the header here; the size is checked before any pixel.
    let mut decoder = reader.into_decoder().map_err(|e| bad("cannot decode", e))?;
    let (width, height) = decoder.dimensions();
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(WorkerError::invalid(
            "image",
            format!(
                "{width}x{height} pixels is over the limit of {MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE}"
            ),
        ));
    }
    let orientation = decoder
        .orientation()
        .map_err(|e| bad("cannot read its orientation", e))?;
    let mut decoded = DynamicImage::from_decoder(decoder).map_err(|e| bad("cannot decode", e))?;
    decoded.apply_orientation(orientation);
    let grey = !decoded.color().has_color();
    Ok(if grey {
        let image = decoded.into_luma8();
        Pixels {
            width: image.width(),
            height: image.height(),
            channels: 1,
            data: image.into_raw(),
        }
    } else {
        let image = decoded.into_rgb8();
        Pixels {
            width: image.width(),
            height: image.height(),
            channels: 3,
            data: image.into_raw(),
        }
    })
}

/// Whether a JPEG ends its last scan with an end-of-image marker. zune-jpeg decodes a
/// truncated file without an error (the missing rows come out grey), where PIL refuses it
/// ("image file is truncated"); a cut upload must not be classified. Inside a scan 0xFF is
/// always followed by 0x00 or a restart marker, so FF D9 after the last start-of-scan
/// (FF DA) is the file's own end, not an embedded thumbnail's.
fn jpeg_is_whole(bytes: &[u8]) -> bool {
    let Some(last_scan) = bytes.windows(2).rposition(|w| w == [0xFF, 0xDA]) else {
        return false;
    };
    bytes[last_scan..].windows(2).any(|w| w == [0xFF, 0xD9])
}

impl From<&GreyImage> for Pixels {
    fn from(image: &GreyImage) -> Self {
        Self {
            width: image.width,
            height: image.height,
            channels: 1,
            data: image.pixels.clone(),
        }
    }
}

/// PIL's `convert("L")` of RGB: ITU-R 601-2 luma in 16-bit fixed point (`L24` in
/// Convert.c), and `convert("RGB")` of grey: the value in every channel.
pub fn to_channels(image: Pixels, channels: u32) -> Pixels {
    match (image.channels, channels) {
        (3, 1) => Pixels {
            data: image
                .data
                .chunks_exact(3)
                .map(|p| {
                    let l = u32::from(p[0]) * 19595
                        + u32::from(p[1]) * 38470
                        + u32::from(p[2]) * 7471
                        + 0x8000;
                    (l >> 16) as u8
                })
                .collect(),
            channels: 1,
            ..image
        },
        (1, 3) => Pixels {
            data: image.data.iter().flat_map(|&p| [p, p, p]).collect(),
            channels: 3,
            ..image
        },
        _ => image,
    }
}

/// `value(position, channel)` for `hw` positions of `c` channels, in `layout`'s order.
/// Pushed into a vector of the exact size: the `flat_map` this replaced tells `collect`
/// no size, and the vector grew about ten times per fashion image.
fn laid_out<T>(layout: Layout, hw: usize, c: usize, value: impl Fn(usize, usize) -> T) -> Vec<T> {
    let mut values = Vec::with_capacity(hw * c);
    match layout {
        Layout::Nhwc => {
            for i in 0..hw {
                values.extend((0..c).map(|k| value(i, k)));
            }
        }
        Layout::Nchw => {
            for k in 0..c {
                values.extend((0..hw).map(|i| value(i, k)));
            }
        }
    }
    values
}

/// An image model's preprocessing, built once from its manifest block.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePreprocessor {
    spec: ImageSpec,
    /// Per channel (model order), the normalised value of each 8-bit level.
    table: Vec<[f32; 256]>,
    /// The colour of padding (`crop_mode = "border"`: the mean; else black), per channel
    /// in RGB order, as timm's `round(255 * mean)`.
    fill: Vec<u8>,
}

/// One item's tensor values, in the model's layout.
#[derive(Debug, Clone, PartialEq)]
pub enum PixelValues {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

impl ImagePreprocessor {
    pub fn new(spec: ImageSpec) -> Self {
        let (mean, std) = spec.normalisation();
        let table = mean
            .iter()
            .zip(&std)
            .map(|(&m, &s)| {
                let mut levels = [0.0_f32; 256];
                for (p, v) in levels.iter_mut().enumerate() {
                    // torchvision's ToTensor divides by 255 in float32; `scale` multiplies.
                    let x = match spec.scale {
                        None => p as f32 / 255.0,
                        Some(scale) => p as f32 * scale,
                    };
                    *v = (x - m) / s;
                }
                levels
            })
            .collect();
        let mut fill: Vec<u8> = match (spec.crop_mode, spec.dtype) {
            (cocktail_common::preprocess::CropMode::Border, PixelType::Float32) => mean
                .iter()
                .map(|&m| (255.0 * f64::from(m)).round_ties_even().clamp(0.0, 255.0) as u8)
                .collect(),
            _ => vec![0; spec.channels() as usize],
        };
        if spec.colour == Colour::Bgr {
            fill.reverse();
        }
        Self { spec, table, fill }
    }

    pub fn spec(&self) -> &ImageSpec {
        &self.spec
    }

    /// The input's height and width.
    pub fn size(&self) -> (u32, u32) {
        (self.spec.height(), self.spec.width())
    }

    /// Values per item.
    pub fn item_len(&self) -> usize {
        self.spec.shape(1).iter().product()
    }

    /// The resize and crop an image of this size gets.
    pub fn plan(&self, width: u32, height: u32) -> Plan {
        plan(&self.spec, width, height)
    }

    /// The 8-bit pixels the model sees, before normalisation: `[height][width][channel]`
    /// in RGB (or grey) order.
    pub fn pixels<'a>(&self, image: &'a Pixels) -> Cow<'a, Pixels> {
        let channels = self.spec.channels();
        let (out_w, out_h) = (self.spec.width(), self.spec.height());
        // An image already the model's size and channels (every fashion request) is its
        // own output: no copy. The general path below copies it three times.
        if image.channels == channels
            && (image.width, image.height) == (out_w, out_h)
            && self.plan(out_w, out_h)
                == (Plan {
                    resize: (out_w, out_h),
                    offset: (0, 0),
                })
        {
            return Cow::Borrowed(image);
        }
        let converted = to_channels(image.clone(), channels);
        let Plan { resize, offset } = self.plan(converted.width, converted.height);
        let resized = resample::resize(&converted, resize.0, resize.1, self.spec.interpolation);
        let (out_w, out_h) = (out_w as usize, out_h as usize);
        let c = channels as usize;
        let mut data = Vec::with_capacity(out_w * out_h * c);
        for y in 0..out_h as i64 {
            let sy = y + offset.1;
            for x in 0..out_w as i64 {
                let sx = x + offset.0;
                if (0..i64::from(resized.height)).contains(&sy)
                    && (0..i64::from(resized.width)).contains(&sx)
                {
                    let at = (sy as usize * resized.width as usize + sx as usize) * c;
                    data.extend_from_slice(&resized.data[at..at + c]);
                } else {
                    data.extend_from_slice(&self.fill);
                }
            }
        }
        Cow::Owned(Pixels {
            width: out_w as u32,
            height: out_h as u32,
            channels,
            data,
        })
    }

    /// One image's tensor values in the model's channel order, layout and type.
    pub fn item(&self, image: &Pixels) -> PixelValues {
        let pixels = self.pixels(image);
        let c = pixels.channels as usize;
        let hw = pixels.width as usize * pixels.height as usize;
        // Model channel `k` reads RGB channel `source(k)`.
        let bgr = self.spec.colour == Colour::Bgr;
        let source = |k: usize| if bgr { c - 1 - k } else { k };
        let at = |i: usize, k: usize| pixels.data[i * c + source(k)];
        let layout = self.spec.layout;
        match self.spec.dtype {
            PixelType::Uint8 => PixelValues::U8(laid_out(layout, hw, c, at)),
            PixelType::Float32 => PixelValues::F32(laid_out(layout, hw, c, |i, k| {
                self.table[k][usize::from(at(i, k))]
            })),
        }
    }

    /// Items' values joined into the model's input tensor.
    pub fn join(&self, items: &[&PixelValues]) -> Result<Batch, WorkerError> {
        let shape = self.spec.shape(items.len());
        let mismatch = || WorkerError::invalid("inputs", "pixel rows of another type or size");
        match self.spec.dtype {
            PixelType::Float32 => {
                let mut values = Vec::with_capacity(shape.iter().product());
                for item in items {
                    let PixelValues::F32(v) = item else {
                        return Err(mismatch());
                    };
                    values.extend_from_slice(v);
                }
                Array4::from_shape_vec(shape, values)
                    .map(Batch::Images)
                    .map_err(|_| mismatch())
            }
            PixelType::Uint8 => {
                let mut values = Vec::with_capacity(shape.iter().product());
                for item in items {
                    let PixelValues::U8(v) = item else {
                        return Err(mismatch());
                    };
                    values.extend_from_slice(v);
                }
                Array4::from_shape_vec(shape, values)
                    .map(Batch::ImagesU8)
                    .map_err(|_| mismatch())
            }
        }
    }

    /// One tensor for decoded images.
    pub fn tensor(&self, images: &[&Pixels]) -> Result<Batch, WorkerError> {
        let items: Vec<PixelValues> = images.iter().map(|i| self.item(i)).collect();
        self.join(&items.iter().collect::<Vec<_>>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cocktail_common::preprocess::{CropMode, Interpolation};

    fn fashion() -> ImagePreprocessor {
        ImagePreprocessor::new(ImageSpec {
            colour: Colour::Grey,
            input_size: [1, 28, 28],
            interpolation: Interpolation::Bilinear,
            crop_pct: Some(1.0),
            crop_mode: CropMode::Squash,
            resize_size: None,
            scale: None,
            mean: Some(vec![0.286]),
            std: Some(vec![0.353]),
            layout: Layout::Nchw,
            dtype: PixelType::Float32,
        })
    }

    fn png(width: u32, height: u32, colour: bool) -> Vec<u8> {
        let mut bytes = Vec::new();
        let cursor = std::io::Cursor::new(&mut bytes);
        if colour {
            image::RgbImage::from_pixel(width, height, image::Rgb([255, 0, 0]))
                .write_to(
                    &mut std::io::BufWriter::new(cursor),
                    image::ImageFormat::Png,
                )
                .unwrap();
        } else {
            image::GrayImage::from_pixel(width, height, image::Luma([200]))
                .write_to(
                    &mut std::io::BufWriter::new(cursor),
                    image::ImageFormat::Png,
                )
                .unwrap();
        }
        bytes
    }

    #[test]
    fn normalises_like_training() {
        let image = Pixels {
            width: 28,
            height: 28,
            channels: 1,
            data: (0..784).map(|i| (i % 256) as u8).collect(),
        };
        let PixelValues::F32(t) = fashion().item(&image) else {
            panic!("float32")
        };
        assert_eq!(t.len(), 784);
        assert_eq!(t[0], (0.0_f32 / 255.0 - 0.286) / 0.353);
        assert_eq!(t[9 * 28 + 3], (255.0_f32 / 255.0 - 0.286) / 0.353);
    }

    #[test]
    fn colour_becomes_pils_grey() {
        let colour = decode_image(&png(100, 60, true)).unwrap();
        assert_eq!((colour.width, colour.height, colour.channels), (100, 60, 3));
        let grey = fashion().pixels(&colour);
        // PIL's L of pure red: (255 * 19595 + 0x8000) >> 16 = 76.
        assert!(grey.data.iter().all(|&p| p == 76), "{:?}", &grey.data[..4]);
        let rgb = to_channels(decode_image(&png(3, 2, false)).unwrap(), 3);
        assert_eq!(rgb.data, vec![200; 18]);
    }

    #[test]
    fn layouts_and_channel_orders() {
        // A 1x2 image: left red, right blue, kept at its size.
        let image = Pixels {
            width: 2,
            height: 1,
            channels: 3,
            data: vec![255, 0, 0, 0, 0, 255],
        };
        let spec = |colour, layout| ImageSpec {
            colour,
            input_size: [3, 1, 2],
            interpolation: Interpolation::Nearest,
            crop_pct: Some(1.0),
            crop_mode: CropMode::Squash,
            resize_size: None,
            scale: None,
            mean: None,
            std: None,
            layout,
            dtype: PixelType::Uint8,
        };
        let cases = [
            (Colour::Rgb, Layout::Nchw, vec![255, 0, 0, 0, 0, 255]),
            (Colour::Rgb, Layout::Nhwc, vec![255, 0, 0, 0, 0, 255]),
            (Colour::Bgr, Layout::Nchw, vec![0, 255, 0, 0, 255, 0]),
            (Colour::Bgr, Layout::Nhwc, vec![0, 0, 255, 255, 0, 0]),
        ];
        for (colour, layout, expected) in cases {
            let pre = ImagePreprocessor::new(spec(colour, layout));
            assert_eq!(
                pre.item(&image),
                PixelValues::U8(expected),
                "{colour:?} {layout:?}"
            );
        }
        let Batch::ImagesU8(t) = ImagePreprocessor::new(spec(Colour::Rgb, Layout::Nhwc))
            .tensor(&[&image, &image])
            .unwrap()
        else {
            panic!("uint8")
        };
        assert_eq!(t.shape(), &[2, 1, 2, 3]);
    }

    #[test]
    fn border_pads_with_the_mean() {
        let pre = ImagePreprocessor::new(ImageSpec {
            colour: Colour::Rgb,
            input_size: [3, 4, 4],
            interpolation: Interpolation::Bilinear,
            crop_pct: Some(1.0),
            crop_mode: CropMode::Border,
            resize_size: None,
            scale: None,
            mean: Some(vec![0.5, 0.0, 1.0]),
            std: Some(vec![1.0, 1.0, 1.0]),
            layout: Layout::Nhwc,
            dtype: PixelType::Float32,
        });
        // 8x4 white: longer side to 4, so 4x2 then 1 row of padding above and below.
        let white = Pixels {
            width: 8,
            height: 4,
            channels: 3,
            data: vec![255; 8 * 4 * 3],
        };
        let pixels = pre.pixels(&white);
        assert_eq!(&pixels.data[..3], &[128, 0, 255]);
        assert_eq!(&pixels.data[4 * 3..4 * 3 + 3], &[255, 255, 255]);
        assert_eq!(&pixels.data[3 * 4 * 3..3 * 4 * 3 + 3], &[128, 0, 255]);
    }

    #[test]
    fn refuses_bad_images() {
        let err = decode_image(b"definitely not an image")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`image`"), "{err}");
        let err = decode_image(&png(4097, 1, false)).unwrap_err().to_string();
        assert!(err.contains("4097") && err.contains("4096"), "{err}");
        let mut truncated = png(50, 50, false);
        truncated.truncate(truncated.len() / 2);
        let err = decode_image(&truncated).unwrap_err().to_string();
        assert!(err.contains("`image`") && err.contains("whole"), "{err}");
        let mut jpeg = Vec::new();
        image::RgbImage::from_fn(64, 48, |x, y| image::Rgb([x as u8 * 4, y as u8 * 5, 90]))
            .write_to(
                &mut std::io::Cursor::new(&mut jpeg),
                image::ImageFormat::Jpeg,
            )
            .unwrap();
        assert_eq!(decode_image(&jpeg).unwrap().width, 64);
        for keep in [jpeg.len() - 2, jpeg.len() * 2 / 3, jpeg.len() / 3] {
            let err = decode_image(&jpeg[..keep]).unwrap_err().to_string();
            assert!(
                err.contains("`image`") && err.contains("truncated"),
                "{keep}: {err}"
            );
        }
    }
}
