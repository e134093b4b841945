//! The transport both servers share: TLS with rustls, an HTTP
//! client that trusts a given CA, the cluster secret on calls between master and workers,
//! and limits for slow or hostile clients (header and request timeouts, a cap on
//! connections). The flags are one clap group, flattened into both binaries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, ResponseError};
use cocktail_common::auth::{self, CLUSTER_SECRET_ENV, Secret};
use cocktail_common::oip::ErrorBody;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

mod clients;
mod cluster;
pub use clients::ThreadClients;
pub use cluster::{CallError, ClusterClient, Reply};

/// Transport and hardening flags of a server.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Transport")]
pub struct NetArgs {
    /// Serve HTTPS with this PEM certificate chain (needs `--tls-key`).
    #[arg(long, env = "COCKTAIL_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, env = "COCKTAIL_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Trust this PEM CA for the https URLs this process calls (the master's workers, a
    /// worker's master). A worker launched by a provider is given its cluster's CA in
    /// `COCKTAIL_CLUSTER_CA` (PEM text) instead.
    #[arg(long, env = "COCKTAIL_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// A file (mode 0600) holding the cluster secret; COCKTAIL_CLUSTER_SECRET gives it
    /// directly. Never pass a secret as a flag: `ps` shows flags.
    #[arg(long, env = "COCKTAIL_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Milliseconds a client has to send a request's headers (then 408).
    #[arg(long, env = "COCKTAIL_HEADER_TIMEOUT_MS", default_value_t = 5000)]
    pub header_timeout_ms: u64,
    /// Seconds a request may take from its headers to the answer, body included (then
    /// 408); above the longest latency target, 60 s.
    #[arg(long, env = "COCKTAIL_REQUEST_TIMEOUT_S", default_value_t = 90.0)]
    pub request_timeout_s: f64,
    /// Open connections at most; more wait in the listen backlog.
    #[arg(long, env = "COCKTAIL_MAX_CONNECTIONS", default_value_t = 4096)]
    pub max_connections: usize,
}

impl Default for NetArgs {
    fn default() -> Self {
        Self {
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            cluster_secret_file: None,
            header_timeout_ms: 5000,
            request_timeout_s: 90.0,
            max_connections: 4096,
        }
    }
}

/// Why the transport could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("TLS: `{path}`: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error(transparent)]
    Secret(#[from] auth::SecretError),
    #[error("`--{flag}` {message}")]
    Flag { flag: &'static str, message: String },
}

/// How long a worker keeps an idle keep-alive connection open before closing it (actix's
/// default, made explicit because [`ClusterClient`] must drop its idle connections before
/// then: see its `IDLE_TIMEOUT`).
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The cluster's CA certificate (PEM text) in a provider-launched worker's environment:
/// the master that launched it is the CA ([`NetArgs::tls_ca`] names a file instead).
pub const CLUSTER_CA_ENV: &str = "COCKTAIL_CLUSTER_CA";

/// The settings a server runs with, checked.
#[derive(Debug, Clone)]
pub struct Net {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The CAs trusted for the https URLs this process calls.
    pub roots: Vec<CertificateDer<'static>>,
    pub cluster_secret: Option<Secret>,
    pub header_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
}

impl NetArgs {
    /// Loads the certificates and the cluster secret the flags and environment name.
    pub fn load(&self) -> Result<Net, NetError> {
        if !(self.request_timeout_s > 0.0 && self.request_timeout_s.is_finite()) {
            return Err(NetError::Flag {
                flag: "request-timeout-s",
                message: "must be a positive number of seconds".into(),
            });
        }
        if self.header_timeout_ms == 0 || self.max_connections == 0 {
            return Err(NetError::Flag {
                flag: "header-timeout-ms` and `--max-connections",
                message: "must be positive".into(),
            });
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(Arc::new(server_tls(cert, key)?)),
            (None, None) => None,
            // Clap checks this for flags and variables, not for a configuration file's
            // values (they are defaults to it).
            _ => {
                return Err(NetError::Flag {
                    flag: "tls-cert` and `--tls-key",
                    message: "go together: give both or neither".into(),
                });
            }
        };
        let mut roots = match &self.tls_ca {
            Some(path) => read_certificates(path)?,
            None => Vec::new(),
        };
        if let Some(pem) = std::env::var_os(CLUSTER_CA_ENV) {
            roots.extend(parse_certificates(pem.as_encoded_bytes(), CLUSTER_CA_ENV)?);
        }
        Ok(Net {
            tls,
            roots,
            cluster_secret: auth::from_env_or_file(
                CLUSTER_SECRET_ENV,
                self.cluster_secret_file.as_deref(),
            )?,
            header_timeout: Duration::from_millis(self.header_timeout_ms),
            request_timeout: Duration::from_secs_f64(self.request_timeout_s),
            max_connections: self.max_connections,
        })
    }
}

impl Net {
    /// `http` or `https`, as this server answers.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Connections each of `http_workers` threads may hold.
    pub fn connections_per_worker(&self, http_workers: usize) -> usize {
        self.max_connections.div_ceil(http_workers.max(1)).max(1)
    }

    /// A client for calls to the other side of the cluster: it trusts [`Net::roots`] and
    /// presents the cluster secret (if any) on every call.
    pub fn client(&self) -> Result<reqwest::ClientBuilder, NetError> {
        client(&self.roots, self.cluster_secret.as_ref())
    }
}

/// The crypto of every TLS connection: rustls' `ring` provider (already built for the
/// MongoDB driver), chosen explicitly so that no process-wide default is needed.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn pem_error(path: &Path) -> impl Fn(rustls::pki_types::pem::Error) -> NetError + '_ {
    move |e| NetError::Pem {
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// The certificates of a PEM file; none is an error.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(pem_error(path))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error(path))?;
    if chain.is_empty() {
        return Err(NetError::Pem {
            path: path.to_owned(),
            message: "holds no certificate".into(),
        });
    }
    Ok(chain)
}

/// The certificates of PEM text from `source` (named in errors); none is an error.
pub fn parse_certificates(
    pem: &[u8],
    source: &str,
) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let error = |message: String| NetError::Pem {
        path: source.into(),
        message,
    };
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    if chain.is_empty() {
        return Err(error("holds no certificate".into()));
    }
    Ok(chain)
}

/// A TLS server configuration from PEM files.
pub fn server_tls(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, NetError> {
    let chain = read_certificates(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(pem_error(key))?;
    server_config(chain, key)
}

/// A TLS server configuration from a certificate chain and its key in PEM text, as the
/// cluster's CA issues them (`source` names them in errors).
pub fn server_tls_from_pem(
    cert: &str,
    key: &str,
    source: &str,
) -> Result<rustls::ServerConfig, NetError> {
    let chain = parse_certificates(cert.as_bytes(), source)?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| NetError::Pem {
        path: source.into(),
        message: e.to_string(),
    })?;
    server_config(chain, key)
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<rustls::ServerConfig, NetError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// An HTTP client that trusts `cas` for https URLs (none trusted without them: the
/// cluster's certificates come from its own CA) and presents `secret` as a bearer token.
pub fn client(
    cas: &[CertificateDer<'static>],
    secret: Option<&Secret>,
) -> Result<reqwest::ClientBuilder, NetError> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(secret) = secret {
        headers.insert(reqwest::header::AUTHORIZATION, authorization(secret)?);
    }
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls_client_config(cas)?)
        .default_headers(headers))
}

/// The TLS settings of a client that trusts `cas` alone.
fn tls_client_config(cas: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig, NetError> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots.add(ca.clone())?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The `Authorization` header that presents `secret`, marked sensitive (never logged).
fn authorization(secret: &Secret) -> Result<http::HeaderValue, NetError> {
    let mut value = http::HeaderValue::from_str(&secret.bearer()).map_err(|_| NetError::Flag {
        flag: "cluster-secret-file",
        message: "holds characters a header cannot carry".into(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Whether a request presents `secret` as its bearer token.
pub fn presents(request: &actix_web::HttpRequest, secret: &Secret) -> bool {
    bearer(request).is_some_and(|token| secret.matches(token))
}

/// The bearer token a request presents (`Authorization: Bearer <token>`), if any.
pub fn bearer(request: &actix_web::HttpRequest) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer_token)
}

/// A 401 naming what to present, with the `WWW-Authenticate` challenge of RFC 6750.
pub fn unauthorized(realm: &str, message: String) -> HttpResponse {
    let mut response = HttpResponse::Unauthorized().json(ErrorBody {
        error: message,
        error_type: "unauthorized".into(),
    });
    if let Ok(value) = HeaderValue::from_str(&format!("Bearer realm=\"{realm}\"")) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A request that took longer than the server's request timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request took longer than {0:?} (headers to answer, body included)")]
pub struct TimedOut(pub Duration);

impl ResponseError for TimedOut {
    fn status_code(&self) -> StatusCode {
        StatusCode::REQUEST_TIMEOUT
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::RequestTimeout().json(ErrorBody {
            error: self.to_string(),
            error_type: "request_timeout".into(),
        });
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    }
}

/// Middleware: a request gets `limit` from its headers to its answer, so that a client
/// trickling its body cannot hold a connection and a task for longer (actix-web times
/// out only the headers).
pub async fn request_deadline(
    limit: Duration,
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    match tokio::time::timeout(limit, next.call(request)).await {
        Ok(response) => Ok(response?.map_into_boxed_body()),
        Err(_) => {
            metrics::counter!("cocktail_requests_timed_out_total").increment(1);
            Err(TimedOut(limit).into())
        }
    }
}

/// An error and its sources, `: `-separated: a client error's own message (reqwest's
/// "error sending request") omits the cause that tells a refused connection from a reset.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_checked() {
        let bad = NetArgs {
            request_timeout_s: 0.0,
            ..NetArgs::default()
        };
        assert!(
            bad.load()
                .unwrap_err()
                .to_string()
                .contains("request-timeout-s")
        );
        let missing = NetArgs {
            tls_cert: Some("/nonexistent/cert.pem".into()),
            tls_key: Some("/nonexistent/key.pem".into()),
            ..NetArgs::default()
        };
        let err = missing.load().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/cert.pem"), "{err}");
        let alone = NetArgs {
            tls_cert: Some("/nonexistent/cert.pem".into()),
            ..NetArgs::default()
        };
        let err = alone.load().unwrap_err().to_string();
        assert!(
            err.contains("`--tls-cert` and `--tls-key` go together"),
            "{err}"
        );
    }
}
