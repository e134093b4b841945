//! Starting a worker: load the model, tune batching from its profile, serve HTTP, drain
//! on SIGTERM (finish what is in flight, refuse new work, exit).

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use cocktail_common::batching::{self, BatchPolicy};
use cocktail_common::catalog::{self, Catalog};
use cocktail_common::control::Registration;
use cocktail_common::latency::BatchLatency;
use cocktail_common::oip::tensor::Typed;
use cocktail_common::testset::GreyImage;
use cocktail_common::zoo::DType;
use cocktail_common::{Input, ModelEntry, Zoo};
use cocktail_service::net::{self, Net};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::batcher::{BatcherHandle, Pace};
use crate::control::{Control, ControlConfig};
use crate::http::{AppState, configure, guard};
use crate::preprocess::{Preprocessor, TensorRows};
use crate::{OnnxBackend, WorkerError};

/// How a worker runs; `main` fills it from flags and environment.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub model: String,
    pub zoo: Option<PathBuf>,
    pub ort_lib: Option<PathBuf>,
    /// Intra-op threads: how an instance size is emulated locally.
    pub threads: usize,
    /// Overrides of the batching tuned from the profile.
    pub max_batch: Option<usize>,
    pub batch_wait: Option<Duration>,
    /// Response-time target the batching is tuned for (default: twice the single latency).
    pub rt_max: Option<Duration>,
    /// How long the idle batch thread spins for the next request before it sleeps.
    pub idle_poll: Duration,
    /// Whether a lone call of a quick model runs on the thread that received it
    /// (`BatcherHandle`'s note); off only to measure the hand-off.
    pub inline: bool,
    /// Items that may wait beyond those in service before requests get 429.
    pub queue_items: usize,
    /// HTTP worker threads.
    pub http_workers: usize,
    /// The instance type this worker runs on, told to the master.
    pub instance_type: Option<String>,
    /// Answer each request no sooner than `instance_type` would, requests side by side
    /// (the local provider's emulated types; see [`Pace`]).
    pub emulate_type: bool,
    /// Emulate the type this many times slower than modelled.
    pub emulate_scale: f64,
}

/// A loaded worker, ready to serve.
#[derive(Debug)]
pub struct Worker {
    pub state: web::Data<AppState>,
    pub policy: BatchPolicy,
    http_workers: usize,
    threads: usize,
    queue_items: usize,
    instance_type: Option<String>,
}

impl Worker {
    /// Loads the model and starts its batch thread.
    pub fn load(
        config: &WorkerConfig,
        prometheus: Option<PrometheusHandle>,
    ) -> Result<Self, WorkerError> {
        let zoo = Zoo::load(Zoo::locate(config.zoo.as_deref())?)?;
        let model = zoo.model(&config.model)?.clone();
        let labels = zoo.task(&model.task)?.labels.clone();
        let mut backend =
            OnnxBackend::load(&zoo, &model, config.threads, config.ort_lib.as_deref())?;
        let preprocessor = Arc::new(Preprocessor::for_model(&zoo, &model)?);
        warm_up(&mut backend, &preprocessor)?;
        let tuned = batching::tune(
            model.profile.as_ref(),
            config.threads,
            config.rt_max.map(|d| d.as_secs_f64() * 1e6),
        );
        let policy = BatchPolicy {
            max_items: config.max_batch.unwrap_or(tuned.max_items).max(1),
            window: config.batch_wait.unwrap_or(tuned.window),
        };
        let pace = if config.emulate_type {
            Some(pace(
                &model,
                config.instance_type.as_deref(),
                config.emulate_scale,
            )?)
        } else {
            None
        };
        let batcher = BatcherHandle::spawn(
            Box::new(backend),
            Arc::clone(&preprocessor),
            policy,
            pace,
            config.idle_poll,
            config.inline,
        )?;
        let capacity = policy.max_items + config.queue_items;
        tracing::info!(model = %model.name, threads = config.threads, max_batch = policy.max_items,
            window_us = policy.window.as_micros() as u64, capacity, "model loaded");
        let state = AppState {
            model,
            labels,
            preprocessor,
            batcher,
            slots: Arc::new(Semaphore::new(capacity)),
            capacity,
            draining: Arc::new(AtomicBool::new(false)),
            prometheus,
        };
        Ok(Self {
            state: web::Data::new(state),
            policy,
            http_workers: config.http_workers.max(1),
            threads: config.threads,
            queue_items: config.queue_items,
            instance_type: config.instance_type.clone(),
        })
    }

    /// What this worker tells the master about itself. The packing factor is the
    /// catalog's for the model on its instance type, the one the controller plans with
    /// and the simulator serves with (`catalog::packing_factor`); without a type known to
    /// the catalog, the profile's for this thread count, else the batch size.
    pub fn registration(&self, id: String, url: String) -> Registration {
        let model = &self.state.model;
        let planned = self.instance_type.as_deref().and_then(|name| {
            let catalog = Catalog::embedded().ok()?;
            let ty = catalog.get(name)?;
            Some(catalog::packing_factor(
                model.profile.as_ref(),
                ty,
                &catalog.gpu,
            ))
        });
        Registration {
            id,
            model: model.name.clone(),
            url,
            packing_factor: planned
                .or_else(|| {
                    model
                        .profile
                        .as_ref()
                        .and_then(|p| p.packing_factor(self.threads))
                })
                .unwrap_or(self.policy.max_items as u32)
                .max(1),
            queue_items: self.queue_items,
            threads: self.threads,
            burst: false,
            instance_type: self.instance_type.clone(),
        }
    }

    /// Serves on `listener` until `shutdown` is cancelled (the process's token, see
    /// [`cocktail_service::shutdown_token`]: SIGTERM or SIGINT), then drains. With
    /// `control`, it registers with the master and heartbeats until then, and on shutdown
    /// tells the master first (no new work) and deregisters once drained. `net` sets TLS,
    /// the limits on clients and the cluster secret every call but the health checks must
    /// present.
    pub async fn serve(
        self,
        listener: TcpListener,
        control: Option<ControlConfig>,
        net: Net,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        let control = match control {
            Some(config) => Some(
                Control::spawn(config, self.state.clone(), &net, shutdown.clone())
                    .map_err(std::io::Error::other)?,
            ),
            None => None,
        };
        let state = self.state.clone();
        let (secret, deadline) = (net.cluster_secret.clone(), net.request_timeout);
        let model = self.state.model.name.clone();
        let server = HttpServer::new(move || {
            let (secret, model) = (secret.clone(), model.clone());
            App::new()
                .app_data(state.clone())
                .app_data(guard::Guarded(secret.is_some()))
                .wrap(from_fn(move |request, next| {
                    guard::cluster_only(secret.clone(), request, next)
                }))
                .wrap(from_fn(move |request, next| {
                    net::request_deadline(deadline, request, next)
                }))
                .configure(|cfg| configure(cfg, &model))
        })
        .workers(self.http_workers)
        .disable_signals()
        .shutdown_timeout(30)
        .client_request_timeout(net.header_timeout)
        .keep_alive(net::KEEP_ALIVE)
        .max_connections(net.connections_per_worker(self.http_workers));
        let server = match &net.tls {
            Some(tls) => server.listen_rustls_0_23(listener, (**tls).clone())?,
            None => server.listen(listener)?,
        }
        .run();
        let handle = server.handle();
        let draining = Arc::clone(&self.state.draining);
        let goodbye = control.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            tracing::info!("draining: finishing in-flight requests, refusing new ones");
            draining.store(true, Ordering::Relaxed);
            if let Some(control) = &goodbye {
                control.notice("shutdown", None).await;
            }
            handle.stop(true).await;
        });
        let served = server.await;
        // Also when the server failed on its own: the control loops stop with it.
        shutdown.cancel();
        if let Some(control) = &control {
            control.deregister().await;
        }
        served
    }
}

/// One inference before the worker serves (and registers): ONNX Runtime's first run
/// allocates and optimises, which would otherwise cost the first client request its
/// deadline.
fn warm_up(backend: &mut dyn Backend, preprocessor: &Preprocessor) -> Result<(), WorkerError> {
    let batch = match preprocessor {
        Preprocessor::Image(image) => {
            let (height, width) = image.size();
            let black = GreyImage {
                width,
                height,
                pixels: vec![0; width as usize * height as usize],
            };
            preprocessor.batch(&[Input::Image(black)])?
        }
        Preprocessor::Text(_) => {
            preprocessor.batch(&[Input::Text("A warm-up sentence.".to_owned())])?
        }
        Preprocessor::Tensor(tensors) => {
            let rows = TensorRows {
                count: 1,
                values: tensors
                    .inputs()
                    .iter()
                    .map(|i| {
                        let len = i.shape.iter().skip(1).map(|&d| d.max(1) as usize).product();
                        zeros(i.dtype, len)
                    })
                    .collect(),
            };
            tensors.join(&[&rows])?
        }
    };
    backend.infer(&batch)?;
    Ok(())
}

/// `len` zeros of `dtype`.
fn zeros(dtype: DType, len: usize) -> Typed {
    match dtype {
        DType::Float32 => Typed::F32(vec![0.0; len]),
        DType::Float64 => Typed::F64(vec![0.0; len]),
        DType::Int8 => Typed::I8(vec![0; len]),
        DType::Int16 => Typed::I16(vec![0; len]),
        DType::Int32 => Typed::I32(vec![0; len]),
        DType::Int64 => Typed::I64(vec![0; len]),
        DType::Uint8 => Typed::U8(vec![0; len]),
        DType::Uint16 => Typed::U16(vec![0; len]),
        DType::Uint32 => Typed::U32(vec![0; len]),
        DType::Uint64 => Typed::U64(vec![0; len]),
        DType::Bool => Typed::Bool(vec![false; len]),
    }
}

/// The pace of `instance_type` (from the embedded catalog) for `model`'s profile.
fn pace(model: &ModelEntry, instance_type: Option<&str>, scale: f64) -> Result<Pace, WorkerError> {
    let refuse = WorkerError::Emulation;
    let name =
        instance_type.ok_or_else(|| refuse("--emulate-type needs --instance-type".into()))?;
    let catalog = Catalog::embedded()?;
    let instance_type = catalog
        .get(name)
        .cloned()
        .ok_or_else(|| refuse(format!("instance type `{name}` is not in the catalog")))?;
    let latency = model
        .profile
        .as_ref()
        .and_then(BatchLatency::fit)
        .ok_or_else(|| {
            refuse(format!(
                "`{}` has no profile to emulate a type with",
                model.name
            ))
        })?;
    Ok(Pace {
        latency: latency.scaled(scale),
        instance_type,
        gpu: catalog.gpu,
    })
}
