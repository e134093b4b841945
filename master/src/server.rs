//! Starting a master: build the service, optionally the resource controller with its
//! provider, serve HTTP, and keep the registry and the in-process cache tidy. One
//! shutdown token (SIGTERM or SIGINT) stops the server and every background loop.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use cocktail_common::Zoo;
use cocktail_common::catalog::Catalog;
use cocktail_service::net::{Net, request_deadline};
use cocktail_service::shutdown_token;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::access::Access;
use crate::access::ca::ClusterCa;
use crate::http::{AppState, configure};
use crate::reload::Reloader;
use crate::resources::controller::{Controller, ControllerConfig};
use crate::resources::provider::docker::Containers;
use crate::resources::provider::emulated::Emulated;
use crate::resources::provider::local::{LocalConfig, LocalProvider, Processes};
use crate::resources::store::{MemoryStore, MongoStore, Store};
use crate::{Master, MasterConfig, MasterError};

/// The resource controller's setup, when the master manages its own instances.
#[derive(Debug, Clone)]
pub struct Resources {
    pub controller: ControllerConfig,
    pub catalog: Catalog,
    /// The local provider's settings; its `master_url` is filled in from the listener.
    pub local: LocalConfig,
    /// EC2 instead of the local provider.
    #[cfg(feature = "ec2")]
    pub ec2: Option<crate::resources::provider::ec2::Ec2Config>,
    /// Worker containers instead of processes.
    pub docker: Option<crate::resources::provider::docker::DockerConfig>,
    /// MongoDB for the controller's state (`None`: in-process), and its database.
    pub mongo_url: Option<String>,
    pub mongo_db: String,
    /// Fails the provider's calls named in this file while it exists (tests).
    pub fault_file: Option<std::path::PathBuf>,
}

/// Where the OIP gRPC endpoint listens, and its TLS identity.
#[derive(Debug)]
pub struct Grpc {
    pub listener: TcpListener,
    pub identity: Option<tonic::transport::Identity>,
}

/// Where the workers a provider launches reach the master (HTTPS, whatever `net` says),
/// and the CA that signs the listener's certificate and theirs.
#[derive(Debug)]
pub struct ClusterListener {
    pub listener: TcpListener,
    pub ca: Arc<ClusterCa>,
}

/// Where the master listens: HTTP, and optionally OIP gRPC and the cluster listener.
#[derive(Debug)]
pub struct Listeners {
    pub http: TcpListener,
    pub grpc: Option<Grpc>,
    pub cluster: Option<ClusterListener>,
}

/// Serves HTTP on `listeners.http` (and gRPC on `listeners.grpc`, and the same routes
/// over HTTPS on `listeners.cluster` for launched workers) until SIGINT or SIGTERM; must
/// run inside an actix `System`. `access` decides who may call what; `net` sets TLS and
/// the limits on clients. The process's shutdown token is made here, and every background
/// loop started here ends when it is cancelled.
pub async fn serve(
    config: MasterConfig,
    listeners: Listeners,
    prometheus: Option<PrometheusHandle>,
    resources: Option<Resources>,
    access: Access,
    net: Net,
) -> Result<(), MasterError> {
    let Listeners {
        http: listener,
        grpc,
        cluster,
    } = listeners;
    // At once: SIGHUP's default action would end the process.
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| MasterError::Internal(format!("SIGHUP handler: {e}")))?;
    let http_workers = config.http_workers.max(1);
    let zoo_path = config.zoo.clone();
    let master = Arc::new(Master::new(config)?);
    // Cancelled when the process is asked to stop: every background loop ends with it.
    let shutdown = shutdown_token();
    {
        let master = Arc::clone(&master);
        every(master.config.heartbeat, shutdown.child_token(), move || {
            master.registry.expire(master.config.heartbeat);
            master.ensembles.expire(master.config.cache_ttl);
            std::future::ready(())
        });
    }
    // The hosts the cluster listener's certificate names (how the workers reach it).
    let mut cluster_names = Vec::new();
    let controller = match resources {
        None => None,
        Some(mut resources) => {
            let mut address = listener
                .local_addr()
                .map_err(|e| MasterError::Internal(format!("listener: {e}")))?;
            if address.ip().is_unspecified() {
                address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            resources.local.master_url = format!("{}://{address}", net.scheme());
            if let Some(cluster) = &cluster {
                cluster_names = cluster_urls(&mut resources, cluster)?;
            }
            let zoo = Zoo::load(Zoo::locate(zoo_path.as_deref())?)?;
            let provider: Arc<dyn crate::resources::provider::Provider> = match () {
                #[cfg(feature = "ec2")]
                () if resources.ec2.is_some() => {
                    let ec2 = resources
                        .ec2
                        .clone()
                        .ok_or_else(|| MasterError::Internal("ec2".into()))?;
                    let provider = crate::resources::provider::ec2::Ec2Provider::new(
                        ec2,
                        resources.catalog.clone(),
                    )
                    .await?;
                    let refresher = Arc::clone(&provider);
                    every(
                        std::time::Duration::from_secs(60),
                        shutdown.child_token(),
                        move || {
                            let refresher = Arc::clone(&refresher);
                            async move {
                                if let Err(e) = refresher.refresh_prices().await {
                                    tracing::warn!(error = %e, "spot prices not refreshed");
                                }
                            }
                        },
                    );
                    provider
                }
                () if resources.docker.is_some() => {
                    let docker = resources
                        .docker
                        .clone()
                        .ok_or_else(|| MasterError::Internal("docker".into()))?;
                    Emulated::start(
                        resources.local,
                        Containers::connect(docker).await?,
                        resources.catalog.clone(),
                        shutdown.child_token(),
                    )?
                }
                () => LocalProvider::start(
                    resources.local,
                    Processes,
                    resources.catalog.clone(),
                    shutdown.child_token(),
                )?,
            };
            let provider: Arc<dyn crate::resources::provider::Provider> = match resources.fault_file
            {
                Some(path) => Arc::new(crate::resources::provider::faulty::Faulty::new(
                    provider, path,
                )),
                None => provider,
            };
            let store: Arc<dyn Store> = match &resources.mongo_url {
                Some(url) => Arc::new(MongoStore::start(url, &resources.mongo_db).await?),
                None => Arc::new(MemoryStore::new(10_000)),
            };
            let controller = Controller::new(
                Arc::clone(&master),
                provider,
                resources.catalog,
                &zoo,
                store,
                resources.controller,
            )?;
            controller.spawn(shutdown.child_token());
            Some(controller)
        }
    };
    let grpc = grpc.map(|grpc| {
        let (master, keys) = (Arc::clone(&master), access.keys.clone());
        let stop = shutdown.child_token();
        tokio::spawn(async move {
            let served = crate::grpc::serve(master, keys, grpc.listener, grpc.identity, stop).await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the gRPC endpoint stopped");
            }
        })
    });
    let history = Arc::new(crate::history::History::default());
    {
        let (master, controller, history) = (
            Arc::clone(&master),
            controller.clone(),
            Arc::clone(&history),
        );
        every(
            crate::history::SAMPLE_PERIOD,
            shutdown.child_token(),
            move || {
                let (master, controller, history) = (
                    Arc::clone(&master),
                    controller.clone(),
                    Arc::clone(&history),
                );
                async move {
                    let sample = crate::history::sample(&master, controller.as_deref()).await;
                    history.push(sample);
                }
            },
        );
    }
    let reloader = Arc::new(Reloader::new(Arc::clone(&master), controller.clone()));
    reload_on_hangup(hangups, Arc::clone(&reloader), shutdown.child_token());
    let sessions = crate::http::dashboard::Sessions::new(access.admin.as_ref(), net.tls.is_some())?;
    let state = web::Data::new(AppState {
        master,
        prometheus,
        controller: controller.clone(),
        access,
        history,
        sessions,
        reloader,
    });
    let deadline = net.request_timeout;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(from_fn(move |request, next| {
                request_deadline(deadline, request, next)
            }))
            .configure(configure)
    })
    .workers(http_workers)
    .disable_signals()
    .shutdown_timeout(30)
    .client_request_timeout(net.header_timeout)
    .max_connections(net.connections_per_worker(http_workers));
    let listen = |e: std::io::Error| MasterError::Internal(format!("listen: {e}"));
    let server = match &net.tls {
        Some(tls) => server
            .listen_rustls_0_23(listener, (**tls).clone())
            .map_err(listen)?,
        None => server.listen(listener).map_err(listen)?,
    };
    let server = match cluster {
        Some(cluster) => {
            let tls = cluster
                .ca
                .server_config(&cluster_hosts(&cluster, &cluster_names))
                .map_err(|e| MasterError::Internal(e.to_string()))?;
            server
                .listen_rustls_0_23(cluster.listener, tls)
                .map_err(listen)?
        }
        None => server,
    }
    .run();
    let handle = server.handle();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        // Workers this master launched go first, while it still answers their goodbyes.
        if let Some(controller) = controller {
            tracing::info!("stopping: terminating the instances this master launched");
            let left = controller.shutdown(SHUTDOWN_TERMINATE).await;
            if !left.is_empty() {
                tracing::error!(?left, "instances left running after shutdown");
            }
        }
        handle.stop(true).await;
    });
    let result = server
        .await
        .map_err(|e| MasterError::Internal(format!("HTTP server: {e}")));
    // Also when the server failed on its own: every loop stops with it.
    shutdown.cancel();
    if let Some(grpc) = grpc {
        // The gRPC endpoint drains alongside HTTP; do not wait for it longer than HTTP did.
        if tokio::time::timeout(GRPC_DRAIN, grpc).await.is_err() {
            tracing::warn!("the gRPC endpoint did not drain in time");
        }
    }
    result
}

/// How long a stopping master keeps asking a failing provider to terminate its instances.
const SHUTDOWN_TERMINATE: std::time::Duration = std::time::Duration::from_secs(30);
/// How long the gRPC endpoint may still take once HTTP has drained.
const GRPC_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The cluster listener's names: those the providers' workers use, its own address and
/// loopback's.
fn cluster_hosts(cluster: &ClusterListener, names: &[String]) -> Vec<String> {
    let mut hosts = names.to_vec();
    if let Ok(address) = cluster.listener.local_addr()
        && !address.ip().is_unspecified()
    {
        hosts.push(address.ip().to_string());
    }
    hosts.extend(["127.0.0.1".to_owned(), "localhost".to_owned()]);
    let mut seen = std::collections::HashSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    hosts
}

/// Points the providers' workers at the cluster listener (`https`, its port, the host they
/// reach the master at) and hands them the CA; the hosts named go into the listener's
/// certificate.
fn cluster_urls(
    resources: &mut Resources,
    cluster: &ClusterListener,
) -> Result<Vec<String>, MasterError> {
    let port = cluster
        .listener
        .local_addr()
        .map_err(|e| MasterError::Internal(format!("cluster listener: {e}")))?
        .port();
    let mut hosts = Vec::new();
    let mut point = |url: &mut String| -> Result<(), MasterError> {
        let mut parsed = reqwest::Url::parse(url)
            .map_err(|e| MasterError::Internal(format!("the master's URL `{url}`: {e}")))?;
        hosts.extend(
            parsed
                .host_str()
                .map(|h| h.trim_matches(['[', ']']).to_owned()),
        );
        // Both only fail for URLs that cannot have a host, which `host_str` just read.
        let _ = parsed.set_scheme("https");
        let _ = parsed.set_port(Some(port));
        *url = parsed.as_str().trim_end_matches('/').to_owned();
        Ok(())
    };
    point(&mut resources.local.master_url)?;
    if let Some(docker) = &mut resources.docker {
        point(&mut docker.master_url)?;
    }
    #[cfg(feature = "ec2")]
    if let Some(ec2) = &mut resources.ec2 {
        point(&mut ec2.master_url)?;
        ec2.cluster_ca = Some(cluster.ca.cert_pem().to_owned());
    }
    resources.local.cluster_ca = Some(cluster.ca.cert_pem().to_owned());
    Ok(hosts)
}

/// Re-reads the zoo on every SIGHUP until `stop` is cancelled (a refused reload is
/// logged and counted; the master serves on).
fn reload_on_hangup(
    mut hangups: tokio::signal::unix::Signal,
    reloader: Arc<Reloader>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        stop.run_until_cancelled(async move {
            while hangups.recv().await.is_some() {
                let _ = reloader.reload("SIGHUP").await;
            }
        })
        .await
    });
}

/// Runs `tick` every `period` (the first at once) until `stop` is cancelled; a tick under
/// way when it is cancelled is dropped at its next await.
fn every<F, Fut>(period: std::time::Duration, stop: CancellationToken, mut tick: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        stop.run_until_cancelled(async move {
            let mut interval = tokio::time::interval(period);
            loop {
                interval.tick().await;
                tick().await;
            }
        })
        .await
    });
}
