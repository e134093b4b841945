//! The resource controller's flags ([`crate::ResourceArgs`]) checked and turned into its
//! configuration: a module of the `cocktail-master` binary, apart from `main.rs` so that
//! the flags' definitions stay readable on their own.

use std::path::PathBuf;
use std::time::Duration;

use cocktail_common::auth::Secret;
use cocktail_common::catalog::Catalog;
use cocktail_common::redact::UrlWithCredentials;
use cocktail_master::resources::controller::{ControllerConfig, MixConfig, Policy};
use cocktail_master::resources::provider::docker::DockerConfig;
use cocktail_master::resources::provider::local::LocalConfig;
use cocktail_master::server::Resources;
use cocktail_policy::autoscale::AutoscaleConfig;
use cocktail_policy::control::ControlConfig;
use cocktail_policy::mix::MAX_TYPES;

use crate::{ProviderKind, ResourceArgs};

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
