//! The control plane between real workers and a real master: registration, heartbeats,
//! re-registration after a master restart, spot interruption notices, SIGTERM goodbyes
//! and the expiry of silent workers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cocktail_tests::cluster::{
    Cluster, Process, admin_client, eventually, free_port, image_request, png_base64,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn worker_entry(cluster: &Cluster, model: &str) -> Option<Value> {
    cluster.get("/v1/workers").await["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["model"] == model)
        .cloned()
}

/// The EC2 instance metadata service as far as spot notices go (there is none on this
/// machine): an IMDSv2 token, then `spot/instance-action` answering 404 until `notice`
/// is set. Records whether the token came back on the notice request.
struct Imds {
    port: u16,
    notice: Arc<AtomicBool>,
    token_seen: Arc<AtomicBool>,
}

const TOKEN: &str = "test-token-123";

impl Imds {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let notice = Arc::new(AtomicBool::new(false));
        let token_seen = Arc::new(AtomicBool::new(false));
        let (n, t) = (Arc::clone(&notice), Arc::clone(&token_seen));
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let (n, t) = (Arc::clone(&n), Arc::clone(&t));
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0_u8; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        let Ok(read) = stream.read(&mut buf).await else {
                            return;
                        };
                        if read == 0 {
                            return;
                        }
                        request.extend_from_slice(&buf[..read]);
                    }
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    let (status, body) = if text.starts_with("put /latest/api/token") {
                        ("200 OK", TOKEN.to_owned())
                    } else if text.starts_with("get /latest/meta-data/spot/instance-action") {
                        if text.contains(&format!(
                            "x-aws-ec2-metadata-token: {}",
                            TOKEN.to_lowercase()
                        )) {
                            t.store(true, Ordering::SeqCst);
                        }
                        if n.load(Ordering::SeqCst) {
                            (
                                "200 OK",
                                r#"{"action":"terminate","time":"2026-11-22T15:00:00Z"}"#
                                    .to_owned(),
                            )
                        } else {
                            ("404 Not Found", String::new())
                        }
                    } else {
                        ("404 Not Found", String::new())
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        Self {
            port,
            notice,
            token_seen,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_notice_drains_the_worker_at_the_master() {
    let imds = Imds::start().await;
    let cluster = Cluster::start(&[], &[]).await;
    let imds_url = format!("http://127.0.0.1:{}", imds.port);
    let args: Vec<String> = [
        "--model",
        "mlp_med",
        "--port",
        "0",
        "--master",
        &cluster.master.url,
        "--heartbeat-ms",
        "200",
        "--imds-url",
        &imds_url,
        "--imds-poll-ms",
        "100",
        "--instance-type",
        "c5a.2xlarge",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let worker = Process::start("cocktail-worker", &args).await;
    eventually("registration", Duration::from_secs(30), || async {
        worker_entry(&cluster, "mlp_med")
            .await
            .is_some_and(|w| w["draining"] == false)
    })
    .await;
    let entry = worker_entry(&cluster, "mlp_med").await.unwrap();
    assert_eq!(entry["url"], worker.url.as_str());
    assert_eq!(entry["id"], format!("mlp_med@{}", worker.url));
    // The slots the controller plans with and the simulator serves with for the model
    // on its type (its packing factor, the default hop counted: its calls join), not
    // one of the worker's own thread count.
    let zoo = cocktail_common::Zoo::load(cocktail_tests::zoo_manifest()).unwrap();
    let catalog = cocktail_common::catalog::Catalog::embedded().unwrap();
    let ty = catalog.get("c5a.2xlarge").unwrap();
    let profile = zoo.model("mlp_med").unwrap().profile.as_ref();
    let fitted = profile.and_then(cocktail_common::latency::BatchLatency::fit);
    let planned = cocktail_master::config::MasterConfig::default()
        .hop_slots()
        .on_type(
            cocktail_common::catalog::packing_factor(profile, ty, &catalog.gpu),
            fitted.as_ref(),
            ty,
            &catalog.gpu,
        );
    assert_eq!(
        entry["packing_factor"].as_u64(),
        Some(u64::from(planned)),
        "{entry}"
    );
    assert_eq!(entry["instance_type"], "c5a.2xlarge");

    let pixels = vec![128_u8; 28 * 28];
    let body = image_request(
        &[png_base64(28, 28, &pixels)],
        json!({ "latency_ms": 5, "accuracy": 0.5 }),
    );
    assert_eq!(cluster.post("/v2/models/fashion/infer", &body).await.0, 200);

    imds.notice.store(true, Ordering::SeqCst);
    eventually(
        "draining at the master",
        Duration::from_secs(10),
        || async {
            worker_entry(&cluster, "mlp_med")
                .await
                .is_some_and(|w| w["draining"] == true)
        },
    )
    .await;
    assert!(
        imds.token_seen.load(Ordering::SeqCst),
        "the IMDSv2 token was not sent"
    );
    // The only instance is draining: the master has nowhere to send work.
    let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error_type"], "no_workers");
    // The worker keeps serving until the instance goes away.
    let ready = cluster
        .client
        .get(format!("{}/v2/health/ready", worker.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_deregisters_after_draining_and_silent_workers_expire() {
    let mut cluster = Cluster::start(&[], &["mlp_med", "dwsep"]).await;
    let (_, mut polite) = cluster.workers.remove(0);
    let status = polite.terminate().await;
    assert!(status.success(), "{status:?}");
    eventually("deregistration", Duration::from_secs(5), || async {
        worker_entry(&cluster, "mlp_med").await.is_none()
    })
    .await;
    // A crash says nothing; the master drops the worker after 3 missed heartbeats (200 ms).
    let (_, mut crashed) = cluster.workers.remove(0);
    crashed.kill().await;
    assert!(worker_entry(&cluster, "dwsep").await.is_some());
    eventually("expiry", Duration::from_secs(5), || async {
        worker_entry(&cluster, "dwsep").await.is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_master_gets_its_workers_back() {
    let port = free_port().to_string();
    // gRPC on any port: on a fixed `--port` the master takes 8001 beside it.
    let master_args: Vec<String> = ["--port", &port, "--grpc-port", "0", "--heartbeat-ms", "200"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut master = Process::start("cocktail-master", &master_args).await;
    let worker_args: Vec<String> = [
        "--model",
        "boe",
        "--port",
        "0",
        "--master",
        &master.url,
        "--heartbeat-ms",
        "200",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let _worker = Process::start("cocktail-worker", &worker_args).await;
    let client = admin_client();
    let listed = |url: String| {
        let client = client.clone();
        async move {
            let Ok(response) = client.get(format!("{url}/v1/workers")).send().await else {
                return false;
            };
            let body: Value = response.json().await.unwrap_or_default();
            body["workers"]
                .as_array()
                .is_some_and(|w| w.iter().any(|w| w["model"] == "boe"))
        }
    };
    let url = master.url.clone();
    eventually("registration", Duration::from_secs(30), || {
        listed(url.clone())
    })
    .await;
    master.kill().await;
    let restarted = Process::start("cocktail-master", &master_args).await;
    assert_eq!(restarted.url, url);
    // Its first heartbeat gets 404 (unknown), so the worker registers again.
    eventually("re-registration", Duration::from_secs(10), || {
        listed(url.clone())
    })
    .await;
}
