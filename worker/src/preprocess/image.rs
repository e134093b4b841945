//! Image preprocessing: decode (PNG or JPEG, any size and colour), convert to grey,
//! resize to the model's size, normalise. Fashion-MNIST is light garments on a black
//! background; inputs are not inverted, because training did not invert.

use cocktail_common::testset::GreyImage;
use image::imageops::{self, FilterType};
use image::{ImageReader, Limits};
use ndarray::Array4;

use crate::WorkerError;

/// Largest width or height accepted; larger images are refused from their header,
/// before any pixel is decoded (decompression bombs).
pub const MAX_IMAGE_SIDE: u32 = 4096;

/// Normalisation and size of an image model's input.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePreprocessor {
    pub width: u32,
    pub height: u32,
    pub scale: f32,
    pub mean: f32,
    pub std: f32,
}

/// Decodes PNG or JPEG bytes into an 8-bit grey image, refusing oversized images early.
pub fn decode_image(bytes: &[u8]) -> Result<GreyImage, WorkerError> {
    let reader = ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| WorkerError::invalid("image", format!("cannot read: {e}")))?;
    let Some(_) = reader.format() else {
        return Err(WorkerError::invalid("image", "not a PNG or JPEG image"));
    };
    let (width, height) = reader
        .into_dimensions()
        .map_err(|e| WorkerError::invalid("image", format!("cannot decode: {e}")))?;
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(WorkerError::invalid(
            "image",
            format!(
                "{width}x{height} pixels is over the limit of {MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE}"
            ),
        ));
    }
    // `into_dimensions` consumed the reader; decoding again is cheap next to inference.
    let mut reader = ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| WorkerError::invalid("image", format!("cannot read: {e}")))?;
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    reader.limits(limits);
    let decoded = reader
        .decode()
        .map_err(|e| WorkerError::invalid("image", format!("cannot decode: {e}")))?;
    let grey = decoded.into_luma8();
    Ok(GreyImage {
        width: grey.width(),
        height: grey.height(),
        pixels: grey.into_raw(),
    })
}

impl ImagePreprocessor {
    /// One normalised tensor `[n, 1, height, width]` for the images, resizing those that
    /// are not the model's size (bilinear, as PIL's default for downscaling photos).
    pub fn tensor(&self, images: &[&GreyImage]) -> Array4<f32> {
        let (w, h) = (self.width as usize, self.height as usize);
        let mut out = Array4::<f32>::zeros((images.len(), 1, h, w));
        for (mut slot, image) in out.outer_iter_mut().zip(images) {
            let resized;
            let pixels = if (image.width, image.height) == (self.width, self.height) {
                &image.pixels
            } else {
                resized = self.resize(image);
                &resized
            };
            for (dst, &p) in slot.iter_mut().zip(pixels.iter()) {
                *dst = (f32::from(p) * self.scale - self.mean) / self.std;
            }
        }
        out
    }

    fn resize(&self, image: &GreyImage) -> Vec<u8> {
        let Some(buffer) =
            image::GrayImage::from_raw(image.width, image.height, image.pixels.clone())
        else {
            // A GreyImage whose pixel count disagrees with its size comes only from a bug;
            // a black image keeps the request answerable.
            return vec![0; (self.width * self.height) as usize];
        };
        imageops::resize(&buffer, self.width, self.height, FilterType::Triangle).into_raw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fashion() -> ImagePreprocessor {
        ImagePreprocessor {
            width: 28,
            height: 28,
            scale: 1.0 / 255.0,
            mean: 0.2860,
            std: 0.3530,
        }
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
        let image = GreyImage {
            width: 28,
            height: 28,
            pixels: (0..784).map(|i| (i % 256) as u8).collect(),
        };
        let t = fashion().tensor(&[&image]);
        assert_eq!(t.shape(), &[1, 1, 28, 28]);
        assert!((t[[0, 0, 0, 0]] - (0.0 - 0.2860) / 0.3530).abs() < 1e-6);
        assert!((t[[0, 0, 9, 3]] - (255.0 / 255.0 - 0.2860) / 0.3530).abs() < 1e-6);
    }

    #[test]
    fn decodes_any_size_and_colour() {
        let grey = decode_image(&png(100, 60, true)).unwrap();
        assert_eq!((grey.width, grey.height), (100, 60));
        let t = fashion().tensor(&[&grey]);
        assert_eq!(t.shape(), &[1, 1, 28, 28]);
        // Pure red is luma 54 (Rec. 601 weights in `image`).
        let expected = (54.0 / 255.0 - 0.2860) / 0.3530;
        assert!(
            t.iter().all(|&v| (v - expected).abs() < 0.02),
            "{}",
            t[[0, 0, 14, 14]]
        );
    }

    #[test]
    fn refuses_bad_images() {
        let err = decode_image(b"definitely not an image")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`image`"), "{err}");
        let err = decode_image(&png(4097, 1, false)).unwrap_err().to_string();
        assert!(err.contains("4097x1") && err.contains("4096x4096"), "{err}");
        let mut truncated = png(50, 50, false);
        truncated.truncate(truncated.len() / 2);
        assert!(decode_image(&truncated).is_err());
    }
}
