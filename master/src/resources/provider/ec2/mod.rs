//! The EC2 provider (cargo feature `ec2`): instances are EC2 instances running a worker
//! started by their boot script ([`boot`]), tagged with their pool. Every launch is an
//! instant CreateFleet over the chosen type and its alternates (weighted by their
//! packing factors) in every configured subnet: spot with the price-capacity-optimized
//! strategy under the bid, and on-demand when spot finds no capacity. Tested against the
//! moto EC2 server, down to a master whose instances moto "runs" as local workers
//! (`tests/tests/ec2_e2e.rs`).

pub mod boot;

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_ec2::Client;
use aws_sdk_ec2::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceLifecycle, InstanceLifecycleType, InstanceStateName, InstanceType as Ec2Type,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData, ResourceType,
    SpotAllocationStrategy, SpotOptionsRequest, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use base64::Engine as _;
use boot::{Boot, SecretSource};
use cocktail_common::auth::Secret;
use cocktail_common::catalog::{Catalog, InstanceType, SpotPrices, SpotProcess};
use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
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
    /// The cluster CA's certificate (PEM), written by each boot script: the worker serves
    /// HTTPS with a certificate the master signs. `None`: plain HTTP. Set by the server.
    pub cluster_ca: Option<String>,
    pub seed: u64,
    /// Written to each instance's disk (mode 0600) by its boot script, unless
    /// `secret_id` names where the instances read it themselves.
    pub cluster_secret: Option<Secret>,
    /// A Secrets Manager secret with the cluster secret, read by each instance at boot.
    pub secret_id: Option<String>,
    /// Subnets the fleets launch into (none: the default VPC's).
    pub subnets: Vec<String>,
    /// Security groups of the workers (none: the default group).
    pub security_groups: Vec<String>,
    /// The workers' instance profile (its role may read `secret_id`).
    pub instance_profile: Option<String>,
    /// Take each instance's worker host from this tag instead of its private address:
    /// the moto harness, whose instances are local processes (never set it on AWS).
    pub host_tag: Option<String>,
}

impl Ec2Config {
    /// The settings for `endpoint` (a moto server) with test credentials.
    pub fn emulated(endpoint: &str, image_id: &str, master_url: &str) -> Self {
        Self {
            endpoint: Some(endpoint.to_owned()),
            region: "us-east-1".into(),
            credentials: Some(("testing".into(), "testing".into())),
            image_id: image_id.to_owned(),
            master_url: master_url.to_owned(),
            seed: 1,
            cluster_secret: None,
            secret_id: None,
            subnets: Vec::new(),
            security_groups: Vec::new(),
            instance_profile: None,
            host_tag: None,
            cluster_ca: None,
        }
    }

    fn secret_source(&self) -> SecretSource {
        match (&self.secret_id, &self.cluster_secret) {
            (Some(id), _) => SecretSource::SecretsManager {
                id: id.clone(),
                region: self.region.clone(),
            },
            (None, Some(secret)) => SecretSource::Inline(secret.clone()),
            (None, None) => SecretSource::None,
        }
    }
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

/// An AWS SDK error of `call`, with its whole chain of causes.
fn sdk_error<E: std::error::Error>(call: &'static str) -> impl FnOnce(E) -> MasterError {
    move |e| provider_error(call, aws_sdk_ec2::error::DisplayErrorContext(e))
}

impl Ec2Provider {
    /// A provider with AWS's default credential chain (the environment, a profile, the
    /// instance role through IMDS, ...), or the config's static credentials (tests).
    pub async fn new(config: Ec2Config, catalog: Catalog) -> Result<Arc<Self>, MasterError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(config.region.clone()));
        if let Some((key, secret)) = &config.credentials {
            loader = loader.credentials_provider(Credentials::new(
                key.clone(),
                secret.clone(),
                None,
                None,
                "cocktail",
            ));
        }
        if let Some(endpoint) = &config.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let shared = loader.load().await;
        if shared.credentials_provider().is_none() {
            return Err(MasterError::invalid(
                "AWS credentials",
                "none found (environment, profile or instance role)",
            ));
        }
        Ok(Arc::new(Self {
            client: Client::new(&shared),
            fallback: SpotProcess::new(catalog.spot, config.seed),
            catalog,
            config,
            prices: Mutex::new(HashMap::new()),
            templates: tokio::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// The boot script of `model`'s instances ([`boot`]), base64 as EC2 takes it.
    fn user_data(&self, model: &str, vcpus: u32) -> String {
        let secret = self.config.secret_source();
        let script = Boot {
            model,
            threads: vcpus,
            master_url: &self.config.master_url,
            secret: &secret,
            ca: self.config.cluster_ca.as_deref(),
        }
        .script();
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
            .map_err(sdk_error("DescribeSpotPriceHistory"))?;
        let mut prices = self.prices.lock();
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

    /// Launches the capacity of `count` instances of `spec` with one instant CreateFleet,
    /// and on-demand when spot finds none (no capacity, or every price above its bid).
    pub async fn launch_fleet(
        &self,
        spec: &LaunchSpec,
        count: u32,
    ) -> Result<Vec<InstanceRecord>, MasterError> {
        let template = self.template(spec).await?;
        let launched = self.create_fleet(&template, spec, count, spec.spot).await?;
        if !launched.is_empty() || !spec.spot {
            return non_empty(launched);
        }
        tracing::warn!(model = %spec.model, instance_type = %spec.instance_type.name, "no spot capacity under the bid; launching on-demand");
        non_empty(self.create_fleet(&template, spec, count, false).await?)
    }

    async fn create_fleet(
        &self,
        template: &str,
        spec: &LaunchSpec,
        count: u32,
        spot: bool,
    ) -> Result<Vec<InstanceRecord>, MasterError> {
        let subnets: Vec<Option<&str>> = if self.config.subnets.is_empty() {
            vec![None]
        } else {
            self.config
                .subnets
                .iter()
                .map(|s| Some(s.as_str()))
                .collect()
        };
        let types = std::iter::once((&spec.instance_type, 1.0))
            .chain(spec.alternates.iter().map(|(ty, weight)| (ty, *weight)));
        let mut overrides = Vec::new();
        for (ty, weight) in types {
            for subnet in &subnets {
                let mut o = FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(Ec2Type::from(ty.name.as_str()))
                    .weighted_capacity(weight)
                    .set_subnet_id(subnet.map(str::to_owned));
                if spot {
                    o = o.max_price(format!("{:.6}", self.catalog.bid(ty)));
                }
                overrides.push(o.build());
            }
        }
        let capacity_type = if spot {
            DefaultTargetCapacityType::Spot
        } else {
            DefaultTargetCapacityType::OnDemand
        };
        let mut request = self
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
                    .set_overrides(Some(overrides))
                    .build(),
            )
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(count as i32)
                    .default_target_capacity_type(capacity_type)
                    .build(),
            )
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::Instance)
                    .set_tags(Some(self.tags(spec)))
                    .build(),
            );
        if spot {
            request = request.spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            );
        }
        let fleet = request.send().await.map_err(sdk_error("CreateFleet"))?;
        for error in fleet.errors() {
            tracing::warn!(code = ?error.error_code(), message = ?error.error_message(), spot, "CreateFleet could not launch an override");
        }
        let mut records = Vec::new();
        for launched in fleet.instances() {
            let ty = launched
                .instance_type()
                .and_then(|t| self.catalog.get(t.as_str()))
                .unwrap_or(&spec.instance_type);
            let on_spot = launched
                .lifecycle()
                .map_or(spot, |l| *l == InstanceLifecycle::Spot);
            let price = if on_spot {
                self.spot_price(ty)
            } else {
                ty.on_demand_per_hour
            };
            for id in launched.instance_ids() {
                let record = InstanceRecord {
                    instance_type: ty.name.clone(),
                    spot: on_spot,
                    price_per_hour: price,
                    ..InstanceRecord::provisioning(id.clone(), spec)
                };
                if (record.instance_type.as_str(), record.spot)
                    != (spec.instance_type.name.as_str(), spec.spot)
                {
                    self.retag_price(&record).await;
                }
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Corrects the price tag of an instance that a fleet launched as an alternate type or
    /// on-demand (the request tagged every instance with the chosen type's price).
    async fn retag_price(&self, record: &InstanceRecord) {
        let tagged = self
            .client
            .create_tags()
            .resources(&record.id)
            .tags(
                Tag::builder()
                    .key(TAG_PRICE)
                    .value(format!("{:.6}", record.price_per_hour))
                    .build(),
            )
            .send()
            .await;
        if let Err(e) = tagged {
            tracing::warn!(id = %record.id, error = %aws_sdk_ec2::error::DisplayErrorContext(e), "price tag not corrected");
        }
    }

    /// The pool's launch template (image, user data, tags), created once.
    async fn template(&self, spec: &LaunchSpec) -> Result<String, MasterError> {
        let mut templates = self.templates.lock().await;
        if let Some(id) = templates.get(&spec.model) {
            return Ok(id.clone());
        }
        let name = format!("cocktail-{}", spec.model);
        // IMDSv2 only: the boot script and the spot-notice poller use session tokens.
        let data = RequestLaunchTemplateData::builder()
            .image_id(&self.config.image_id)
            .user_data(self.user_data(&spec.model, spec.instance_type.vcpus))
            .set_security_group_ids(
                (!self.config.security_groups.is_empty())
                    .then(|| self.config.security_groups.clone()),
            )
            .set_iam_instance_profile(self.config.instance_profile.as_ref().map(|name| {
                LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                    .name(name)
                    .build()
            }))
            .metadata_options(
                LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .build(),
            )
            .build();
        let created = self
            .client
            .create_launch_template()
            .launch_template_name(&name)
            .tag_specifications(
                TagSpecification::builder()
                    .resource_type(ResourceType::LaunchTemplate)
                    .tags(Tag::builder().key(TAG_MANAGED).value("true").build())
                    .tags(Tag::builder().key(TAG_POOL).value(&spec.model).build())
                    .build(),
            )
            .launch_template_data(data.clone())
            .send()
            .await;
        let id = match created {
            Ok(created) => created
                .launch_template()
                .and_then(|t| t.launch_template_id())
                .map(str::to_owned),
            // An earlier master made it (a restart): a new version with this master's
            // boot script, which fleets take as `$Latest`.
            Err(e)
                if e.as_service_error()
                    .and_then(|s| s.meta().code())
                    .is_some_and(|c| c.contains("AlreadyExists")) =>
            {
                self.new_template_version(&name, data).await?
            }
            Err(e) => return Err(sdk_error("CreateLaunchTemplate")(e)),
        }
        .ok_or_else(|| provider_error("CreateLaunchTemplate", "no template id"))?;
        templates.insert(spec.model.clone(), id.clone());
        Ok(id)
    }

    /// Adds `data` as the newest version of the launch template `name`; its id.
    async fn new_template_version(
        &self,
        name: &str,
        data: RequestLaunchTemplateData,
    ) -> Result<Option<String>, MasterError> {
        let version = self
            .client
            .create_launch_template_version()
            .launch_template_name(name)
            .launch_template_data(data)
            .send()
            .await
            .map_err(sdk_error("CreateLaunchTemplateVersion"))?;
        Ok(version
            .launch_template_version()
            .and_then(|v| v.launch_template_id())
            .map(str::to_owned))
    }
}

impl Provider for Ec2Provider {
    fn name(&self) -> &'static str {
        "ec2"
    }

    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>> {
        async move { self.launch_fleet(&spec, 1).await }.boxed()
    }

    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>> {
        async move {
            self.client
                .terminate_instances()
                .instance_ids(id)
                .send()
                .await
                .map_err(sdk_error("TerminateInstances"))?;
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
                .map_err(sdk_error("StopInstances"))?;
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
                .map_err(sdk_error("StartInstances"))?;
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
                .map_err(sdk_error("DescribeInstances"))?;
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
                    price_per_hour: self.price_tag(
                        instance.instance_id().unwrap_or_default(),
                        tag(TAG_PRICE),
                        instance.instance_type().map(|t| t.as_str()),
                    ),
                    status,
                    launched_at: instance.launch_time().map_or(0.0, |t| t.secs() as f64),
                    terminated_at: (status == InstanceStatus::Terminated).then(super::now_s),
                    stopped_s: 0.0,
                    stopped_at: (status == InstanceStatus::Stopped).then(super::now_s),
                    host: self
                        .config
                        .host_tag
                        .as_deref()
                        .and_then(tag)
                        .or_else(|| instance.private_ip_address().map(str::to_owned)),
                });
            }
            records.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(records)
        }
        .boxed()
    }

    fn spot_price(&self, ty: &InstanceType) -> f64 {
        let cached = self.prices.lock().get(&ty.name).copied();
        cached.unwrap_or_else(|| self.fallback.price(ty, 0.0))
    }

    /// On EC2 the workers read the spot notice from the instance metadata and tell the
    /// master (`/v1/workers/notice`), which hands it to the controller.
    fn interruptions(&self) -> Option<mpsc::Receiver<Interruption>> {
        None
    }
}

impl Ec2Provider {
    /// The hourly price an instance was launched at, from its tag. An instance without
    /// a readable tag (launched by hand, or a tag edited) is priced at its type's
    /// on-demand price, the most it can cost, and said so: never at $0.
    fn price_tag(&self, id: &str, tag: Option<String>, instance_type: Option<&str>) -> f64 {
        if let Some(price) = tag
            .as_deref()
            .and_then(|p| p.parse::<f64>().ok())
            .filter(|p| p.is_finite() && *p >= 0.0)
        {
            return price;
        }
        let on_demand = instance_type
            .and_then(|t| self.catalog.get(t))
            .map(|t| t.on_demand_per_hour);
        tracing::warn!(%id, ?tag, ?instance_type, ?on_demand,
            "instance has no readable price tag: priced at its type's on-demand price");
        metrics::counter!("cocktail_master_unpriced_instances_total").increment(1);
        // A type outside the catalog: the catalog's dearest type bounds what it costs.
        on_demand.unwrap_or_else(|| {
            self.catalog
                .types
                .iter()
                .map(|t| t.on_demand_per_hour)
                .fold(0.0, f64::max)
        })
    }
}

/// A fleet that launched nothing is an error naming why (its errors are logged).
fn non_empty(records: Vec<InstanceRecord>) -> Result<Vec<InstanceRecord>, MasterError> {
    if records.is_empty() {
        return Err(provider_error(
            "CreateFleet",
            "no instance launched (no capacity for any type, spot or on-demand)",
        ));
    }
    Ok(records)
}
