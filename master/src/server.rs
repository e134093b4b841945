//! Starting a master: build the service, serve HTTP, and keep the registry and the
//! in-process cache tidy in the background.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::{App, HttpServer, web};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::http::{AppState, configure};
use crate::{Master, MasterConfig, MasterError};

/// Serves on `listener` until SIGINT or SIGTERM; must run inside an actix `System`.
pub async fn serve(
    config: MasterConfig,
    listener: TcpListener,
    prometheus: Option<PrometheusHandle>,
) -> Result<(), MasterError> {
    let http_workers = config.http_workers.max(1);
    let master = Arc::new(Master::new(config)?);
    let janitor = {
        let master = Arc::clone(&master);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(master.config.heartbeat);
            loop {
                tick.tick().await;
                master.registry.expire(master.config.heartbeat);
                master.ensembles.expire(master.config.cache_ttl);
            }
        })
    };
    let state = web::Data::new(AppState { master, prometheus });
    let server = HttpServer::new(move || App::new().app_data(state.clone()).configure(configure))
        .workers(http_workers)
        .shutdown_timeout(30)
        .listen(listener)
        .map_err(|e| MasterError::Internal(format!("listen: {e}")))?
        .run();
    let result = server
        .await
        .map_err(|e| MasterError::Internal(format!("HTTP server: {e}")));
    janitor.abort();
    result
}
