//! Rust preprocessing makes the same tensors as the training pipelines on the README
//! samples. `models/train/samples.py` writes the fixture with the training scripts' own
//! code (`fashion.load_split`, `sentiment.tokenize`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

mod common;

use cocktail_worker::Preprocessor;
use cocktail_worker::preprocess::{PixelValues, decode_image};
use serde_json::Value;

#[test]
fn rust_preprocessing_equals_the_training_pipeline() {
    let zoo = common::zoo();
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(zoo.resolve("samples/preprocessed.json")).unwrap(),
    )
    .unwrap();

    let image_model = zoo.models_for("fashion").next().unwrap();
    let Preprocessor::Image(images) = Preprocessor::for_model(&zoo, image_model).unwrap() else {
        panic!("fashion models take images")
    };
    let samples = fixture["fashion"].as_array().unwrap();
    assert_eq!(samples.len(), 10, "one sample per class");
    for sample in samples {
        let png = std::fs::read(zoo.resolve(sample["png"].as_str().unwrap())).unwrap();
        let decoded = decode_image(&png).unwrap();
        let PixelValues::F32(tensor) = images.item(&decoded) else {
            panic!("fashion models take float32")
        };
        let expected: Vec<f32> = sample["tensor"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(tensor.len(), expected.len());
        // Bit for bit: the manifest's block computes (p / 255 - mean) / std in float32,
        // as training's numpy did.
        let differing = tensor
            .iter()
            .zip(&expected)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            differing, 0,
            "{}: values differ from training",
            sample["png"]
        );
    }

    let text_model = zoo.models_for("sentiment").next().unwrap();
    let Preprocessor::Text(text) = Preprocessor::for_model(&zoo, text_model).unwrap() else {
        panic!("sentiment models take text")
    };
    let samples = fixture["sentiment"].as_array().unwrap();
    assert!(!samples.is_empty());
    for sample in samples {
        let ids = text.encode(sample["text"].as_str().unwrap()).unwrap();
        let expected: Vec<i64> = sample["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(ids, expected, "{}", sample["text"]);
    }
}
