//! The client of calls inside the cluster that are made for every request: the master's
//! member calls, and the readiness probe that warms their connection.
//!
//! It is hyper-util's pooled client, with the cluster's TLS and secret, rather than
//! reqwest: reqwest parses each call's URL twice more (for its redirect layer, even with
//! redirects off, and for the answer), and wraps the call and its body in timeout and
//! redirect layers a call inside the cluster does not use. perf put that at 11 % of the
//! master's CPU under `master-bench`'s 3-model ensemble at 8 clients. Like the reqwest
//! client it replaces, it follows no redirect (workers answer where they are asked) and
//! takes no proxy from the operator's environment.

use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;

use super::{NetError, authorization, error_chain, tls_client_config};
use cocktail_common::auth::Secret;

/// How long a connection may sit idle in the pool before the client closes it: a second
/// less than the worker's [`super::KEEP_ALIVE`]. With hyper-util's default (90 s) the
/// pool kept connections the worker had closed after 5 s idle, and a call that took one
/// as the worker's close arrived failed with "connection closed before message completed"
/// (a 502 for a request whose only member it was; seen once in about 2,400 requests of
/// `autoscaling_live`, whose pools go idle between bursts).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(4);
const _: () = assert!(IDLE_TIMEOUT.as_millis() < super::KEEP_ALIVE.as_millis());

/// A pooled HTTP/1.1 client that trusts the cluster's CAs for https URLs and presents the
/// cluster secret on every call. Cheap to clone: clones share the pool.
#[derive(Debug, Clone)]
pub struct ClusterClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    authorization: Option<HeaderValue>,
}

/// A worker's answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Why a call got no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The answer was not whole within the call's time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The connection could not be made (refused, unreachable, TLS handshake).
    #[error("{0}")]
    Connect(String),
    /// The connection closed or was reset after the call went out and before an answer
    /// came: the worker restarted, or closed a pooled connection as the call took it. A
    /// call on a new connection may well succeed (hyper-util sends a call again by
    /// itself only when its pooled connection closed before the call was written).
    #[error("{0}")]
    Dropped(String),
    /// Anything else on the way: a malformed answer, a failed TLS session.
    #[error("{0}")]
    Failed(String),
}

impl CallError {
    fn from_hyper(error: &hyper_util::client::legacy::Error) -> Self {
        if error.is_connect() {
            Self::Connect(error_chain(error))
        } else if dropped(error) {
            Self::Dropped(error_chain(error))
        } else {
            Self::Failed(error_chain(error))
        }
    }
}

/// Whether `error` says the connection closed or was reset before the answer was whole:
/// hyper's incomplete message ("connection closed before message completed"), or a
/// reset or broken pipe anywhere in its chain.
fn dropped(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        let incomplete = e
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message);
        let reset = e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )
        });
        if incomplete || reset {
            return true;
        }
        source = e.source();
    }
    false
}

impl ClusterClient {
    /// A client trusting `cas` (no https URL is trusted without them: the cluster's
    /// certificates come from its own CA), presenting `secret` as a bearer token, and
    /// keeping up to `idle_per_host` idle connections to each worker.
    pub fn new(
        cas: &[CertificateDer<'static>],
        secret: Option<&Secret>,
        idle_per_host: usize,
    ) -> Result<Self, NetError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_client_config(cas)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(idle_per_host)
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .build(https);
        Ok(Self {
            client,
            authorization: secret.map(authorization).transpose()?,
        })
    }

    /// POSTs `body` with `headers`; the answer must be whole within `timeout`.
    pub async fn post(
        &self,
        uri: &Uri,
        headers: impl IntoIterator<Item = (HeaderName, HeaderValue)>,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri.clone();
        request.headers_mut().extend(headers);
        self.send(request, timeout).await
    }

    /// GETs `uri`; the answer must be whole within `timeout`.
    pub async fn get(&self, uri: &Uri, timeout: Duration) -> Result<Reply, CallError> {
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = uri.clone();
        self.send(request, timeout).await
    }

    async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        let call = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| CallError::from_hyper(&e))?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| {
                    let message = format!("reading the answer: {}", error_chain(&e));
                    if dropped(&e) {
                        CallError::Dropped(message)
                    } else {
                        CallError::Failed(message)
                    }
                })?
                .to_bytes();
            Ok(Reply {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(timeout, call)
            .await
            .unwrap_or(Err(CallError::Timeout(timeout)))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;

    /// What the test server does once it has read the request.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Then {
        /// Answers 200 with `ok`.
        Answer,
        /// Holds the connection open, answering nothing.
        Hold,
        /// Closes the connection, answering nothing.
        Close,
    }

    /// A server on loopback that reads one request and does `then`; it hands back the
    /// request it read.
    async fn one_call(then: Then) -> (Uri, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!(
            "http://{}/v2/models/m/infer",
            listener.local_addr().unwrap()
        )
        .parse()
        .unwrap();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut read = Vec::new();
            let mut buffer = [0_u8; 4096];
            while !String::from_utf8_lossy(&read).ends_with("body") {
                let n = socket.read(&mut buffer).await.unwrap();
                read.extend_from_slice(&buffer[..n]);
            }
            match then {
                Then::Answer => {
                    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-part: 7\r\n\r\nok";
                    socket.write_all(answer.as_bytes()).await.unwrap();
                }
                Then::Hold => tokio::time::sleep(Duration::from_secs(5)).await,
                Then::Close => drop(socket),
            }
            String::from_utf8_lossy(&read).into_owned()
        });
        (uri, server)
    }

    #[tokio::test]
    async fn a_call_presents_the_secret_and_reads_the_whole_answer() {
        let (uri, server) = one_call(Then::Answer).await;
        let secret = Secret::new("s3cret-for-the-cluster-0123456789", "test").unwrap();
        let client = ClusterClient::new(&[], Some(&secret), 4).unwrap();
        let header = (
            HeaderName::from_static("content-type"),
            HeaderValue::from_static("application/octet-stream"),
        );
        let reply = client
            .post(
                &uri,
                [header],
                Bytes::from_static(b"body"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, Bytes::from_static(b"ok"));
        assert_eq!(reply.headers["x-part"], "7");
        let request = server.await.unwrap().to_lowercase();
        assert!(
            request.starts_with("post /v2/models/m/infer http/1.1"),
            "{request}"
        );
        assert!(
            request.contains("content-type: application/octet-stream"),
            "{request}"
        );
        assert!(
            request.contains(&format!("authorization: {}", secret.bearer()).to_lowercase()),
            "{request}"
        );
    }

    #[tokio::test]
    async fn a_worker_that_does_not_answer_in_time_is_a_timeout() {
        let (uri, _server) = one_call(Then::Hold).await;
        let client = ClusterClient::new(&[], None, 4).unwrap();
        let timeout = Duration::from_millis(200);
        let outcome = client
            .post(&uri, [], Bytes::from_static(b"body"), timeout)
            .await;
        assert!(
            matches!(outcome, Err(CallError::Timeout(t)) if t == timeout),
            "{outcome:?}"
        );
    }

    #[tokio::test]
    async fn a_connection_closed_after_the_call_went_out_is_dropped() {
        let (uri, server) = one_call(Then::Close).await;
        let client = ClusterClient::new(&[], None, 4).unwrap();
        let outcome = client
            .post(
                &uri,
                [],
                Bytes::from_static(b"body"),
                Duration::from_secs(5),
            )
            .await;
        server.await.unwrap();
        assert!(matches!(outcome, Err(CallError::Dropped(_))), "{outcome:?}");
    }

    #[tokio::test]
    async fn a_closed_port_is_a_connect_error() {
        // Bound, then closed: nothing listens there.
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri: Uri = format!("http://127.0.0.1:{port}/v2/health/ready")
            .parse()
            .unwrap();
        let client = ClusterClient::new(&[], None, 4).unwrap();
        let outcome = client.get(&uri, Duration::from_secs(5)).await;
        assert!(matches!(outcome, Err(CallError::Connect(_))), "{outcome:?}");
    }
}
