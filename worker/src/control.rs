//! The worker's side of the control plane (`common::control`): register with the master
//! once serving, heartbeat, register again when the master has forgotten us (it
//! restarted), pass on an EC2 spot interruption notice, and say goodbye on shutdown.
//!
//! Nothing here may disturb serving: every call has a short timeout, failures are logged
//! once per streak and counted in `cocktail_worker_control_errors_total`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix_web::web;
use cocktail_common::control::{Deregistration, Heartbeat, Notice, Registered, Registration};
use cocktail_service::net::{self, Net, NetError};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::http::AppState;

/// Where the master and (on EC2) the instance metadata service are.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    pub master: String,
    pub registration: Registration,
    /// Heartbeat period until the master says otherwise.
    pub heartbeat: Duration,
    /// Base URL of the instance metadata service, e.g. `http://169.254.169.254`.
    pub imds: Option<String>,
    pub imds_poll: Duration,
}

/// The URL of control call `call` at `master`.
fn call_url(master: &str, call: &str) -> String {
    format!("{}/v1/workers/{call}", master.trim_end_matches('/'))
}

/// How long a worker started with `--cluster-tls` keeps asking for its certificate: a
/// master still starting, or a network still coming up, gets this long.
const CERTIFICATE_WITHIN: Duration = Duration::from_secs(60);

/// A certificate and key, PEM, as the master's CA issues them.
#[derive(Debug, Deserialize)]
struct Issued {
    cert_pem: String,
    key_pem: String,
}

/// Why a worker has no certificate from its master.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("the master refused a certificate for `{url}` ({status}): {body}")]
    Refused {
        url: String,
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("no certificate from the master at `{master}` within {within:?}: {last}")]
    Unreachable {
        master: String,
        within: Duration,
        last: String,
    },
}

/// Asks the master (its CA) for the certificate this worker serves HTTPS with, for the
/// host of its registration's URL (`--cluster-tls`), retrying with backoff while the
/// master cannot be reached; a refusal (a URL it may not have) is final.
pub async fn certificate(
    config: &ControlConfig,
    net: &Net,
) -> Result<rustls::ServerConfig, CertificateError> {
    let client = net
        .client()?
        .timeout(CALL_TIMEOUT)
        .build()
        .map_err(NetError::from)?;
    let url = call_url(&config.master, "certificate");
    let started = std::time::Instant::now();
    let mut backoff = Duration::from_millis(50);
    loop {
        let last = match client.post(&url).json(&config.registration).send().await {
            Ok(response) if response.status().is_success() => {
                match response.json::<Issued>().await {
                    Ok(issued) => {
                        tracing::info!(master = %config.master, "serving HTTPS with a certificate from the master");
                        return Ok(net::server_tls_from_pem(
                            &issued.cert_pem,
                            &issued.key_pem,
                            "the master's certificate answer",
                        )?);
                    }
                    Err(e) => net::error_chain(&e),
                }
            }
            // The master is there and says no: asking again changes nothing.
            Ok(response) if response.status().is_client_error() => {
                let status = response.status();
                return Err(CertificateError::Refused {
                    url: config.registration.url.clone(),
                    status,
                    body: response
                        .text()
                        .await
                        .unwrap_or_else(|e| format!("(its body could not be read: {e})")),
                });
            }
            Ok(response) => format!("status {}", response.status()),
            Err(e) => net::error_chain(&e),
        };
        if started.elapsed() >= CERTIFICATE_WITHIN {
            return Err(CertificateError::Unreachable {
                master: config.master.clone(),
                within: CERTIFICATE_WITHIN,
                last,
            });
        }
        tracing::debug!(%last, "no certificate yet");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

/// Handle kept by the server to say goodbye.
#[derive(Debug, Clone)]
pub struct Control {
    config: Arc<ControlConfig>,
    /// Calls the master: presents the cluster secret.
    client: reqwest::Client,
    /// Calls the metadata service, which must never see the secret.
    imds: reqwest::Client,
}

const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// The pause between heartbeats while they do not reach the master (a failed connect
/// costs next to nothing).
const UNREACHABLE_RETRY: Duration = Duration::from_millis(100);

impl Control {
    /// Starts the registration/heartbeat task and, with `imds`, the spot-notice poller;
    /// both stop when `shutdown` is cancelled (the goodbye calls are the server's).
    /// Control calls present `net`'s cluster secret and trust its CA.
    pub fn spawn(
        config: ControlConfig,
        state: web::Data<AppState>,
        net: &Net,
        shutdown: CancellationToken,
    ) -> Result<Self, NetError> {
        let client = net.client()?.timeout(CALL_TIMEOUT).build()?;
        let control = Self {
            config: Arc::new(config),
            client,
            // No CA and no secret: the metadata service speaks plain HTTP, and a client
            // with the platform's roots would need CA certificates that minimal images
            // (the worker container's) do not have.
            imds: net::client(&[], None)?.timeout(CALL_TIMEOUT).build()?,
        };
        let (heartbeats, stop) = (control.clone(), shutdown.clone());
        tokio::spawn(async move {
            stop.run_until_cancelled(heartbeats.heartbeat_loop(state))
                .await
        });
        if control.config.imds.is_some() {
            let poller = control.clone();
            tokio::spawn(async move { shutdown.run_until_cancelled(poller.spot_loop()).await });
        }
        Ok(control)
    }

    fn url(&self, call: &str) -> String {
        call_url(&self.config.master, call)
    }

    async fn heartbeat_loop(&self, state: web::Data<AppState>) {
        let mut period = self.config.heartbeat;
        let mut failing = false;
        loop {
            // Register, retrying with backoff while the master is unreachable.
            let mut backoff = Duration::from_millis(100);
            loop {
                match self.post("register", &self.config.registration).await {
                    Ok(response) if response.status().is_success() => {
                        if let Ok(registered) = response.json::<Registered>().await {
                            period = Duration::from_millis(registered.heartbeat_ms.max(10));
                        }
                        tracing::info!(master = %self.config.master, id = %self.config.registration.id, "registered");
                        failing = false;
                        break;
                    }
                    other => {
                        self.failed("register", &other, &mut failing);
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            // Heartbeat until the master forgets us. While the master is unreachable (it
            // restarts), beat sooner, so that the new one learns of us within a fraction
            // of a period of coming back.
            let mut pause = period;
            loop {
                tokio::time::sleep(pause).await;
                let beat = Heartbeat {
                    id: self.config.registration.id.clone(),
                    in_flight: state.capacity - state.slots.available_permits(),
                    draining: state.draining.load(Ordering::Relaxed),
                };
                match self.post("heartbeat", &beat).await {
                    Ok(response) if response.status().is_success() => {
                        failing = false;
                        pause = period;
                    }
                    Ok(response) if response.status() == reqwest::StatusCode::NOT_FOUND => {
                        tracing::warn!("the master does not know this worker; registering again");
                        break;
                    }
                    other => {
                        if matches!(&other, Err(e) if e.is_connect()) {
                            pause = UNREACHABLE_RETRY.min(period);
                        }
                        self.failed("heartbeat", &other, &mut failing);
                    }
                }
            }
        }
    }

    /// Polls the spot interruption notice; tells the master once, then stops.
    async fn spot_loop(&self) {
        let Some(imds) = self
            .config
            .imds
            .as_deref()
            .map(|u| u.trim_end_matches('/').to_owned())
        else {
            return;
        };
        let mut failing = false;
        loop {
            match spot_notice(&self.imds, &imds).await {
                Ok(Some(action)) => {
                    tracing::warn!(action = %action.action, time = ?action.time, "spot interruption notice");
                    metrics::counter!("cocktail_worker_spot_notices_total").increment(1);
                    // Keep serving until the instance goes; the master stops routing to it.
                    self.notice(&action.action, action.time).await;
                    return;
                }
                Ok(None) => failing = false,
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "cannot read the spot notice");
                    }
                    failing = true;
                    metrics::counter!("cocktail_worker_control_errors_total", "call" => "imds")
                        .increment(1);
                }
            }
            tokio::time::sleep(self.config.imds_poll).await;
        }
    }

    /// Tells the master this instance will go away; best effort.
    pub async fn notice(&self, action: &str, time: Option<String>) {
        let notice = Notice {
            id: self.config.registration.id.clone(),
            action: action.to_owned(),
            time,
        };
        let result = self.post("notice", &notice).await;
        if !matches!(&result, Ok(r) if r.status().is_success()) {
            self.failed("notice", &result, &mut false);
        }
    }

    /// Removes this instance from the master; best effort, after draining.
    pub async fn deregister(&self) {
        let goodbye = Deregistration {
            id: self.config.registration.id.clone(),
        };
        let result = self.post("deregister", &goodbye).await;
        if !matches!(&result, Ok(r) if r.status().is_success()) {
            self.failed("deregister", &result, &mut false);
        }
    }

    async fn post<T: serde::Serialize>(
        &self,
        call: &str,
        body: &T,
    ) -> reqwest::Result<reqwest::Response> {
        self.client.post(self.url(call)).json(body).send().await
    }

    fn failed(
        &self,
        call: &'static str,
        result: &reqwest::Result<reqwest::Response>,
        failing: &mut bool,
    ) {
        metrics::counter!("cocktail_worker_control_errors_total", "call" => call).increment(1);
        if !*failing {
            match result {
                Ok(response) => {
                    tracing::warn!(call, status = %response.status(), master = %self.config.master, "control call refused")
                }
                Err(e) => {
                    tracing::warn!(call, error = %e, master = %self.config.master, "control call failed")
                }
            }
        }
        *failing = true;
    }
}

/// The body of `/latest/meta-data/spot/instance-action`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SpotAction {
    pub action: String,
    #[serde(default)]
    pub time: Option<String>,
}

/// Reads the spot interruption notice, else a capacity-rebalance recommendation (as
/// action `rebalance`): `None` while there is neither (404). Uses an IMDSv2 session token
/// when the service hands one out, else IMDSv1.
pub async fn spot_notice(
    client: &reqwest::Client,
    imds: &str,
) -> Result<Option<SpotAction>, String> {
    let token = client
        .put(format!("{imds}/latest/api/token"))
        .header("X-aws-ec2-metadata-token-ttl-seconds", "60")
        .send()
        .await
        .ok()
        .filter(|r| r.status().is_success());
    let token = match token {
        Some(r) => r.text().await.ok(),
        None => None,
    };
    let token = token.as_deref();
    if let Some(action) = metadata(client, imds, token, "spot/instance-action").await? {
        return Ok(Some(action));
    }
    // No interruption yet; a capacity-rebalance recommendation (the instance is at
    // elevated risk) is handled alike: replace it before it goes.
    let rebalance: Option<Rebalance> =
        metadata(client, imds, token, "events/recommendations/rebalance").await?;
    Ok(rebalance.map(|r| SpotAction {
        action: "rebalance".into(),
        time: r.notice_time,
    }))
}

/// The JSON document at `/latest/meta-data/{path}`: `None` while there is none (404).
async fn metadata<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    imds: &str,
    token: Option<&str>,
    path: &str,
) -> Result<Option<T>, String> {
    let mut request = client.get(format!("{imds}/latest/meta-data/{path}"));
    if let Some(token) = token {
        request = request.header("X-aws-ec2-metadata-token", token);
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    match response.status().as_u16() {
        404 => Ok(None),
        200 => response
            .json::<T>()
            .await
            .map(Some)
            .map_err(|e| format!("unreadable {path}: {e}")),
        status => Err(format!("metadata service answered {status} for {path}")),
    }
}

/// The body of `/latest/meta-data/events/recommendations/rebalance`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Rebalance {
    #[serde(rename = "noticeTime", default)]
    notice_time: Option<String>,
}
