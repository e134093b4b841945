//! Black-box tests of `cocktail-worker`: the real binary, real models, real ONNX Runtime.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

mod common;

use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use cocktail_common::oip::tensor::{self, bytes_raw, f32_raw};
use cocktail_common::oip::{InferRequest, RequestInput, RequestedOutput, binary};
use cocktail_common::testset::GreyImage;
use cocktail_common::{Input, Predictions, TestSet};
use common::{WorkerProcess, by_latency, largest, zoo};
use serde_json::{Value, json};

const SAMPLE_STEP: usize = 50;

fn png(image: &GreyImage) -> Vec<u8> {
    let buffer =
        image::GrayImage::from_raw(image.width, image.height, image.pixels.clone()).unwrap();
    let mut bytes = Vec::new();
    buffer
        .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
        .unwrap();
    bytes
}

fn classes(response: &Value) -> Vec<u16> {
    let outputs = response["outputs"].as_array().unwrap();
    let class = outputs.iter().find(|o| o["name"] == "class").unwrap();
    class["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u16)
        .collect()
}

/// One item sent with the binary tensor extension, its class asked for in binary.
async fn binary_class(
    client: &reqwest::Client,
    url: &str,
    name: &str,
    shape: Vec<i64>,
    raw: bytes::Bytes,
) -> u16 {
    let datatype = if name == "pixels" { "FP32" } else { "BYTES" };
    let request = InferRequest {
        id: None,
        inputs: vec![RequestInput {
            name: name.into(),
            shape,
            datatype: datatype.into(),
            data: Value::Null,
            parameters: None,
            raw: Some(raw),
        }],
        parameters: None,
        outputs: Some(vec![RequestedOutput {
            name: "class".into(),
            parameters: json!({"binary_data": true}).as_object().cloned(),
        }]),
    };
    let (body, header) = binary::encode_request(request).unwrap();
    let response = client
        .post(url)
        .header(binary::HEADER_LENGTH, header.unwrap())
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let header: usize = response.headers()[binary::HEADER_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let answer = binary::decode_response(response.bytes().await.unwrap(), Some(header)).unwrap();
    assert_eq!(answer.outputs.len(), 1, "only the output asked for");
    tensor::i64s(&answer.outputs[0], 1).unwrap()[0] as u16
}

async fn post_json(client: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let response = client.post(url).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn fashion_answers_match_recorded_predictions_in_every_encoding() {
    let zoo = zoo();
    let models = by_latency(&zoo, "fashion");
    let model = models[models.len() / 2];
    let test_set = TestSet::load(&zoo, "fashion").unwrap();
    let recorded = Predictions::load(
        &zoo.resolve(zoo.task("fashion").unwrap().predictions.as_deref().unwrap()),
    )
    .unwrap();
    let column = recorded.model_index(&model.name).unwrap();
    let worker = WorkerProcess::start(&model.name, &[]).await;
    let client = reqwest::Client::new();
    let url = worker.infer_url(&model.name);

    let sample: Vec<usize> = (0..test_set.len()).step_by(SAMPLE_STEP).collect();
    let mut agree = 0;
    for &i in &sample {
        let Input::Image(image) = &test_set.items[i] else {
            panic!("fashion holds images")
        };
        let bytes = png(image);
        // Base64 PNG in JSON.
        let body = json!({"id": format!("item-{i}"), "inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": [BASE64.encode(&bytes)]}]});
        let (status, answer) = post_json(&client, &url, &body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["id"], format!("item-{i}"));
        let from_json = classes(&answer)[0];
        // The same PNG as a raw body.
        let raw = client
            .post(&url)
            .header("content-type", "application/octet-stream")
            .body(bytes.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(raw.status(), 200);
        let from_raw = classes(&raw.json().await.unwrap())[0];
        // The normalised FP32 tensor, as the training pipeline builds it.
        let tensor: Vec<f32> = image
            .pixels
            .iter()
            .map(|&p| (f32::from(p) / 255.0 - 0.2860) / 0.3530)
            .collect();
        let body = json!({"inputs": [{"name": "pixels", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": tensor}]});
        let (status, answer) = post_json(&client, &url, &body).await;
        assert_eq!(status, 200, "{answer}");
        let from_tensor = classes(&answer)[0];
        // Triton's binary tensor extension (tritonclient's default), for both forms.
        let from_binary =
            binary_class(&client, &url, "image", vec![1], bytes_raw([&bytes[..]])).await;
        let from_binary_pixels = binary_class(
            &client,
            &url,
            "pixels",
            vec![1, 1, 28, 28],
            f32_raw(&tensor),
        )
        .await;
        assert_eq!(from_json, from_raw);
        assert_eq!(from_json, from_tensor);
        assert_eq!(from_json, from_binary);
        assert_eq!(from_json, from_binary_pixels);
        agree += usize::from(from_json == recorded.classes[column][i]);
    }
    assert!(
        agree * 1000 >= sample.len() * 995,
        "{agree}/{} agree with the recorded predictions",
        sample.len()
    );

    // Several items in one request come back in order.
    let items: Vec<String> = sample[..8]
        .iter()
        .map(|&i| match &test_set.items[i] {
            Input::Image(image) => BASE64.encode(png(image)),
            Input::Text(_) => unreachable!(),
        })
        .collect();
    let body =
        json!({"inputs": [{"name": "image", "shape": [8], "datatype": "BYTES", "data": items}]});
    let (status, answer) = post_json(&client, &url, &body).await;
    assert_eq!(status, 200);
    let expected: Vec<u16> = sample[..8]
        .iter()
        .map(|&i| recorded.classes[column][i])
        .collect();
    assert_eq!(classes(&answer), expected);
    let probabilities = answer["outputs"][2]["data"].as_array().unwrap();
    assert_eq!(probabilities.len(), 8 * 10);
}

#[tokio::test]
async fn sentiment_answers_match_recorded_predictions() {
    let zoo = zoo();
    let model = by_latency(&zoo, "sentiment")[0];
    let test_set = TestSet::load(&zoo, "sentiment").unwrap();
    let recorded = Predictions::load(
        &zoo.resolve(
            zoo.task("sentiment")
                .unwrap()
                .predictions
                .as_deref()
                .unwrap(),
        ),
    )
    .unwrap();
    let column = recorded.model_index(&model.name).unwrap();
    let worker = WorkerProcess::start(&model.name, &[]).await;
    let client = reqwest::Client::new();
    let url = worker.infer_url(&model.name);
    let sample: Vec<usize> = (0..test_set.len()).step_by(SAMPLE_STEP / 2).collect();
    let mut agree = 0;
    for chunk in sample.chunks(16) {
        let texts: Vec<&str> = chunk
            .iter()
            .map(|&i| match &test_set.items[i] {
                Input::Text(t) => t.as_str(),
                Input::Image(_) => unreachable!(),
            })
            .collect();
        let body = json!({"inputs": [{"name": "text", "shape": [texts.len()], "datatype": "BYTES", "data": texts}]});
        let (status, answer) = post_json(&client, &url, &body).await;
        assert_eq!(status, 200, "{answer}");
        for (&i, got) in chunk.iter().zip(classes(&answer)) {
            agree += usize::from(got == recorded.classes[column][i]);
        }
    }
    assert!(
        agree * 1000 >= sample.len() * 995,
        "{agree}/{} agree",
        sample.len()
    );
}

#[tokio::test]
async fn health_metadata_and_metrics() {
    let zoo = zoo();
    let model = by_latency(&zoo, "fashion")[0];
    let worker = WorkerProcess::start(&model.name, &[]).await;
    let client = reqwest::Client::new();
    for path in ["/v2", "/v2/health/live", "/v2/health/ready"] {
        assert_eq!(
            client
                .get(format!("{}{path}", worker.url))
                .send()
                .await
                .unwrap()
                .status(),
            200,
            "{path}"
        );
    }
    let ready = client
        .get(format!("{}/v2/models/{}/ready", worker.url, model.name))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let meta: Value = client
        .get(format!("{}/v2/models/{}", worker.url, model.name))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["name"], model.name.as_str());
    assert_eq!(meta["platform"], "onnxruntime");
    let body = json!({"inputs": [{"name": "pixels", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": vec![0.0; 784]}]});
    assert_eq!(
        post_json(&client, &worker.infer_url(&model.name), &body)
            .await
            .0,
        200
    );
    let metrics = worker.metrics(&client).await;
    for name in [
        "cocktail_worker_requests_total",
        "cocktail_worker_batch_size",
        "cocktail_worker_queue_depth",
        "cocktail_worker_inference_duration_seconds",
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }
    assert!(metrics.contains(&format!("model=\"{}\"", model.name)));
}

/// Every client mistake gets a 4xx whose message names the field (and the limit).
#[tokio::test]
async fn bad_inputs_get_clear_4xx() {
    let zoo = zoo();
    let image_model = by_latency(&zoo, "fashion")[0].name.clone();
    let text_model = by_latency(&zoo, "sentiment")[0].name.clone();
    let images = WorkerProcess::start(&image_model, &[]).await;
    let texts = WorkerProcess::start(&text_model, &[]).await;
    let client = reqwest::Client::new();
    let image_url = images.infer_url(&image_model);
    let text_url = texts.infer_url(&text_model);

    let bytes_input = |data: Value| json!({"inputs": [{"name": "image", "shape": [1], "datatype": "BYTES", "data": data}]});
    let huge_png = {
        let buffer = image::GrayImage::new(4100, 10);
        let mut bytes = Vec::new();
        buffer
            .write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png)
            .unwrap();
        bytes
    };
    let cases: Vec<(&str, &String, Value, u16, &[&str])> = vec![
        (
            "undecodable image",
            &image_url,
            bytes_input(json!([BASE64.encode(b"not an image at all")])),
            422,
            &["`image`"],
        ),
        (
            "not base64",
            &image_url,
            bytes_input(json!(["%%%"])),
            422,
            &["`image`", "base64"],
        ),
        (
            "image over 4096x4096",
            &image_url,
            bytes_input(json!([BASE64.encode(&huge_png)])),
            422,
            &["`image`", "4096x4096"],
        ),
        (
            "wrong tensor shape",
            &image_url,
            json!({"inputs": [{"name": "pixels", "shape": [1, 1, 27, 28], "datatype": "FP32", "data": vec![0.0; 756]}]}),
            422,
            &["`shape`", "[n, 1, 28, 28]"],
        ),
        (
            "data disagrees with shape",
            &image_url,
            json!({"inputs": [{"name": "pixels", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": vec![0.0; 10]}]}),
            422,
            &["`data`", "784"],
        ),
        (
            "wrong dtype",
            &image_url,
            json!({"inputs": [{"name": "image", "shape": [1, 1, 28, 28], "datatype": "INT8", "data": vec![0; 784]}]}),
            422,
            &["`inputs`", "INT8"],
        ),
        (
            "too many items",
            &image_url,
            json!({"inputs": [{"name": "image", "shape": [65], "datatype": "BYTES", "data": vec!["x"; 65]}]}),
            422,
            &["`shape`", "64"],
        ),
        (
            "no inputs",
            &image_url,
            json!({"inputs": []}),
            422,
            &["`inputs`"],
        ),
        (
            "empty text",
            &text_url,
            json!({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["   "]}]}),
            422,
            &["`text`", "empty"],
        ),
        (
            "text too long",
            &text_url,
            json!({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a".repeat(10_001)]}]}),
            422,
            &["`text`", "10000"],
        ),
        (
            "token ids out of vocabulary",
            &text_url,
            json!({"inputs": [
            {"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [101, 99_999_999]},
            {"name": "attention_mask", "shape": [1, 2], "datatype": "INT64", "data": [1, 1]}]}),
            422,
            &["`input_ids`"],
        ),
        (
            "mask shape differs",
            &text_url,
            json!({"inputs": [
            {"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [101, 102]},
            {"name": "attention_mask", "shape": [1, 3], "datatype": "INT64", "data": [1, 1, 1]}]}),
            422,
            &["`shape`"],
        ),
    ];
    for (what, url, body, status, needles) in cases {
        let (got, answer) = post_json(&client, url, &body).await;
        assert_eq!(got, status, "{what}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        for needle in needles {
            assert!(
                message.contains(needle),
                "{what}: `{message}` lacks {needle}"
            );
        }
    }

    let malformed = client
        .post(&image_url)
        .header("content-type", "application/json")
        .body("{\"inputs\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    assert!(malformed.text().await.unwrap().contains("malformed JSON"));

    let too_big = client
        .post(&image_url)
        .header("content-type", "application/octet-stream")
        .body(vec![0_u8; 10 * 1024 * 1024 + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), 413);
    assert!(too_big.text().await.unwrap().contains("10485760 bytes"));

    let raw_garbage = client
        .post(&image_url)
        .header("content-type", "image/png")
        .body("garbage")
        .send()
        .await
        .unwrap();
    assert_eq!(raw_garbage.status(), 422);

    let unknown = client
        .post(images.infer_url("no_such_model"))
        .json(&bytes_input(json!(["x"])))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.text().await.unwrap().contains("no_such_model"));

    // The worker is still healthy after all that.
    let ok = json!({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["a fine film"]}]});
    assert_eq!(post_json(&client, &text_url, &ok).await.0, 200);
}

/// Beyond its slots and queue the worker answers 429 with Retry-After at once.
#[tokio::test]
async fn overload_gets_429_with_retry_after() {
    let zoo = zoo();
    let slowest = largest(&zoo, "sentiment");
    let worker =
        WorkerProcess::start(&slowest.name, &["--max-batch", "1", "--queue-items", "1"]).await;
    let client = reqwest::Client::new();
    let url = worker.infer_url(&slowest.name);
    let body = json!({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["an overlong review of a film that keeps going and going"]}]});
    let requests = (0..24).map(|_| {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let r = client.post(&url).json(&body).send().await.unwrap();
            (
                r.status().as_u16(),
                r.headers().get("retry-after").is_some(),
                started.elapsed(),
            )
        })
    });
    let mut ok = 0;
    let mut refused = 0;
    for handle in requests.collect::<Vec<_>>() {
        let (status, retry_after, elapsed) = handle.await.unwrap();
        match status {
            200 => ok += 1,
            429 => {
                assert!(retry_after, "429 carries Retry-After");
                assert!(
                    elapsed < Duration::from_secs(5),
                    "a 429 is immediate, took {elapsed:?}"
                );
                refused += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(ok >= 1 && refused >= 1, "ok {ok}, refused {refused}");
}

/// SIGTERM drains: requests already accepted are answered, then the process exits cleanly.
#[tokio::test]
async fn sigterm_drains_without_losing_accepted_requests() {
    let zoo = zoo();
    let slowest = largest(&zoo, "sentiment");
    let mut worker = WorkerProcess::start(&slowest.name, &["--max-batch", "1"]).await;
    let client = reqwest::Client::new();
    let url = worker.infer_url(&slowest.name);
    // Long sentences, queued one per batch: the worker is busy well past the signal even
    // though it ran its warm-up inference before serving.
    let sentence =
        "a film worth seeing twice, for its actors and its quiet, patient story; ".repeat(6);
    let body = json!({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": [sentence]}]});
    const REQUESTS: usize = 8;
    let answered = Arc::new(AtomicUsize::new(0));
    let in_flight: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.clone(), body.clone());
            let answered = Arc::clone(&answered);
            tokio::spawn(async move {
                let result = client
                    .post(&url)
                    .json(&body)
                    .send()
                    .await
                    .map(|r| r.status().as_u16());
                answered.fetch_add(1, Ordering::SeqCst);
                (result, std::time::Instant::now())
            })
        })
        .collect();
    // Let the requests reach the worker and queue behind each other: the signal goes once
    // every request is accepted (holding a slot or already answered) while at least two
    // still hold theirs, or after 5 s. A fixed 30 ms wait was too short on a busy machine
    // (a request still on its way got the draining 503), and waiting for all of them to
    // hold a slot at once missed, in a CI run beside another test, the moment they did:
    // the first were answered before the last arrived, and all before the signal.
    let waited = std::time::Instant::now();
    let mut seen = (0.0, 0);
    while waited.elapsed() < Duration::from_secs(5) {
        let held = worker
            .metrics(&client)
            .await
            .lines()
            .find(|l| l.starts_with("cocktail_worker_in_flight_items"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        seen = (held, answered.load(Ordering::SeqCst));
        if held >= 2.0 && held + seen.1 as f64 >= REQUESTS as f64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let signalled = std::time::Instant::now();
    cocktail_process::signal(&worker.child, cocktail_process::Signal::SIGTERM).unwrap();
    let mut answered_after_signal = 0;
    for handle in in_flight {
        match handle.await.unwrap() {
            (Ok(status), at) => {
                assert_eq!(status, 200, "an accepted request was answered");
                answered_after_signal += usize::from(at > signalled);
            }
            // Not yet accepted when the listener closed: refused, never lost mid-way.
            (Err(e), _) => assert!(e.is_connect(), "{e:?}"),
        }
    }
    assert!(
        answered_after_signal >= 1,
        "some requests were still in flight at SIGTERM and were answered \
         (at the signal: {} held a slot, {} were answered, of {REQUESTS})",
        seen.0,
        seen.1,
    );
    let status = tokio::time::timeout(Duration::from_secs(30), worker.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status}");
}

/// Without ONNX Runtime the worker says how to get it, in one line, and exits 1.
#[test]
fn missing_onnx_runtime_is_one_line() {
    let zoo = format!("{}/../models/zoo.toml", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cocktail-worker"))
        .args([
            "--zoo",
            &zoo,
            "--model",
            "linear",
            "--ort-lib",
            "/nonexistent/libonnxruntime.so",
        ])
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("ONNX Runtime library not found") && stderr.contains("scripts/setup.sh"),
        "{stderr}"
    );
}
