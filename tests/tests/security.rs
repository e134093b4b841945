//! Attacks on a real master and real workers (docs/security.md): rogue and unchecked
//! registrations, control calls and worker calls without the cluster secret, the admin
//! API without its token, a client over its rate, slow clients, and a whole request over
//! TLS with a throwaway CA. Each gets its status, and the cluster keeps serving its real
//! clients as before.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use cocktail_tests::cluster::{
    ADMIN_TOKEN, CLUSTER_SECRET, Cluster, Process, admin_client, bearer_client, eventually,
    free_port, png_base64, serving_workers,
};
use cocktail_tests::workspace_root;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn registration(id: &str, model: &str, url: &str) -> Value {
    json!({ "id": id, "model": model, "url": url, "packing_factor": 1, "queue_items": 1, "threads": 1 })
}

/// POSTs `body` to `url` with `token` as bearer (none with `None`): status and body.
async fn post(url: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(url).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A one-item classification of the committed ankle boot, as a client sends it.
fn ankle_boot() -> Value {
    let png =
        std::fs::read(workspace_root().join("models/samples/fashion/0000_ankle-boot.png")).unwrap();
    use base64::Engine as _;
    json!({
        "task": "fashion",
        "image": base64::engine::general_purpose::STANDARD.encode(png),
        "latency_ms": 1000.0,
        "accuracy": 0.5,
    })
}

async fn classify(client: &reqwest::Client, master: &str) -> reqwest::Response {
    client
        .post(format!("{master}/v1/classify"))
        .json(&ankle_boot())
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_refuses_rogue_workers_and_calls_without_the_secret() {
    let cluster = Cluster::start(&[], &["linear"]).await;
    let master = cluster.master.url.clone();
    let before = serving_workers(&cluster.client, &master).await;
    assert_eq!(before.len(), 1);
    let (id, _) = before[0].clone();

    // A rogue registration, with no secret and with a wrong one: 401 with a challenge.
    let rogue = registration("rogue", "linear", "http://127.0.0.1:9");
    for token in [None, Some("not-the-cluster-secret-0123456789")] {
        let response = reqwest::Client::new()
            .post(format!("{master}/v1/workers/register"))
            .json(&rogue);
        let response = match token {
            Some(t) => response.bearer_auth(t),
            None => response,
        }
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 401, "{token:?}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap();
        assert_eq!(challenge, "Bearer realm=\"cluster\"");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error_type"], "unauthorized");
        assert!(
            body["error"].as_str().unwrap().contains("cluster secret"),
            "{body}"
        );
    }
    // With the secret, a URL outside the worker networks: the metadata service, a public
    // address (server-side request forgery).
    for url in ["http://169.254.169.254/latest", "http://8.8.8.8:80"] {
        let (status, body) = post(
            &format!("{master}/v1/workers/register"),
            Some(CLUSTER_SECRET),
            &registration("ssrf", "linear", url),
        )
        .await;
        assert_eq!(status, 403, "{url}: {body}");
        assert_eq!(body["error_type"], "forbidden");
        assert!(body["error"].as_str().unwrap().contains("`url`"), "{body}");
    }
    // Every other control call without the secret, or with the admin token instead.
    let calls = [
        (
            "heartbeat",
            json!({ "id": id, "in_flight": 0, "draining": true }),
        ),
        ("notice", json!({ "id": id, "action": "terminate" })),
        ("deregister", json!({ "id": id })),
    ];
    for (call, body) in &calls {
        for token in [None, Some(ADMIN_TOKEN)] {
            let (status, answer) = post(&format!("{master}/v1/workers/{call}"), token, body).await;
            assert_eq!(status, 401, "{call} with {token:?}: {answer}");
        }
    }
    // Nothing changed: the one real worker, serving, not draining; clients are answered.
    assert_eq!(serving_workers(&cluster.client, &master).await, before);
    let listed = cluster.get("/v1/workers").await;
    assert_eq!(listed["workers"].as_array().unwrap().len(), 1, "{listed}");
    let answer = classify(&reqwest::Client::new(), &master).await;
    assert_eq!(answer.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_pool_takes_only_the_instances_the_controller_launched() {
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--models",
            "linear",
            "--provisioning-delay-ms",
            "0",
        ],
        &[],
    )
    .await;
    let master = cluster.master.url.clone();
    eventually(
        "the launched worker serves",
        Duration::from_secs(60),
        || async { !serving_workers(&cluster.client, &master).await.is_empty() },
    )
    .await;
    let (instance, _) = serving_workers(&cluster.client, &master).await[0].clone();
    let register = format!("{master}/v1/workers/register");
    // An instance that was never launched, with the right secret.
    let (status, body) = post(
        &register,
        Some(CLUSTER_SECRET),
        &registration("local-99999", "linear", "http://127.0.0.1:9"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`id`"), "{body}");
    // The launched instance's id at another address (still on loopback).
    let (status, body) = post(
        &register,
        Some(CLUSTER_SECRET),
        &registration(&instance, "linear", "http://127.0.0.2:9"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("listens on host"),
        "{body}"
    );
    // The real instance is untouched and serves.
    let listed = cluster.get("/v1/workers").await;
    let workers = listed["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{listed}");
    assert_ne!(workers[0]["url"], "http://127.0.0.2:9");
    assert_eq!(
        classify(&reqwest::Client::new(), &master).await.status(),
        200
    );

    // Every call between the master and the worker it launched is TLS, with nothing set
    // up by hand: the worker serves HTTPS with a certificate from the master's CA (kept
    // in the secrets folder), and plain HTTP to its port gets no answer.
    let url = workers[0]["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("https://127.0.0.1:"), "{listed}");
    let plain = url.replacen("https://", "http://", 1);
    let refused = reqwest::Client::new()
        .get(format!("{plain}/v2/health/live"))
        .send()
        .await;
    assert!(refused.is_err(), "plain HTTP answered: {refused:?}");
    let ca = cocktail_service::net::read_certificates(
        &workspace_root().join(".cocktail/cluster-ca.pem"),
    )
    .unwrap();
    let trusting = cocktail_service::net::client(&ca, None)
        .unwrap()
        .build()
        .unwrap();
    let live = trusting
        .get(format!("{url}/v2/health/live"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    // A client that does not trust the cluster's CA cannot talk to it either.
    assert!(
        cocktail_service::net::client(&[], None)
            .unwrap()
            .build()
            .unwrap()
            .get(format!("{url}/v2/health/live"))
            .send()
            .await
            .is_err()
    );
    // The launched instance at its own host, but serving plain HTTP: refused.
    let (status, body) = post(
        &register,
        Some(CLUSTER_SECRET),
        &registration(&instance, "linear", &plain),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"].as_str().unwrap().contains("HTTPS"), "{body}");
    // Certificates go only to a launched instance, for its own host, with the secret.
    let certificate = format!("{master}/v1/workers/certificate");
    let (status, body) = post(
        &certificate,
        Some(CLUSTER_SECRET),
        &registration(&instance, "linear", "https://127.0.0.2:9"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("listens on host"),
        "{body}"
    );
    let (status, body) = post(&certificate, None, &registration(&instance, "linear", &url)).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = post(
        &certificate,
        Some(CLUSTER_SECRET),
        &registration(&instance, "linear", &url),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["cert_pem"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_answer_only_callers_with_the_cluster_secret() {
    let args: Vec<String> = ["--model", "linear", "--port", "0"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let worker = Process::start("cocktail-worker", &args).await;
    let infer = format!("{}/v2/models/linear/infer", worker.url);
    let pixels = vec![0u8; 28 * 28];
    let body = json!({ "inputs": [{ "name": "image", "shape": [1], "datatype": "BYTES",
        "data": [png_base64(28, 28, &pixels)] }] });
    for token in [None, Some(ADMIN_TOKEN), Some("")] {
        let (status, answer) = post(&infer, token, &body).await;
        assert_eq!(status, 401, "{token:?}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("only its master"),
            "{answer}"
        );
    }
    let metadata = reqwest::get(format!("{}/v2/models/linear", worker.url))
        .await
        .unwrap();
    assert_eq!(metadata.status(), 401);
    // The health checks stay open (orchestrators probe them); the master's calls pass.
    for path in ["/v2/health/live", "/v2/health/ready"] {
        let health = reqwest::get(format!("{}{path}", worker.url)).await.unwrap();
        assert_eq!(health.status(), 200, "{path}");
    }
    let (status, answer) = post(&infer, Some(CLUSTER_SECRET), &body).await;
    assert_eq!(status, 200, "{answer}");
}

/// The admin routes and a body for each (`None`: GET; `Some("")`: a POST without one).
const ADMIN_ROUTES: &[(&str, Option<&str>)] = &[
    ("/v2/repository/index", Some("")),
    ("/v1/zoo/reload", Some("")),
    ("/v1/workers", None),
    ("/v1/pools", None),
    ("/v1/instances", None),
    ("/v1/decisions", None),
    ("/v1/mix-decisions", None),
    ("/v1/cost", None),
    (
        "/v1/pools/linear/mix",
        Some(r#"{"instances": [{"type": "r5n.large", "count": 2}]}"#),
    ),
];

/// A call to one of [`ADMIN_ROUTES`]: a GET, a POST without a body, or a PUT of `body`.
fn admin_request(
    client: &reqwest::Client,
    master: &str,
    path: &str,
    body: Option<&'static str>,
) -> reqwest::RequestBuilder {
    match body {
        None => client.get(format!("{master}{path}")),
        Some("") => client.post(format!("{master}{path}")),
        Some(body) => client
            .put(format!("{master}{path}"))
            .header("content-type", "application/json")
            .body(body),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_wants_the_admin_token() {
    let cluster = Cluster::start(
        &[
            "--provider",
            "local",
            "--models",
            "linear",
            // No instance ever starts: only the answers matter here.
            "--provisioning-delay-ms",
            "3600000",
        ],
        &[],
    )
    .await;
    let master = cluster.master.url.clone();
    let instances = || async {
        cluster.get("/v1/instances").await["instances"]
            .as_array()
            .unwrap()
            .len()
    };
    // The controller's warm start launches linear's minimum, one instance, on its own
    // schedule: the count is read after it, so that only the operator's mix adds to it.
    eventually(
        "the warm start's launch",
        Duration::from_secs(30),
        || async { instances().await >= 1 },
    )
    .await;
    let launched = instances().await;
    for (path, body) in ADMIN_ROUTES {
        for token in [
            None,
            Some(CLUSTER_SECRET),
            Some("wrong-admin-token-0123456789"),
        ] {
            let request = admin_request(&reqwest::Client::new(), &master, path, *body);
            let request = match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            };
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{path} with {token:?}");
            assert_eq!(
                response.headers()["www-authenticate"],
                "Bearer realm=\"admin\""
            );
        }
        let response = admin_request(&admin_client(), &master, path, *body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path} with the admin token");
    }
    // Only the operator's mix launched anything: two instances.
    assert_eq!(instances().await, launched + 2);
    // Prometheus on this host reads /metrics without a token.
    let metrics = reqwest::get(format!("{master}/metrics")).await.unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(
        text.contains("cocktail_master_unauthorized_total"),
        "{text}"
    );
    // The document names the schemes it enforces, and not the API keys (off).
    let doc: Value = reqwest::get(format!("{master}/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["admin_token"]["scheme"], "bearer", "{schemes}");
    assert_eq!(schemes["cluster_secret"]["scheme"], "bearer", "{schemes}");
    assert!(schemes.get("api_key").is_none(), "{schemes}");
    assert_eq!(
        doc["paths"]["/v1/cost"]["get"]["security"],
        json!([{ "admin_token": [] }])
    );
    assert!(
        doc["paths"]["/v1/classify"]["post"]
            .get("security")
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_admit_their_clients_within_their_rate() {
    let dir = std::env::temp_dir().join(format!("cocktail-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys.toml");
    let made = std::process::Command::new(cocktail_tests::cluster::binary("cocktail"))
        .args([
            "keys", "new", "--name", "alice", "--rps", "1", "--burst", "2", "--file",
        ])
        .arg(&keys)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let file = std::fs::read_to_string(&keys).unwrap();
    assert!(
        !file.contains(&key),
        "the file holds only the key's digest:\n{file}"
    );
    let keys_flag = keys.display().to_string();
    let cluster = Cluster::start(&["--api-keys", &keys_flag], &["linear"]).await;
    let master = cluster.master.url.clone();

    for client in [
        reqwest::Client::new(),
        bearer_client("not-a-key-0123456789abcdef"),
    ] {
        let refused = classify(&client, &master).await;
        assert_eq!(refused.status(), 401);
        assert_eq!(
            refused.headers()["www-authenticate"],
            "Bearer realm=\"api-key\""
        );
    }
    // Metadata stays open; the key's burst is served, the next request waits its turn.
    let models = reqwest::get(format!("{master}/v2/models")).await.unwrap();
    assert_eq!(models.status(), 200);
    let alice = bearer_client(&key);
    for _ in 0..2 {
        assert_eq!(classify(&alice, &master).await.status(), 200);
    }
    let limited = classify(&alice, &master).await;
    assert_eq!(limited.status(), 429);
    let retry: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error_type"], "rate_limited");
    assert!(
        body["error"].as_str().unwrap().contains("`alice`"),
        "{body}"
    );
    tokio::time::sleep(Duration::from_secs(retry)).await;
    assert_eq!(classify(&alice, &master).await.status(), 200);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connects and sends `bytes` one at a time, `pause` apart: what the server answered,
/// and when.
async fn trickle(address: &str, bytes: &[u8], pause: Duration) -> (String, Duration) {
    let stream = TcpStream::connect(address).await.unwrap();
    trickle_on(stream, bytes, pause).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_while_others_are_served() {
    let cluster = Cluster::start(
        &["--header-timeout-ms", "1000", "--request-timeout-s", "2"],
        &["linear"],
    )
    .await;
    let master = cluster.master.url.clone();
    let address = master.trim_start_matches("http://").to_owned();
    // Headers at one byte a second: 408 once the header timeout passes.
    let headers = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: yes\r\n\r\n".to_vec();
    let slow_headers = tokio::spawn({
        let address = address.clone();
        async move { trickle(&address, &headers, Duration::from_secs(1)).await }
    });
    // A body at one byte a second: 408 once the request timeout passes.
    let body = br#"{"id": "x", "label": 1}"#;
    let mut request = format!(
        "POST /v1/feedback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    let head = request.len();
    request.extend_from_slice(body);
    let slow_body = tokio::spawn({
        let address = address.clone();
        async move {
            let mut stream = TcpStream::connect(&address).await.unwrap();
            stream.write_all(&request[..head]).await.unwrap();
            trickle_on(stream, &request[head..], Duration::from_secs(1)).await
        }
    });
    // Meanwhile the other clients are served.
    for _ in 0..5 {
        assert_eq!(
            classify(&reqwest::Client::new(), &master).await.status(),
            200
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (answer, took) = slow_headers.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let (answer, took) = slow_body.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(answer.contains("request_timeout"), "{answer:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert_eq!(
        classify(&reqwest::Client::new(), &master).await.status(),
        200
    );
}

/// Sends `bytes` one at a time, `pause` apart, on an open connection until the server
/// answers or closes; returns what it answered and when.
async fn trickle_on(mut stream: TcpStream, bytes: &[u8], pause: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut answer = Vec::new();
    for byte in bytes {
        if stream.write_all(&[*byte]).await.is_err() {
            break;
        }
        let mut buffer = [0u8; 1024];
        match tokio::time::timeout(pause, stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buffer[..n]);
                break;
            }
            Err(_) => {}
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

/// A throwaway CA and a certificate for this host signed by it, as PEM files in `dir`.
fn throwaway_ca(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "cocktail test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_travels_over_tls_from_client_to_master_to_worker() {
    let dir = std::env::temp_dir().join(format!("cocktail-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    throwaway_ca(&dir);
    let file = |name: &str| dir.join(name).display().to_string();
    let tls: Vec<String> = vec![
        "--tls-cert".into(),
        file("cert.pem"),
        "--tls-key".into(),
        file("key.pem"),
        "--tls-ca".into(),
        file("ca.pem"),
    ];
    let grpc_port = free_port();
    let mut master_args: Vec<String> = vec![
        "--port".into(),
        "0".into(),
        "--grpc-port".into(),
        grpc_port.to_string(),
    ];
    master_args.extend(tls.clone());
    let master = Process::start("cocktail-master", &master_args).await;
    assert!(master.url.starts_with("https://"), "{}", master.url);
    let mut worker_args: Vec<String> = ["--model", "linear", "--port", "0", "--master"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    worker_args.push(master.url.clone());
    worker_args.extend(tls);
    let worker = Process::start("cocktail-worker", &worker_args).await;
    assert!(worker.url.starts_with("https://"), "{}", worker.url);

    let secret = cocktail_common::auth::Secret::new(ADMIN_TOKEN, "admin").unwrap();
    let client = cocktail_service::net::client(
        &cocktail_service::net::read_certificates(&dir.join("ca.pem")).unwrap(),
        Some(&secret),
    )
    .unwrap()
    .build()
    .unwrap();
    eventually(
        "the https worker registers",
        Duration::from_secs(30),
        || async {
            let listed: Value = match client
                .get(format!("{}/v1/workers", master.url))
                .send()
                .await
            {
                Ok(r) => r.json().await.unwrap_or_default(),
                Err(_) => Value::Null,
            };
            listed["workers"]
                .as_array()
                .is_some_and(|ws| ws.iter().any(|w| w["url"] == worker.url.as_str()))
        },
    )
    .await;
    let answer = classify(&client, &master.url).await;
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["label"], "Ankle boot", "{answer}");
    assert_eq!(answer["models"], json!(["linear"]));
    // Plain HTTP on the TLS port, and TLS without trusting the CA, both fail.
    let plain = master.url.replacen("https://", "http://", 1);
    assert!(
        reqwest::get(format!("{plain}/v2/health/live"))
            .await
            .is_err()
    );
    let untrusting = cocktail_service::net::client(&[], None)
        .unwrap()
        .build()
        .unwrap();
    assert!(
        untrusting
            .get(format!("{}/v2/health/live", master.url))
            .send()
            .await
            .is_err()
    );
    // The gRPC endpoint takes TLS with the same certificate and speaks HTTP/2.
    let ca = dir.join("ca.pem");
    let alpn = tokio::task::spawn_blocking(move || grpc_tls_alpn(grpc_port, &ca))
        .await
        .unwrap();
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TLS handshake with the gRPC port that trusts only the test CA: the protocol the
/// server agreed to (ALPN), or `None` when the handshake failed.
fn grpc_tls_alpn(port: u16, ca: &std::path::Path) -> Option<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let server = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = rustls::ClientConnection::new(std::sync::Arc::new(config), server).unwrap();
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    while tls.is_handshaking() {
        tls.complete_io(&mut socket).ok()?;
    }
    tls.alpn_protocol().map(<[u8]>::to_vec)
}
