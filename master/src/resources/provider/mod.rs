//! Where instances come from. A provider launches, lists and terminates instances, knows
//! their spot prices and reports spot interruptions. `local` runs real worker processes
//! on this host and `docker` containers, both in a cloud emulated here (`emulated`);
//! `ec2` (feature `ec2`) uses the AWS SDK.

pub mod docker;
#[cfg(feature = "ec2")]
pub mod ec2;
pub mod emulated;
pub mod faulty;
pub mod local;

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use cocktail_common::catalog::InstanceType;

use crate::MasterError;

/// What to launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    pub model: String,
    pub instance_type: InstanceType,
    pub spot: bool,
    /// The price when launched (spot or on-demand), USD per hour.
    pub price_per_hour: f64,
    /// Types a fleet may launch instead, with their capacity relative to this one
    /// ([`cocktail_policy::autoscale::alternates`]); providers without fleets ignore them.
    pub alternates: Vec<(InstanceType, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    Provisioning,
    Running,
    /// Revoked with a notice; it goes away when the notice runs out.
    Interrupted,
    /// Stopped, not billed, can be started again (a cold standby).
    Stopped,
    /// Serves nothing on its own account (its worker process exited); billed until the
    /// controller terminates it.
    Failed,
    Terminated,
}

/// One instance as the provider knows it. Times are seconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InstanceRecord {
    pub id: String,
    pub model: String,
    pub instance_type: String,
    pub spot: bool,
    pub price_per_hour: f64,
    pub status: InstanceStatus,
    pub launched_at: f64,
    pub terminated_at: Option<f64>,
    /// Seconds spent stopped so far (not billed), and since when it is stopped now.
    pub stopped_s: f64,
    pub stopped_at: Option<f64>,
    /// The host its worker listens on (an address or a name), once known: a worker may
    /// register as this instance only at this host.
    pub host: Option<String>,
}

impl InstanceRecord {
    /// A just-launched instance of `spec`.
    pub fn provisioning(id: String, spec: &LaunchSpec) -> Self {
        Self {
            id,
            model: spec.model.clone(),
            instance_type: spec.instance_type.name.clone(),
            spot: spec.spot,
            price_per_hour: spec.price_per_hour,
            status: InstanceStatus::Provisioning,
            launched_at: now_s(),
            terminated_at: None,
            stopped_s: 0.0,
            stopped_at: None,
            host: None,
        }
    }

    /// What it has cost so far (per-second billing).
    pub fn cost(&self, now: f64) -> f64 {
        let end = self.stopped_at.or(self.terminated_at).unwrap_or(now);
        (end - self.launched_at - self.stopped_s).max(0.0) / 3600.0 * self.price_per_hour
    }

    pub fn is_live(&self) -> bool {
        !matches!(self.status, InstanceStatus::Terminated)
    }
}

/// A spot interruption: the instance goes away after the notice.
#[derive(Debug, Clone, PartialEq)]
pub struct Interruption {
    pub id: String,
    pub model: String,
    pub instance_type: String,
    pub reason: String,
    /// Time left before the instance goes.
    pub notice: std::time::Duration,
}

pub trait Provider: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// Starts the capacity of one instance of `spec` (a fleet may meet it with several
    /// smaller ones of an alternate type); each is `Provisioning` until its worker is up.
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>>;
    /// Stops an instance (its worker drains first).
    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>>;
    /// Stops an instance so it can be started again later (not billed meanwhile).
    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>>;
    /// Starts a stopped instance.
    fn start<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), MasterError>>;
    /// Every instance launched, terminated ones included.
    fn describe(&self) -> BoxFuture<'_, Result<Vec<InstanceRecord>, MasterError>>;
    /// The spot price of `ty` now, USD per hour.
    fn spot_price(&self, ty: &InstanceType) -> f64;
    /// Spot interruption notices; `None` after the first call.
    fn interruptions(&self) -> Option<mpsc::Receiver<Interruption>>;
    /// The master is stopping and has terminated its instances: removes whatever of them
    /// is still left (a termination still under way).
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Seconds since the Unix epoch.
pub fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
