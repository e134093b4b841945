//! Bad inputs to the master: each gets a 4xx whose message names the field.

use base64::Engine as _;
use cocktail_common::oip::{self, tensor::bytes_raw};
use cocktail_tests::cluster::{Cluster, image_request};
use serde_json::{Value, json};

use super::{fashion_images, outputs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_a_4xx_naming_the_field() {
    let cluster = Cluster::start(&[], &["mlp_med", "boe"]).await;
    let (images, _) = fashion_images(1);
    let ok = json!({ "latency_ms": 5, "accuracy": 0.5 });
    let image = |parameters: Value| image_request(&images, parameters);
    let text = |t: &str| {
        json!({ "inputs": [{ "name": "text", "shape": [1], "datatype": "BYTES", "data": [t] }],
                                "parameters": { "latency_ms": 5, "accuracy": 0.5 } })
    };
    let cases: Vec<(&str, &str, Value, u16, &str)> = vec![
        (
            "missing latency",
            "/v2/models/fashion/infer",
            image(json!({ "accuracy": 0.5 })),
            422,
            "latency_ms",
        ),
        (
            "negative latency",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": -1, "accuracy": 0.5 })),
            422,
            "latency_ms",
        ),
        (
            "no model fast enough",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": 0.000_1, "accuracy": 0.5 })),
            422,
            "latency_ms",
        ),
        (
            "accuracy over 1",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": 5, "accuracy": 1.5 })),
            422,
            "accuracy",
        ),
        (
            "accuracy of 0",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": 5, "accuracy": 0 })),
            422,
            "`accuracy`: must be in (0, 1]",
        ),
        (
            "bad objective",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": 5, "accuracy": 0.5, "objective": "cheap" })),
            422,
            "objective",
        ),
        (
            "label out of range",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": 5, "accuracy": 0.5, "label": 10 })),
            422,
            "label",
        ),
        (
            "bad scheme",
            "/v2/models/fashion/infer",
            image(json!({ "latency_ms": 5, "accuracy": 0.5, "scheme": "vibes" })),
            422,
            "scheme",
        ),
        (
            "unknown task",
            "/v2/models/cars/infer",
            image(ok.clone()),
            404,
            "cars",
        ),
        (
            "no inputs",
            "/v2/models/fashion/infer",
            json!({ "inputs": [], "parameters": ok }),
            422,
            "inputs",
        ),
        (
            "text for images",
            "/v2/models/fashion/infer",
            text("hello"),
            422,
            "inputs",
        ),
        (
            "shape and data disagree",
            "/v2/models/fashion/infer",
            json!({ "inputs": [{ "name": "image", "shape": [2], "datatype": "BYTES", "data": images }], "parameters": ok }),
            422,
            "data",
        ),
        (
            "too many items",
            "/v2/models/fashion/infer",
            json!({ "inputs": [{ "name": "image", "shape": [65], "datatype": "BYTES", "data": vec![&images[0]; 65] }], "parameters": ok }),
            422,
            "shape",
        ),
        (
            "undecodable image",
            "/v2/models/fashion/infer",
            json!({ "inputs": [{ "name": "image", "shape": [1], "datatype": "BYTES", "data": ["bm90IGFuIGltYWdl"] }], "parameters": ok }),
            422,
            "image",
        ),
        (
            "wrong tensor shape",
            "/v2/models/fashion/infer",
            json!({ "inputs": [{ "name": "pixels", "shape": [1, 1, 2, 2], "datatype": "FP32", "data": [0.0, 0.0, 0.0, 0.0] }], "parameters": ok }),
            422,
            "shape",
        ),
        (
            "empty text",
            "/v2/models/sentiment/infer",
            text("  "),
            422,
            "text",
        ),
        (
            "text too long",
            "/v2/models/sentiment/infer",
            text(&"a".repeat(10_001)),
            422,
            "10000",
        ),
        (
            "classify without task",
            "/v1/classify",
            json!({ "text": "hi", "latency_ms": 5, "accuracy": 0.5 }),
            422,
            "task",
        ),
        (
            "classify without item",
            "/v1/classify",
            json!({ "task": "sentiment", "latency_ms": 5, "accuracy": 0.5 }),
            422,
            "text",
        ),
        (
            "feedback for unknown id",
            "/v1/feedback",
            json!({ "id": "nope", "label": 1 }),
            404,
            "nope",
        ),
        (
            "feedback without id",
            "/v1/feedback",
            json!({ "label": 1 }),
            400,
            "id",
        ),
        (
            "register unknown model",
            "/v1/workers/register",
            json!({ "id": "x", "model": "gpt", "url": "http://127.0.0.1:1", "packing_factor": 1, "queue_items": 1, "threads": 1 }),
            422,
            "model",
        ),
        (
            "heartbeat from a stranger",
            "/v1/workers/heartbeat",
            json!({ "id": "x", "in_flight": 0, "draining": false }),
            404,
            "x",
        ),
    ];
    for (name, path, body, status, mentions) in cases {
        let (got, answer) = cluster.post(path, &body).await;
        assert_eq!(got, status, "{name}: {answer}");
        let message = answer["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no error in {answer}"));
        assert!(
            message.contains(mentions),
            "{name}: `{message}` should mention `{mentions}`"
        );
        assert!(answer["error_type"].is_string(), "{name}: {answer}");
    }
    // Malformed JSON and an oversized body.
    let raw = |body: Vec<u8>| {
        cluster
            .client
            .post(cluster.url("/v2/models/fashion/infer"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let malformed = raw(b"{\"inputs\": [".to_vec()).await.unwrap();
    assert_eq!(malformed.status().as_u16(), 400);
    let huge = raw(vec![b' '; 11 * 1024 * 1024]).await.unwrap();
    assert_eq!(huge.status().as_u16(), 413);
    let body: Value = huge.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("10485760"),
        "{body}"
    );
    // The binary tensor extension: sizes that do not add up, outputs it lacks.
    let png = base64::engine::general_purpose::STANDARD
        .decode(images[0].as_str())
        .unwrap();
    let binary = |header: &str, tail: &[u8], length: Option<usize>| {
        let mut body = header.as_bytes().to_vec();
        body.extend_from_slice(tail);
        cluster
            .client
            .post(cluster.url("/v2/models/fashion/infer"))
            .header("content-type", "application/octet-stream")
            .header(
                "Inference-Header-Content-Length",
                length.unwrap_or(header.len()).to_string(),
            )
            .body(body)
            .send()
    };
    let framed = bytes_raw([&png[..]]);
    let header = |size: usize, name: &str, datatype: &str, shape: &str, outputs: &str| {
        format!(
            r#"{{"inputs":[{{"name":"{name}","shape":{shape},"datatype":"{datatype}","parameters":{{"binary_data_size":{size}}}}}],"parameters":{{"latency_ms":5,"accuracy":0.5}}{outputs}}}"#
        )
    };
    // (case, JSON header, binary tail, header length if not the JSON's, what the error names)
    type Case<'a> = (&'a str, String, Vec<u8>, Option<usize>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "header length beyond the body",
            header(framed.len(), "image", "BYTES", "[1]", ""),
            framed.to_vec(),
            Some(1 << 20),
            "Inference-Header-Content-Length",
        ),
        (
            "binary_data_size beyond the body",
            header(framed.len() + 1, "image", "BYTES", "[1]", ""),
            framed.to_vec(),
            None,
            "binary_data_size",
        ),
        (
            "FP32 bytes that are not the shape's",
            header(12, "pixels", "FP32", "[1,1,28,28]", ""),
            vec![0; 12],
            None,
            "784",
        ),
        (
            "an output the task lacks",
            header(
                framed.len(),
                "image",
                "BYTES",
                "[1]",
                r#","outputs":[{"name":"probabilities"}]"#,
            ),
            framed.to_vec(),
            None,
            "outputs",
        ),
    ];
    for (name, header, tail, length, mentions) in cases {
        let response = binary(&header, &tail, length).await.unwrap();
        assert_eq!(response.status().as_u16(), 422, "{name}");
        let answer: Value = response.json().await.unwrap();
        assert!(
            answer["error"].as_str().unwrap().contains(mentions),
            "{name}: {answer} should mention `{mentions}`"
        );
    }
    // The master still serves, JSON and binary alike, with the same answer.
    let (status, json_answer) = cluster.post("/v2/models/fashion/infer", &image(ok)).await;
    assert_eq!(status, 200);
    let asked = header(
        framed.len(),
        "image",
        "BYTES",
        "[1]",
        r#","outputs":[{"name":"label","parameters":{"binary_data":true}}]"#,
    );
    let response = binary(&asked, &framed, None).await.unwrap();
    assert_eq!(response.status(), 200);
    let length: usize = response.headers()["inference-header-content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let answer =
        oip::binary::decode_response(response.bytes().await.unwrap(), Some(length)).unwrap();
    assert_eq!(answer.outputs.len(), 1, "only the output asked for");
    let labels = oip::tensor::byte_items(&answer.outputs[0], 1).unwrap();
    let oip::tensor::ByteItem::Raw(label) = labels[0] else {
        panic!("a binary label")
    };
    assert_eq!(
        std::str::from_utf8(label).unwrap(),
        outputs(&json_answer, "label")[0].as_str().unwrap()
    );
    // A constraint nothing could serve ("no model fast enough") leaves no ensemble behind:
    // only the constraints that were served are listed.
    let ensembles = cluster.get("/v1/ensembles").await;
    let listed = ensembles["ensembles"].as_array().unwrap();
    assert!(!listed.is_empty(), "{ensembles}");
    for entry in listed {
        assert!(
            !entry["members"].as_array().unwrap().is_empty(),
            "an empty ensemble is listed: {ensembles}"
        );
    }
}
