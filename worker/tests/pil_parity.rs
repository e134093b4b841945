//! The worker's image preprocessing against the reference pipelines themselves: timm's
//! `create_transform` and torchvision's transforms over PIL, run by
//! `worker/tests/data/pil/make_reference.py` on synthetic photos (PNG, JPEG with an EXIF
//! orientation, GIF, lossless WebP). Lossless inputs must match bit for bit; JPEG inputs
//! within the tolerance each case states (the decoders differ, not the preprocessing).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cocktail_common::Preprocess;
use cocktail_worker::preprocess::{ImagePreprocessor, PixelValues, decode_image};
use serde_json::Value;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pil")
}

#[test]
fn image_preprocessing_matches_timm_and_torchvision_over_pil() {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(data().join("reference.json")).unwrap())
            .unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 13, "{} cases", cases.len());
    let mut report = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let Preprocess::Image(spec) =
            serde_json::from_value::<Preprocess>(case["preprocess"].clone()).unwrap()
        else {
            panic!("{name}: an image block")
        };
        let pre = ImagePreprocessor::new(spec);
        let bytes = std::fs::read(data().join(case["image"].as_str().unwrap())).unwrap();
        let decoded = decode_image(&bytes).unwrap();
        let expected = BASE64.decode(case["values"].as_str().unwrap()).unwrap();
        let tolerance = case["tolerance"].as_f64().unwrap() as f32;
        let worst = match (pre.item(&decoded), case["dtype"].as_str().unwrap()) {
            (PixelValues::F32(values), "float32") => {
                let expected: Vec<f32> = expected
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(values.len(), expected.len(), "{name}");
                values
                    .iter()
                    .zip(&expected)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0_f32, f32::max)
            }
            (PixelValues::U8(values), "uint8") => {
                assert_eq!(values.len(), expected.len(), "{name}");
                values
                    .iter()
                    .zip(&expected)
                    .map(|(&a, &b)| f32::from(a.abs_diff(b)))
                    .fold(0.0_f32, f32::max)
            }
            (_, dtype) => panic!("{name}: the worker made another type than {dtype}"),
        };
        report.push(format!(
            "{name:<40} max |diff| {worst:.3e} (allowed {tolerance})"
        ));
        assert!(
            worst <= tolerance,
            "{name}: largest difference {worst} over {tolerance} ({})",
            case["tolerance_why"]
        );
    }
    println!("{}", report.join("\n"));
}
