//! The preprocessing kinds beyond the project's own zoo, through the real worker binary:
//! - text with any Hugging Face `tokenizer.json`: BPE, Unigram and WordPiece ids equal
//!   Python `tokenizers`' ids, and a model that also takes `token_type_ids` (fed zeros)
//!   answers what Python ONNX Runtime computed;
//! - `kind = "tensor"`: a model fed its own tensors, in JSON and in binary, answers what
//!   the same model answers in process.
//!
//! Fixtures: `worker/tests/data/text/make_reference.py`; each test writes a one-model zoo
//! into a temporary folder, as a user would.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

mod common;

use std::path::{Path, PathBuf};

use cocktail_common::Zoo;
use cocktail_common::oip::tensor::{self, f32_raw};
use cocktail_common::oip::{InferRequest, RequestInput, binary};
use cocktail_common::zoo::sha256_file;
use cocktail_worker::preprocess::{Preprocessor, TextPreprocessor};
use cocktail_worker::{Backend, OnnxBackend};
use common::WorkerProcess;
use serde_json::{Value, json};

fn text_data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/text")
}

fn reference() -> Value {
    serde_json::from_str(&std::fs::read_to_string(text_data().join("reference.json")).unwrap())
        .unwrap()
}

/// A folder with `files` copied in and a `zoo.toml` serving one model of task `t`.
fn one_model_zoo(tag: &str, files: &[(&Path, &str)], model: &str, classes: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cocktail-kinds-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in files {
        std::fs::copy(from, dir.join(to)).unwrap();
    }
    let onnx = files[0].1;
    let labels: Vec<String> = (0..classes).map(|c| format!("\"c{c}\"")).collect();
    let manifest = format!(
        r#"schema = 1
[tasks.t]
labels = [{labels}]
test_set = {{ format = "tsv", path = "unused.tsv" }}
predictions = "unused.tsv.gz"

[[models]]
name = "m"
task = "t"
file = "{onnx}"
sha256 = "{sha}"
arch = "test"
description = "test"
params = 1
train_examples = 1
epochs = 1
accuracy = 0.5
class_accuracy = [{class_accuracy}]
output = "logits"
{model}
"#,
        labels = labels.join(", "),
        sha = sha256_file(&dir.join(onnx)).unwrap(),
        class_accuracy = vec!["0.5"; classes].join(", "),
    );
    std::fs::write(dir.join("zoo.toml"), manifest).unwrap();
    dir.join("zoo.toml")
}

#[test]
fn bpe_unigram_and_wordpiece_ids_equal_python_tokenizers() {
    let reference = reference();
    let samples = reference["samples"].as_array().unwrap();
    let files = [
        ("bpe", text_data().join("bpe.json")),
        ("unigram", text_data().join("unigram.json")),
        (
            "wordpiece",
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/sentiment/tokenizer.json"),
        ),
    ];
    for (name, path) in files {
        let tokenizer = TextPreprocessor::load(&path, 512).unwrap();
        for (sample, expected) in samples
            .iter()
            .zip(reference["ids"][name].as_array().unwrap())
        {
            let expected: Vec<i64> = expected
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            let ids = tokenizer.encode(sample.as_str().unwrap()).unwrap();
            assert_eq!(ids, expected, "{name}: {sample}");
        }
    }
    let err = TextPreprocessor::load(&text_data().join("reference.json"), 8)
        .unwrap_err()
        .to_string();
    assert!(err.contains("reference.json"), "{err}");
}

#[tokio::test]
async fn text_model_with_token_type_ids_answers_as_python() {
    let reference = reference();
    let manifest = one_model_zoo(
        "text",
        &[
            (&text_data().join("tiny_text.onnx"), "tiny_text.onnx"),
            (&text_data().join("bpe.json"), "bpe.json"),
        ],
        r#"inputs = [{ name = "input_ids", dtype = "int64", shape = [-1, -1] }, { name = "attention_mask", dtype = "int64", shape = [-1, -1] }, { name = "token_type_ids", dtype = "int64", shape = [-1, -1] }]
preprocess = { kind = "text", tokenizer = "bpe.json", max_tokens = 64 }"#,
        2,
    );
    let worker = WorkerProcess::start("m", &["--zoo", manifest.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    let samples: Vec<&str> = reference["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let body = json!({"inputs": [{"name": "text", "shape": [samples.len()], "datatype": "BYTES", "data": samples}]});
    let response = client
        .post(worker.infer_url("m"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let probabilities = answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "probabilities")
        .unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect::<Vec<_>>();
    for (i, logits) in reference["logits"].as_array().unwrap().iter().enumerate() {
        let (a, b) = (logits[0].as_f64().unwrap(), logits[1].as_f64().unwrap());
        let p0 = 1.0 / (1.0 + (b - a).exp());
        assert!(
            (probabilities[2 * i] - p0).abs() < 1e-5,
            "sample {i}: served {} for class 0, Python's logits give {p0}",
            probabilities[2 * i]
        );
    }
}

#[tokio::test]
async fn tensor_model_takes_its_own_tensors_in_json_and_binary() {
    let zoo = common::zoo();
    let image_model = zoo.model("linear").unwrap();
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(zoo.resolve("samples/preprocessed.json")).unwrap(),
    )
    .unwrap();
    let pixels: Vec<f32> = fixture["fashion"][0]["tensor"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    // What the model answers in process on the same tensor.
    let mut backend = OnnxBackend::load(&zoo, image_model, 1, None).unwrap();
    let batch = cocktail_worker::Batch::Images(
        ndarray::Array4::from_shape_vec((1, 1, 28, 28), pixels.clone()).unwrap(),
    );
    let expected = backend.infer(&batch).unwrap().0.into_raw_vec_and_offset().0;

    let manifest = one_model_zoo(
        "tensor",
        &[(&zoo.resolve(&image_model.file), "linear.onnx")],
        r#"inputs = [{ name = "image", dtype = "float32", shape = [-1, 1, 28, 28] }]
preprocess = { kind = "tensor" }"#,
        10,
    );
    let tensor_zoo = Zoo::load(&manifest).unwrap();
    assert!(matches!(
        Preprocessor::for_model(&tensor_zoo, tensor_zoo.model("m").unwrap()).unwrap(),
        Preprocessor::Tensor(_)
    ));
    let worker = WorkerProcess::start("m", &["--zoo", manifest.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    let url = worker.infer_url("m");

    let metadata: Value = client
        .get(format!("{}/v2/models/m", worker.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        metadata["inputs"],
        json!([{"name": "image", "datatype": "FP32", "shape": [-1, 1, 28, 28]}])
    );

    let body = json!({"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": pixels}]});
    let answer: Value = client
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let served: Vec<f32> = answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "probabilities")
        .unwrap()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(served, expected, "JSON tensor");

    let request = InferRequest {
        inputs: vec![RequestInput {
            name: "image".into(),
            shape: vec![2, 1, 28, 28],
            datatype: "FP32".into(),
            data: Value::Null,
            parameters: None,
            raw: Some(f32_raw(&[pixels.clone(), pixels.clone()].concat())),
        }],
        ..InferRequest::default()
    };
    let (body, header) = binary::encode_request(request).unwrap();
    let response = client
        .post(&url)
        .header(binary::HEADER_LENGTH, header.unwrap())
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer = binary::decode_response(response.bytes().await.unwrap(), None).unwrap();
    let probabilities = answer
        .outputs
        .iter()
        .find(|o| o.name == "probabilities")
        .unwrap();
    let served = tensor::f32s(probabilities, 20).unwrap();
    assert_eq!(&served[..10], expected.as_slice(), "binary tensor");
    assert_eq!(
        &served[10..],
        expected.as_slice(),
        "binary tensor, second item"
    );

    for (body, needles) in [
        (
            json!({"inputs": [{"name": "image", "shape": [1, 1, 27, 28], "datatype": "FP32", "data": vec![0.0; 756]}]}),
            &["`shape`", "[n, 1, 28, 28]"][..],
        ),
        (
            json!({"inputs": [{"name": "pixels", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": vec![0.0; 784]}]}),
            &["`inputs`", "pixels"][..],
        ),
        (
            json!({"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "INT64", "data": vec![0; 784]}]}),
            &["`datatype`", "FP32"][..],
        ),
    ] {
        let response = client.post(&url).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 422);
        let error: Value = response.json().await.unwrap();
        let message = error["error"].as_str().unwrap();
        for needle in needles {
            assert!(message.contains(needle), "`{message}` lacks {needle}");
        }
    }
}

#[test]
fn a_model_with_a_fixed_batch_axis_answers_any_batch() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fixed_batch");
    let manifest = one_model_zoo(
        "fixed-batch",
        &[(&data.join("fixed_batch.onnx"), "fixed_batch.onnx")],
        r#"inputs = [{ name = "x", dtype = "float32", shape = [1, 4] }]
preprocess = { kind = "tensor" }"#,
        3,
    );
    let zoo = Zoo::load(&manifest).unwrap();
    let mut backend = OnnxBackend::load(&zoo, zoo.model("m").unwrap(), 1, None).unwrap();
    // Three items through a graph that takes one at a time: logits[j] = sum_i x[i] * (i - j).
    let items: [[f32; 4]; 3] = [
        [1.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 2.0, 0.0],
        [0.5, 0.0, 0.0, 3.0],
    ];
    let batch = cocktail_worker::Batch::Tensors {
        items: 3,
        inputs: vec![(vec![3, 4], tensor::Typed::F32(items.concat()))],
    };
    let logits = backend.logits(&batch).unwrap();
    for (item, x) in items.iter().enumerate() {
        for j in 0..3 {
            let want: f32 = x
                .iter()
                .enumerate()
                .map(|(i, v)| v * (i as f32 - j as f32))
                .sum();
            assert_eq!(logits[[item, j]], want, "item {item}, class {j}");
        }
    }
}
