//! A member call whose connection closes after the call went out and before an answer
//! came (the worker restarted, or closed a pooled connection as the call took it) is
//! sent once more to the same instance when no other instance can take it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A TCP relay in front of a worker that cuts the first connection carrying an inference
/// call once the call is read, answering nothing: what the master meets when a worker
/// closes a connection as a call goes out on it. Every other byte is relayed as it is.
/// Hand-written: the cut must fall between a call's request and its answer, which no
/// signal to the worker process can time.
struct CuttingRelay {
    cut: Arc<AtomicBool>,
}

impl CuttingRelay {
    async fn start(listener: TcpListener, worker: SocketAddr) -> Self {
        let cut = Arc::new(AtomicBool::new(false));
        let shared = Arc::clone(&cut);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, worker, Arc::clone(&shared)));
            }
        });
        Self { cut }
    }

    fn cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

async fn relay(mut client: TcpStream, worker: SocketAddr, cut: Arc<AtomicBool>) {
    let Ok(mut server) = TcpStream::connect(worker).await else {
        return;
    };
    let (mut up, mut down) = (vec![0_u8; 1 << 16], vec![0_u8; 1 << 16]);
    loop {
        tokio::select! {
            read = client.read(&mut up) => {
                let Ok(n @ 1..) = read else { return };
                let infer = up[..n].windows(16).any(|w| w == b"POST /v2/models/");
                if infer && !cut.swap(true, Ordering::SeqCst) {
                    // Both sockets close here, the call read and unanswered.
                    return;
                }
                if server.write_all(&up[..n]).await.is_err() {
                    return;
                }
            }
            read = server.read(&mut down) => {
                let Ok(n @ 1..) = read else { return };
                if client.write_all(&down[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A pool of one `dwsep` worker behind the relay, a request pinned to `dwsep`: its call
/// is cut after the worker's relay read it. The master sends it again on a new
/// connection, and the request is answered by `dwsep`, with no member failed. Before the
/// resend, it failed with 502 ("connection closed before message completed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_connection_drops_is_sent_again_to_its_only_instance() {
    let mut cluster = Cluster::start(&[], &[]).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let advertised = format!("http://{}", listener.local_addr().unwrap());
    let port = cocktail_tests::cluster::free_port();
    let relay = CuttingRelay::start(listener, SocketAddr::from(([127, 0, 0, 1], port))).await;
    cluster
        .add_worker_at("dwsep", port, Some(&advertised))
        .await;

    let (images, _) = fashion_images(1);
    let body = image_request(
        &images,
        json!({ "latency_ms": 2000, "accuracy": 0.5, "models": "dwsep" }),
    );
    let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
    assert!(relay.cut(), "the relay cut no call");
    assert_eq!(status, 200, "{answer}");
    let p = &answer["parameters"];
    assert_eq!(p["models"], json!(["dwsep"]), "{p}");
    assert_eq!(p["failed"], json!([]), "{p}");
    let resent = cluster
        .metric("cocktail_master_member_resends_total{model=\"dwsep\"}")
        .await;
    assert!((resent - 1.0).abs() < f64::EPSILON, "resends: {resent}");

    // The instance stays in rotation: the next request goes through the relay at once.
    let (status, answer) = cluster.post("/v2/models/fashion/infer", &body).await;
    assert_eq!(status, 200, "{answer}");
}
