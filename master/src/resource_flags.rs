//! The resource controller's flags ([`ResourceArgs`]), checked and turned into its
//! configuration: a module of the `cocktail-master` binary, apart from `main.rs`, which
//! keeps the serving flags.

use std::path::PathBuf;
use std::time::Duration;

use cocktail_common::auth::Secret;
use cocktail_common::catalog::Catalog;
use cocktail_common::redact::UrlWithCredentials;
use cocktail_master::resources::controller::{ControllerConfig, MixConfig, Optimiser, Policy};
use cocktail_master::resources::provider::docker::DockerConfig;
use cocktail_master::resources::provider::local::LocalConfig;
use cocktail_master::server::Resources;
use cocktail_master::serving::usage::RECENT_OUTCOMES;
use cocktail_policy::autoscale::AutoscaleConfig;
use cocktail_policy::control::ControlConfig;
use cocktail_policy::mix::MAX_TYPES;
use cocktail_policy::predict::PredictorKind;
use cocktail_service::config_file::TESTING;

/// The resource controller (off unless `--provider` is given).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Resource controller")]
pub(crate) struct ResourceArgs {
    /// Where instances come from: `local` (worker processes on this host), `docker`
    /// (worker containers, through the Docker Engine API) or `ec2` (needs the `ec2` cargo
    /// feature).
    #[arg(long, env = "COCKTAIL_PROVIDER", value_enum)]
    pub(crate) provider: Option<ProviderKind>,
    /// Seconds between predictive autoscaling steps (Ts).
    #[arg(long, env = "COCKTAIL_CONTROLLER_INTERVAL_S", default_value_t = 60.0)]
    controller_interval_s: f64,
    /// Seconds between SLO-violation checks.
    #[arg(long, env = "COCKTAIL_REACTIVE_INTERVAL_S", default_value_t = 10.0)]
    reactive_interval_s: f64,
    /// Seconds ahead the load is predicted (Tp).
    #[arg(long, env = "COCKTAIL_HORIZON_S", default_value_t = 600.0)]
    horizon_s: f64,
    /// Seconds of requests the importance weights come from.
    #[arg(long, env = "COCKTAIL_IMPORTANCE_WINDOW_S", default_value_t = 300.0)]
    importance_window_s: f64,
    /// Provisioning policy.
    #[arg(long, env = "COCKTAIL_POLICY", value_enum, default_value_t = Policy::Cocktail)]
    pub(crate) policy: Policy,
    /// Load predictor (`auto`: whichever statistical predictor has the least recent
    /// error; `learned`: an MLP run by ONNX Runtime).
    #[arg(long, env = "COCKTAIL_PREDICTOR", value_enum, default_value_t = PredictorKind::Auto)]
    pub(crate) predictor: PredictorKind,
    /// The quantile of the forecast load the predictive policies plan for, in [0, 1]
    /// (the forecast raised by that quantile of its recent relative errors, at most doubled).
    #[arg(long, env = "COCKTAIL_FORECAST_QUANTILE", default_value_t = 0.9)]
    forecast_quantile: f64,
    /// The share of a pool's capacity the plan uses, in (0, 1] (headroom for the load
    /// within an interval; target tracking has its own).
    #[arg(long, env = "COCKTAIL_TARGET_UTILISATION", default_value_t = 0.8)]
    target_utilisation: f64,
    /// The largest share of a pool one spot type may hold once it has more than one
    /// instance, in (0, 1] (1: no limit).
    #[arg(long, env = "COCKTAIL_SPOT_TYPE_SHARE", default_value_t = 0.5)]
    spot_type_share: f64,
    /// Seconds an instance may stay idle before it is recycled.
    #[arg(long, env = "COCKTAIL_IDLE_TIMEOUT_S", default_value_t = 600.0)]
    idle_timeout_s: f64,
    /// Instances every managed pool keeps.
    #[arg(long, env = "COCKTAIL_MIN_INSTANCES", default_value_t = 1)]
    min_instances: usize,
    /// Per-request time beyond inference (a member call's hop), in ms: turns Pf into
    /// requests per second, and the instances of models whose calls join
    /// (`--join-calls-us`) count it in the calls they take at once (the largest batch
    /// whose inference plus the hop stays within 1.5 times one item's plus the hop, plus
    /// the linger a joining call already accepts, so that a model whose profile packs
    /// one call can join dozens).
    #[arg(long, env = "COCKTAIL_OVERHEAD_MS", default_value_t = 0.5)]
    pub(crate) overhead_ms: f64,
    /// Share of deadline misses that triggers a reactive scale-up.
    #[arg(long, env = "COCKTAIL_SLO_THRESHOLD", default_value_t = 0.05)]
    slo_threshold: f64,
    /// Check SLO violations over each model's last M member calls (MArk §4.4; 1 to
    /// 1000, default with `--policy mark`: 100) instead of over the last reactive interval.
    #[arg(long, env = "COCKTAIL_SLO_LAST_REQUESTS", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=RECENT_OUTCOMES as u64))]
    pub(crate) slo_last_requests: Option<usize>,
    /// Buy on-demand only (default: spot whenever its price is under the bid).
    #[arg(long, env = "COCKTAIL_ON_DEMAND")]
    on_demand: bool,
    /// Instance types the controller may buy (comma-separated; default: the whole catalog).
    #[arg(long, env = "COCKTAIL_INSTANCE_TYPES", value_delimiter = ',')]
    instance_types: Vec<String>,
    /// Models whose pools are managed (comma-separated; default: every zoo model). Named
    /// models are pinned: always kept at the minimum. Otherwise a pool is kept while an
    /// ensemble uses its model, as the simulator does.
    #[arg(long, env = "COCKTAIL_MODELS", value_delimiter = ',')]
    models: Vec<String>,
    /// The instance catalog (default: the embedded one).
    #[arg(long, env = "COCKTAIL_CATALOG")]
    catalog: Option<PathBuf>,
    /// Local provider: milliseconds between a launch and the worker starting.
    #[arg(long, env = "COCKTAIL_PROVISIONING_DELAY_MS", default_value_t = 3000)]
    #[arg(help_heading = TESTING)]
    provisioning_delay_ms: u64,
    /// Local provider: most intra-op threads per worker (default: this host's cores).
    #[arg(long, env = "COCKTAIL_MAX_THREADS", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_threads: Option<usize>,
    /// Local workers answer each call no sooner than their instance type would (from the
    /// model's profile and the catalog), the calls an instance holds at once side by
    /// side, so mixed pools behave like the real types.
    #[arg(long, env = "COCKTAIL_EMULATE_TYPES")]
    #[arg(help_heading = TESTING)]
    pub(crate) emulate_types: bool,
    /// With `--emulate-types`: emulate every type this many times slower, so that the
    /// modelled latency stays above this host's real one (the master's selection,
    /// autoscaling and matching use the same scale).
    #[arg(long, env = "COCKTAIL_EMULATE_SCALE", default_value_t = 1.0)]
    #[arg(help_heading = TESTING)]
    pub(crate) emulate_scale: f64,
    /// Local provider: spot revocations per instance-hour beyond the price's.
    #[arg(long, env = "COCKTAIL_REVOCATIONS_PER_HOUR", default_value_t = 0.0)]
    #[arg(help_heading = TESTING)]
    revocations_per_hour: f64,
    /// Local provider: seconds of notice before a revoked instance goes (default: the
    /// catalog's, 120).
    #[arg(long, env = "COCKTAIL_SPOT_NOTICE_S")]
    #[arg(help_heading = TESTING)]
    spot_notice_s: Option<f64>,
    /// Stopped burstable standbys kept per pool and resumed on a spot interruption
    /// (MArk §4.5).
    #[arg(long, env = "COCKTAIL_STANDBYS", default_value_t = 0)]
    standbys: usize,
    /// Keep every control-loop step (its measurements and decisions) in the store's
    /// `control_steps` collection, to replay it in the simulator's loop.
    #[arg(long, env = "COCKTAIL_RECORD_CONTROL_STEPS")]
    #[arg(help_heading = TESTING)]
    record_control_steps: bool,
    /// Fault injection: while this file exists, the provider's calls it names
    /// (`describe`, `launch`, `terminate`, `stop`, `start`; empty: all) fail.
    #[arg(long, env = "COCKTAIL_PROVIDER_FAULT_FILE")]
    #[arg(help_heading = TESTING)]
    provider_fault_file: Option<std::path::PathBuf>,
    /// Seconds between health checks of the running instances (dead, hung or never
    /// registered ones are replaced at once).
    #[arg(long, env = "COCKTAIL_HEALTH_INTERVAL_S", default_value_t = 1.0)]
    health_interval_s: f64,
    /// Seconds a running instance has to register its worker before it is replaced.
    #[arg(long, env = "COCKTAIL_REGISTER_TIMEOUT_S", default_value_t = 120.0)]
    register_timeout_s: f64,
    /// Choose each pool's mix of instance types with `ribbon` (Bayesian optimisation, one
    /// live measurement per interval) or `kairos` (throughput bound within a budget)
    /// instead of the autoscaler.
    #[arg(long, env = "COCKTAIL_POOL_MIX", value_enum)]
    pub(crate) pool_mix: Option<Optimiser>,
    /// The types a pool may mix (comma-separated), in preference order.
    #[arg(
        long,
        env = "COCKTAIL_MIX_TYPES",
        value_delimiter = ',',
        default_value = "g4dn.xlarge,c5n.2xlarge,r5n.large,t3.xlarge"
    )]
    mix_types: Vec<String>,
    /// Kairos: USD per hour one pool may cost.
    #[arg(long, env = "COCKTAIL_MIX_BUDGET", default_value_t = 2.5)]
    mix_budget: f64,
    /// Kairos: the latency target of a batch, milliseconds.
    #[arg(long, env = "COCKTAIL_MIX_QOS_MS", default_value_t = 100.0)]
    mix_qos_ms: f64,
    /// Ribbon: instances of one type at most.
    #[arg(long, env = "COCKTAIL_MIX_MAX_PER_TYPE", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=12))]
    mix_max_per_type: u32,
    /// Local provider: replay this spot price history (CSV `seconds,instance_type,price`)
    /// instead of the synthetic process.
    #[arg(long, env = "COCKTAIL_SPOT_HISTORY")]
    #[arg(help_heading = TESTING)]
    spot_history: Option<PathBuf>,
    /// Seed of the spot prices and the chaos.
    #[arg(long, env = "COCKTAIL_SEED", default_value_t = 1)]
    #[arg(help_heading = TESTING)]
    pub(crate) seed: u64,
    /// MongoDB for instances, spot prices, utilisation and decisions, e.g.
    /// mongodb://127.0.0.1:27017 (default: kept in this process).
    #[arg(long, env = "COCKTAIL_MONGO_URL")]
    mongo_url: Option<UrlWithCredentials>,
    /// The MongoDB database.
    #[arg(long, env = "COCKTAIL_MONGO_DB", default_value = "cocktail")]
    mongo_db: String,
    /// EC2: another endpoint than AWS's (e.g. a moto server).
    #[arg(long, env = "COCKTAIL_EC2_ENDPOINT")]
    ec2_endpoint: Option<String>,
    /// EC2: the region.
    #[arg(long, env = "COCKTAIL_EC2_REGION", default_value = "us-east-1")]
    ec2_region: String,
    /// EC2: the AMI with cocktail-worker installed.
    #[arg(long, env = "COCKTAIL_EC2_IMAGE_ID")]
    ec2_image_id: Option<String>,
    /// EC2: subnets the workers are launched into (comma-separated; default: the default
    /// VPC's).
    #[arg(long, env = "COCKTAIL_EC2_SUBNETS", value_delimiter = ',')]
    ec2_subnets: Vec<String>,
    /// EC2: the workers' security groups (comma-separated).
    #[arg(long, env = "COCKTAIL_EC2_SECURITY_GROUPS", value_delimiter = ',')]
    ec2_security_groups: Vec<String>,
    /// EC2: the workers' instance profile (its role reads `--ec2-secret-id`).
    #[arg(long, env = "COCKTAIL_EC2_INSTANCE_PROFILE")]
    ec2_instance_profile: Option<String>,
    /// EC2: a Secrets Manager secret holding the cluster secret, which each worker reads
    /// at boot (default: the boot script carries the secret itself).
    #[arg(long, env = "COCKTAIL_EC2_SECRET_ID")]
    ec2_secret_id: Option<String>,
    /// EC2, emulated only: take each instance's worker host from this tag instead of its
    /// private address (the moto harness runs instances as local processes).
    #[arg(long, env = "COCKTAIL_EC2_HOST_TAG")]
    #[arg(help_heading = TESTING)]
    ec2_host_tag: Option<String>,
    /// EC2 and Docker: the master's URL as the instances reach it.
    #[arg(long, env = "COCKTAIL_PUBLIC_URL")]
    public_url: Option<String>,
    /// Docker: the image whose `cocktail-worker` the instances run.
    #[arg(
        long,
        env = "COCKTAIL_DOCKER_IMAGE",
        default_value = "cocktail-rs:latest"
    )]
    docker_image: String,
    /// Docker: the network the instances join (the master must be on it too).
    #[arg(long, env = "COCKTAIL_DOCKER_NETWORK", default_value = "cocktail")]
    docker_network: String,
    /// Docker: names this master's containers; the ones an earlier master of the same
    /// name left are removed at start.
    #[arg(long, env = "COCKTAIL_DOCKER_CLUSTER", default_value = "cocktail")]
    docker_cluster: String,
    /// Docker: list the running worker containers in this file for Prometheus'
    /// `file_sd_configs` (rewritten at each launch and removal).
    #[arg(long, env = "COCKTAIL_DOCKER_TARGETS_FILE")]
    docker_targets_file: Option<PathBuf>,
    /// The worker binary the local provider starts (default: next to this one).
    #[arg(long, env = "COCKTAIL_WORKER_BIN")]
    worker_bin: Option<PathBuf>,
}

/// Where the resource controller's instances come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProviderKind {
    Local,
    Docker,
    Ec2,
}

pub fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(value > 0.0 && value.is_finite()) {
        anyhow::bail!("`--{flag}` must be a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(value))
}

/// A flag that must be a finite number of at least 0.
pub fn non_negative(value: f64, flag: &str) -> anyhow::Result<f64> {
    if !(value >= 0.0 && value.is_finite()) {
        anyhow::bail!("`--{flag}` must be a finite number of at least 0; given {value}");
    }
    Ok(value)
}

/// A flag that must be a share, in [0, 1].
pub fn share(value: f64, flag: &str) -> anyhow::Result<f64> {
    if !(0.0..=1.0).contains(&value) {
        anyhow::bail!("`--{flag}` must be in [0, 1]; given {value}");
    }
    Ok(value)
}

/// A flag that must be a share above 0, in (0, 1].
pub fn positive_share(value: f64, flag: &str) -> anyhow::Result<f64> {
    if !(value > 0.0 && value <= 1.0) {
        anyhow::bail!("`--{flag}` must be in (0, 1]; given {value}");
    }
    Ok(value)
}

/// The resource controller, when `--provider` is given.
pub fn resources(
    args: ResourceArgs,
    zoo: Option<PathBuf>,
    cluster_secret: &Secret,
) -> anyhow::Result<Option<Resources>> {
    let Some(provider) = args.provider else {
        return Ok(None);
    };
    let ec2 = provider == ProviderKind::Ec2;
    #[cfg(not(feature = "ec2"))]
    if ec2 {
        anyhow::bail!("this master was built without the `ec2` cargo feature");
    }
    let catalog = match &args.catalog {
        Some(path) => Catalog::load(path)?,
        None => Catalog::embedded()?,
    };
    let mix = mix_config(&args, &catalog)?;
    let worker_bin = match args.worker_bin {
        Some(path) => path,
        None => std::env::current_exe()?.with_file_name("cocktail-worker"),
    };
    if provider == ProviderKind::Local && !worker_bin.is_file() {
        anyhow::bail!(
            "{} is missing: build it with `cargo build --workspace --bins`",
            worker_bin.display()
        );
    }
    let notice = args.spot_notice_s.unwrap_or(catalog.spot.notice_seconds);
    Ok(Some(Resources {
        controller: ControllerConfig {
            control: ControlConfig {
                interval_s: seconds(args.controller_interval_s, "controller-interval-s")?
                    .as_secs_f64(),
                reactive_interval_s: seconds(args.reactive_interval_s, "reactive-interval-s")?
                    .as_secs_f64(),
                horizon_s: seconds(args.horizon_s, "horizon-s")?.as_secs_f64(),
                importance_window_s: seconds(args.importance_window_s, "importance-window-s")?
                    .as_secs_f64(),
                launch_s: Duration::from_millis(args.provisioning_delay_ms.max(1)).as_secs_f64(),
                forecast_quantile: share(args.forecast_quantile, "forecast-quantile")?,
                tracking_utilisation: None,
                policy: args.policy,
                sizes_pools: true,
                importance_weights: true,
                autoscale: AutoscaleConfig {
                    overhead_ms: non_negative(args.overhead_ms, "overhead-ms")?,
                    idle_timeout_s: non_negative(args.idle_timeout_s, "idle-timeout-s")?,
                    min_instances: args.min_instances,
                    slo_threshold: share(args.slo_threshold, "slo-threshold")?,
                    target_utilisation: positive_share(
                        args.target_utilisation,
                        "target-utilisation",
                    )?,
                    spot_type_share: positive_share(args.spot_type_share, "spot-type-share")?,
                },
            },
            predictor: args.predictor,
            spot: !args.on_demand,
            instance_types: args.instance_types,
            models: args.models,
            slo_last_requests: args
                .slo_last_requests
                .or((args.policy == Policy::Mark).then_some(100)),
            standbys: args.standbys,
            record_steps: args.record_control_steps,
            mix,
            health_interval: seconds(args.health_interval_s, "health-interval-s")?,
            register_within: seconds(args.register_timeout_s, "register-timeout-s")?,
        },
        local: LocalConfig {
            worker_bin,
            master_url: String::new(),
            zoo,
            provisioning_delay: Duration::from_millis(args.provisioning_delay_ms),
            max_threads: args
                .max_threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            revocations_per_hour: non_negative(args.revocations_per_hour, "revocations-per-hour")?,
            notice: seconds(notice, "spot-notice-s")?,
            seed: args.seed,
            spot_history: args.spot_history,
            emulate_types: args.emulate_types,
            emulate_scale: args.emulate_scale,
            cluster_secret: Some(cluster_secret.clone()),
            // Set by the server once its cluster listener is bound.
            cluster_ca: None,
        },
        #[cfg(feature = "ec2")]
        ec2: if ec2 {
            Some(cocktail_master::resources::provider::ec2::Ec2Config {
                endpoint: args.ec2_endpoint,
                region: args.ec2_region,
                credentials: None,
                image_id: args.ec2_image_id.ok_or_else(|| {
                    anyhow::anyhow!("`--ec2-image-id` is required with `--provider ec2`")
                })?,
                master_url: args.public_url.clone().ok_or_else(|| {
                    anyhow::anyhow!("`--public-url` is required with `--provider ec2`")
                })?,
                seed: args.seed,
                cluster_secret: Some(cluster_secret.clone()),
                secret_id: args.ec2_secret_id,
                subnets: args.ec2_subnets,
                security_groups: args.ec2_security_groups,
                instance_profile: args.ec2_instance_profile,
                host_tag: args.ec2_host_tag,
                // Set by the server once its cluster listener is bound.
                cluster_ca: None,
            })
        } else {
            None
        },
        docker: match provider {
            ProviderKind::Docker => Some(DockerConfig {
                image: args.docker_image,
                network: args.docker_network,
                master_url: args.public_url.ok_or_else(|| {
                    anyhow::anyhow!(
                        "`--public-url` (the master's URL as the containers reach it) is required with `--provider docker`"
                    )
                })?,
                cluster: args.docker_cluster,
                port: 9000,
                targets_file: args.docker_targets_file,
            }),
            _ => None,
        },
        catalog,
        mongo_url: args.mongo_url.map(UrlWithCredentials::into_exposed),
        mongo_db: args.mongo_db,
        fault_file: args.provider_fault_file,
    }))
}

/// `--pool-mix` and its settings, checked.
fn mix_config(args: &ResourceArgs, catalog: &Catalog) -> anyhow::Result<Option<MixConfig>> {
    let Some(optimiser) = args.pool_mix else {
        return Ok(None);
    };
    if let Some(t) = args.mix_types.iter().find(|t| catalog.get(t).is_none()) {
        anyhow::bail!("`--mix-types`: `{t}` is not in the catalog");
    }
    if !(1..=MAX_TYPES).contains(&args.mix_types.len()) {
        anyhow::bail!(
            "`--mix-types` takes 1 to {MAX_TYPES} types (ribbon.txt Fig. 8: gains stop beyond three); given {}",
            args.mix_types.len()
        );
    }
    if !(args.mix_budget > 0.0 && args.mix_budget.is_finite()) {
        anyhow::bail!("`--mix-budget` must be a positive number of USD per hour");
    }
    if !(args.mix_qos_ms > 0.0 && args.mix_qos_ms.is_finite()) {
        anyhow::bail!("`--mix-qos-ms` must be a positive number of milliseconds");
    }
    Ok(Some(MixConfig {
        optimiser,
        types: args.mix_types.clone(),
        budget_per_hour: args.mix_budget,
        qos_ms: args.mix_qos_ms,
        max_per_type: args.mix_max_per_type,
    }))
}
