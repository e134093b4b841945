//! How a master runs; `main` fills it from flags and environment.

use std::path::PathBuf;
use std::time::Duration;

use cocktail_common::auth::Secret;
use cocktail_common::latency::HopSlots;
use cocktail_policy::autoscale::AutoscaleConfig;

use cocktail_policy::selection::{Rule, SelectionConfig};
use cocktail_policy::tracking::{Knobs, TrackingConfig};
use cocktail_policy::voting::Scheme;

/// `--join-calls-us`'s default: a millisecond, the resolution of tokio's timer (a shorter
/// wait would last as long) and 2-5 times a fast model's member call on the machines
/// measured (`master-bench`).
pub const LINGER_US: u64 = 1000;

/// How often O2 revisits each constraint's ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Every(Duration),
    /// After this many requests of the constraint (deterministic, for tests).
    Requests(u64),
}

/// As every answer reports it: `{"seconds": s}` or `{"requests": n}`.
impl serde::Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            Self::Every(d) => map.serialize_entry("seconds", &d.as_secs_f64())?,
            Self::Requests(n) => map.serialize_entry("requests", n)?,
        }
        map.end()
    }
}

#[derive(Debug, Clone)]
pub struct MasterConfig {
    pub zoo: Option<PathBuf>,
    /// `redis://host:port`; `None` keeps the model cache in this process.
    pub redis_url: Option<String>,
    /// Lifetime of a cached selection without use.
    pub cache_ttl: Duration,
    /// How long a Redis call may take before it counts as a miss.
    pub redis_timeout: Duration,
    pub interval: Interval,
    pub selection: SelectionConfig,
    pub scheme: Scheme,
    /// Added to the latency target to form each member's deadline (default 0: the
    /// answer is due at the latency target, with the members that answered by then). An
    /// answer after the target is an SLO violation either way.
    pub deadline_grace: Duration,
    /// Expected worker heartbeat period; instances silent for 3 periods are dropped.
    pub heartbeat: Duration,
    /// Weight of the manifest's per-class accuracy, in observations, when seeding the
    /// runtime correctness table.
    pub weight_prior: f64,
    /// Every n-th unlabelled request is also sent to the unused candidates; each candidate's
    /// weights learn what the others agree on (0: never). O2 uses real labels only.
    pub pseudo_label_every: u64,
    /// Under `--selection measured` or `tracking`, every n-th request is also sent to the
    /// candidates outside the ensemble, to fill the constraint's buffer or its tracker's
    /// window once its label is known (0: never).
    pub shadow_every: u64,
    /// Under `--selection tracking`, the margin, shift check and pacing of each
    /// constraint's tracker (`--tracking-margin`, `--no-shift-check`, `--pace`).
    pub knobs: Knobs,
    /// Answered requests remembered for `/v1/feedback`.
    pub feedback_capacity: usize,
    pub http_workers: usize,
    /// Multiplies the models' profiled latencies (selection's candidates, the
    /// controller's capacity and per-type latency) and the modelled batch latencies of
    /// Kairos' matching, to match workers that emulate their types `--emulate-scale`
    /// times slower.
    pub speed_scale: f64,
    /// Presented on every call to a worker (workers started with it refuse others).
    pub cluster_secret: Option<Secret>,
    /// The CAs trusted for https workers' certificates: the cluster's own (which signs
    /// provider-launched workers') and `--tls-ca`.
    pub tls_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// The earliest a slow member is hedged (on another instance or with a substitute).
    pub hedge_min: Duration,
    /// How inputs and answers travel between the master and its members.
    pub member_wire: crate::serving::request::MemberWire,
    /// Member calls of models whose inference takes at most this long wait, while
    /// another call to the same instance is under way, for it to end (at most this long)
    /// and go out joined (zero: every call goes alone).
    pub linger: Duration,
    /// A member call's cost besides inference (`--overhead-ms`), which instances of
    /// those models count in the calls they take at once ([`MasterConfig::hop_slots`]).
    pub hop: Duration,
}

impl MasterConfig {
    /// How many calls an instance takes at once, counting the hop for the models whose
    /// calls join: the registry and the controller's capacity plans count the same.
    pub fn hop_slots(&self) -> HopSlots {
        HopSlots {
            linger_ms: self.linger.as_secs_f64() * 1e3,
            hop_ms: self.hop.as_secs_f64() * 1e3,
        }
    }

    /// Under `--selection tracking`, how each constraint's tracker follows the traffic:
    /// scoring votes by the rule the master votes with, re-selecting every
    /// `--interval-requests` requests (the tracker's own 100 when the interval is given
    /// in seconds).
    pub fn tracking(&self) -> Option<TrackingConfig> {
        let interval = match self.interval {
            Interval::Requests(n) => Some(n),
            Interval::Every(_) => None,
        };
        (self.selection.rule == Rule::Tracking)
            .then(|| TrackingConfig::serving(self.scheme.rule(), interval, self.knobs))
    }
}

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            zoo: None,
            redis_url: None,
            cache_ttl: Duration::from_secs(3600),
            redis_timeout: Duration::from_millis(20),
            interval: Interval::Every(Duration::from_secs(30)),
            selection: SelectionConfig::default(),
            scheme: Scheme::Majority,
            deadline_grace: Duration::ZERO,
            heartbeat: Duration::from_secs(1),
            weight_prior: 100.0,
            pseudo_label_every: 10,
            shadow_every: 20,
            knobs: Knobs::default(),
            feedback_capacity: 65_536,
            http_workers: 2,
            speed_scale: 1.0,
            cluster_secret: None,
            tls_roots: Vec::new(),
            hedge_min: crate::serving::failover::HEDGE_MIN,
            member_wire: crate::serving::request::MemberWire::default(),
            linger: Duration::from_micros(LINGER_US),
            hop: Duration::from_secs_f64(AutoscaleConfig::default().overhead_ms / 1e3),
        }
    }
}
