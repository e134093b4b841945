//! The EC2 provider (cargo feature `ec2`): instances are EC2 instances running a worker
//! started by user data, tagged with their pool. Spot through RunInstances market
//! options (one instance) or CreateFleet with an allocation strategy (several at once),
//! on-demand otherwise. Tested against the moto EC2 server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::Client;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceLifecycleType, InstanceMarketOptionsRequest, InstanceStateName,
    InstanceType as Ec2Type, MarketType, RequestLaunchTemplateData, ResourceType,
    SpotAllocationStrategy, SpotMarketOptions, SpotOptionsRequest, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use base64::Engine as _;
use cocktail_common::auth::Secret;
use cocktail_common::catalog::{Catalog, InstanceType, SpotPrices, SpotProcess};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::{InstanceRecord, InstanceStatus, Interruption, LaunchSpec, Provider};
use crate::MasterError;

/// Tags on every instance this provider launches.
pub const TAG_MANAGED: &str = "cocktail:managed";
pub const TAG_POOL: &str = "cocktail:pool";
pub const TAG_PRICE: &str = "cocktail:price";

#[derive(Debug, Clone)]
pub struct Ec2Config {
    /// Another endpoint than AWS's (the moto server in tests).
    pub endpoint: Option<String>,
    pub region: String,
    /// Static credentials (tests); `None` reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
    pub credentials: Option<(String, String)>,
    /// The AMI with `cocktail-worker` installed.
    pub image_id: String,
    /// The master URL the workers register with (reachable from the instances).
    pub master_url: String,
    pub seed: u64,
    /// Written to each instance's disk (mode 0600) by its boot script.
    pub cluster_secret: Option<Secret>,
}

#[derive(Debug)]
pub struct Ec2Provider {
    client: Client,
    config: Ec2Config,
    catalog: Catalog,
    /// Latest spot prices from DescribeSpotPriceHistory, by type.
    prices: Mutex<HashMap<String, f64>>,
    fallback: SpotProcess,
    /// Launch template per pool, for CreateFleet.
    templates: tokio::sync::Mutex<HashMap<String, String>>,
}

fn provider_error(call: &str, e: impl std::fmt::Display) -> MasterError {
    MasterError::Provider(format!("EC2 {call}: {e}"))
}

impl Ec2Provider {
    pub fn new(config: Ec2Config, catalog: Catalog) -> Result<Arc<Self>, MasterError> {
        let (key, secret) = match &config.credentials {
            Some(pair) => pair.clone(),
            None => (
                std::env::var("AWS_ACCESS_KEY_ID")
                    .map_err(|_| MasterError::invalid("AWS_ACCESS_KEY_ID", "is not set"))?,
                std::env::var("AWS_SECRET_ACCESS_KEY")
                    .map_err(|_| MasterError::invalid("AWS_SECRET_ACCESS_KEY", "is not set"))?,
            ),
        };
        let mut builder = aws_sdk_ec2::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(config.region.clone()))
            .credentials_provider(Credentials::new(key, secret, None, None, "cocktail"));
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Ok(Arc::new(Self {
            client: Client::from_conf(builder.build()),
            fallback: SpotProcess::new(catalog.spot, config.seed),
            catalog,
            config,
            prices: Mutex::new(HashMap::new()),
            templates: tokio::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// The boot script: start the worker for `model`, named after the instance, pointed
    /// at the master, watching the spot notice. The cluster secret goes to a file only
    /// root and the worker read; the user data itself stays readable through the
    /// instance metadata service (docs/security.md).
    fn user_data(&self, model: &str, vcpus: u32) -> String {
        let secret = match &self.config.cluster_secret {
            Some(secret) => format!(
                "install -d -m 700 /etc/cocktail\n\
                 (umask 077; printf '%s' '{}' > /etc/cocktail/cluster-secret)\n",
                secret.expose().replace('\'', "'\\''")
            ),
            None => String::new(),
        };
        let secret_flag = if self.config.cluster_secret.is_some() {
            " --cluster-secret-file /etc/cocktail/cluster-secret"
        } else {
            ""
        };
        let script = format!(
            "#!/bin/bash\n\
             {secret}\
             IMDS=http://169.254.169.254\n\
             TOKEN=$(curl -s -X PUT $IMDS/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')\n\
             ID=$(curl -s -H \"X-aws-ec2-metadata-token: $TOKEN\" $IMDS/latest/meta-data/instance-id)\n\
             IP=$(curl -s -H \"X-aws-ec2-metadata-token: $TOKEN\" $IMDS/latest/meta-data/local-ipv4)\n\
             exec cocktail-worker --model {model} --host 0.0.0.0 --port 9000 --threads {vcpus} \
             --master {master} --id \"$ID\" --advertise-url \"http://$IP:9000\" --imds-url $IMDS{secret_flag}\n",
            master = self.config.master_url,
        );
        base64::engine::general_purpose::STANDARD.encode(script)
    }

    fn tags(&self, spec: &LaunchSpec) -> Vec<Tag> {
        vec![
            Tag::builder().key(TAG_MANAGED).value("true").build(),
            Tag::builder().key(TAG_POOL).value(&spec.model).build(),
            Tag::builder()
                .key(TAG_PRICE)
                .value(format!("{:.6}", spec.price_per_hour))
                .build(),
        ]
    }

    /// Refreshes the spot price cache from DescribeSpotPriceHistory.
    pub async fn refresh_prices(&self) -> Result<(), MasterError> {
        let types: Vec<Ec2Type> = self
            .catalog
            .types
            .iter()
            .map(|t| Ec2Type::from(t.name.as_str()))
            .collect();
        let history = self
            .client
            .describe_spot_price_history()
            .set_instance_types(Some(types))
            .product_descriptions("Linux/UNIX")
            .send()
            .await
            .map_err(|e| {
                provider_error(
                    "DescribeSpotPriceHistory",
                    aws_sdk_ec2::error::DisplayErrorContext(e),
                )
            })?;
        let mut prices = self.prices.lock().unwrap_or_else(|p| p.into_inner());
        for entry in history.spot_price_history() {
            if let (Some(ty), Some(price)) = (
                entry.instance_type(),
                entry.spot_price().and_then(|p| p.parse::<f64>().ok()),
            ) {
                prices.insert(ty.as_str().to_owned(), price);
            }
        }
        Ok(())
    }

    /// Launches `count` instances at once with CreateFleet (type `instant`), spot with the
    /// price-capacity-optimized allocation strategy or on-demand.
    pub async fn launch_fleet(
        &self,
        spec: &LaunchSpec,
        count: u32,
    ) -> Result<Vec<InstanceRecord>, MasterError> {
        let template = self.template(spec).await?;
        let capacity_type = if spec.spot {
            DefaultTargetCapacityType::Spot
        } else {
            DefaultTargetCapacityType::OnDemand
        };
        let fleet = self
            .client
            .create_fleet()
            .r#type(FleetType::Instant)
            .launch_template_configs(
                FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_id(template)
                            .version("$Latest")
                            .build(),
                    )
                    .overrides(
                        FleetLaunchTemplateOverridesRequest::builder()
                            .instance_type(Ec2Type::from(spec.instance_type.name.as_str()))
                            .max_price(format!("{:.6}", self.catalog.bid(&spec.instance_type)))
                            .build(),
                    )
                    .build(),
            )
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(count as i32)
                    .default_target_capacity_type(capacity_type)
                    .build(),
            )
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            )
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .set_tags(Some(self.tags(spec)))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| {
                provider_error("CreateFleet", aws_sdk_ec2::error::DisplayErrorContext(e))
            })?;
        Ok(fleet
            .instances()
            .iter()
            .flat_map(|i| i.instance_ids().iter())
            .map(|id| InstanceRecord::provisioning(id.clone(), spec))
            .collect())
    }

    /// The pool's launch template (image, user data, tags), created once.
    async fn template(&self, spec: &LaunchSpec) -> Result<String, MasterError> {
        let mut templates = self.templates.lock().await;
        if let Some(id) = templates.get(&spec.model) {
            return Ok(id.clone());
        }
        let created = self
            .client
            .create_launch_template()
            .launch_template_name(format!("cocktail-{}", spec.model))
            .launch_template_data(
                RequestLaunchTemplateData::builder()
                    .image_id(&self.config.image_id)
                    .user_data(self.user_data(&spec.model, spec.instance_type.vcpus))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| {
                provider_error(
                    "CreateLaunchTemplate",
                    aws_sdk_ec2::error::DisplayErrorContext(e),
                )
            })?;
        let id = created
            .launch_template()
            .and_then(|t| t.launch_template_id())
            .ok_or_else(|| provider_error("CreateLaunchTemplate", "no template id"))?
            .to_owned();
        templates.insert(spec.model.clone(), id.clone());
        Ok(id)
    }
}

impl Provider for Ec2Provider {
    fn name(&self) -> &'static str {
        "ec2"
    }

    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<InstanceRecord, MasterError>> {
        async move {
            let mut request = self
                .client
                .run_instances()
                .image_id(&self.config.image_id)
                .instance_type(Ec2Type::from(spec.instance_type.name.as_str()))
                .min_count(1)
                .max_count(1)
                .user_data(self.user_data(&spec.model, spec.instance_type.vcpus))
                .tag_specifications(
                    TagSpecification::builder()
                        .resource_type(ResourceType::Instance)
                        .set_tags(Some(self.tags(&spec)))
                        .build(),
                );
            if spec.spot {
                request = request.instance_market_options(
                    InstanceMarketOptionsRequest::builder()
                        .market_type(MarketType::Spot)
                        .spot_options(
                            SpotMarketOptions::builder()
                                .max_price(format!("{:.6}", self.catalog.bid(&spec.instance_type)))
                                .build(),
                        )
                        .build(),
                );
            }
            let out = request.send().await.map_err(|e| {
                provider_error("RunInstances", aws_sdk_ec2::error::DisplayErrorContext(e))
            })?;
            let id = out
                .instances()
                .first()
                .and_then(|i| i.instance_id())
                .ok_or_else(|| provider_error("RunInstances", "no instance in the answer"))?;
            Ok(InstanceRecord::provisioning(id.to_owned(), &spec))
        }
        .boxed()
    }

    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        async move {
            self.client
                .terminate_instances()
                .instance_ids(id)
                .send()
                .await
                .map_err(|e| {
                    provider_error(
                        "TerminateInstances",
                        aws_sdk_ec2::error::DisplayErrorContext(e),
                    )
                })?;
            Ok(())
        }
        .boxed()
    }

    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        async move {
            self.client
                .stop_instances()
                .instance_ids(id)
                .send()
                .await
                .map_err(|e| {
                    provider_error("StopInstances", aws_sdk_ec2::error::DisplayErrorContext(e))
                })?;
            Ok(())
        }
        .boxed()
    }

    fn start<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        async move {
            self.client
                .start_instances()
                .instance_ids(id)
                .send()
                .await
                .map_err(|e| {
                    provider_error("StartInstances", aws_sdk_ec2::error::DisplayErrorContext(e))
                })?;
            Ok(())
        }
        .boxed()
    }

    fn describe(&self) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        async move {
            let out = self
                .client
                .describe_instances()
                .filters(
                    Filter::builder()
                        .name(format!("tag:{TAG_MANAGED}"))
                        .values("true")
                        .build(),
                )
                .send()
                .await
                .map_err(|e| {
                    provider_error(
                        "DescribeInstances",
                        aws_sdk_ec2::error::DisplayErrorContext(e),
                    )
                })?;
            let mut records = Vec::new();
            for instance in out.reservations().iter().flat_map(|r| r.instances()) {
                let tag = |key: &str| {
                    instance
                        .tags()
                        .iter()
                        .find(|t| t.key() == Some(key))
                        .and_then(|t| t.value())
                        .map(str::to_owned)
                };
                let status = match instance.state().and_then(|s| s.name()) {
                    Some(InstanceStateName::Pending) => InstanceStatus::Provisioning,
                    Some(InstanceStateName::Running) => InstanceStatus::Running,
                    Some(InstanceStateName::Stopping | InstanceStateName::Stopped) => {
                        InstanceStatus::Stopped
                    }
                    _ => InstanceStatus::Terminated,
                };
                records.push(InstanceRecord {
                    id: instance.instance_id().unwrap_or_default().to_owned(),
                    model: tag(TAG_POOL).unwrap_or_default(),
                    instance_type: instance
                        .instance_type()
                        .map(|t| t.as_str().to_owned())
                        .unwrap_or_default(),
                    spot: instance.instance_lifecycle() == Some(&InstanceLifecycleType::Spot),
                    price_per_hour: tag(TAG_PRICE).and_then(|p| p.parse().ok()).unwrap_or(0.0),
                    status,
                    launched_at: instance.launch_time().map_or(0.0, |t| t.secs() as f64),
                    terminated_at: (status == InstanceStatus::Terminated).then(super::now_s),
                    stopped_s: 0.0,
                    stopped_at: (status == InstanceStatus::Stopped).then(super::now_s),
                    host: instance.private_ip_address().map(str::to_owned),
                });
            }
            records.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(records)
        }
        .boxed()
    }

    fn spot_price(&self, ty: &InstanceType) -> f64 {
        let cached = self
            .prices
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ty.name)
            .copied();
        cached.unwrap_or_else(|| self.fallback.price(ty, 0.0))
    }

    /// On EC2 the workers read the spot notice from the instance metadata and tell the
    /// master (`/v1/workers/notice`), which hands it to the controller.
    fn interruptions(&self) -> Option<mpsc::Receiver<Interruption>> {
        None
    }
}
