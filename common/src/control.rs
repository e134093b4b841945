//! The control plane between workers and the master: JSON bodies of
//! `POST /v1/workers/{register,heartbeat,notice,deregister}` on the master.
//!
//! A worker registers when it is ready, then heartbeats every `heartbeat_ms`. The master
//! forgets an instance that misses [`MISSED_HEARTBEATS`] heartbeats; a heartbeat for an
//! instance the master does not know gets 404, and the worker registers again (the
//! master restarted). A spot interruption notice or SIGTERM marks the instance draining:
//! the master sends it no new work.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The largest count a control-plane field takes (`u32::MAX`); `/openapi.json` states it
/// and the master refuses more.
pub const MAX_COUNT: usize = 4_294_967_295;

/// Heartbeats an instance may miss before the master drops it.
pub const MISSED_HEARTBEATS: u32 = 3;

/// `POST /v1/workers/register`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct Registration {
    /// Unique per worker process (default `MODEL@URL`).
    #[schema(min_length = 1, max_length = 256)]
    pub id: String,
    /// The zoo model it serves.
    pub model: String,
    /// Base URL the master reaches it at, e.g. `http://10.0.0.5:9000`.
    #[schema(pattern = "^https?://")]
    pub url: String,
    /// Requests it serves at once within the latency target (Cocktail §4.2.1).
    #[serde(deserialize_with = "crate::whole::one")]
    #[schema(value_type = u64, maximum = 4_294_967_295_u64)]
    pub packing_factor: u32,
    /// Items it queues beyond those in service before answering 429.
    #[serde(deserialize_with = "crate::whole::one")]
    #[schema(maximum = 4_294_967_295_u64)]
    pub queue_items: usize,
    /// ONNX Runtime intra-op threads (the emulated instance size).
    #[serde(deserialize_with = "crate::whole::one")]
    #[schema(maximum = 4_294_967_295_u64)]
    pub threads: usize,
    /// A burst instance (MArk's Lambda): it gets only the requests the regular
    /// instances of its pool cannot take at once.
    #[serde(default)]
    pub burst: bool,
    /// The instance type it runs on (`c5a.xlarge`), when known: pools that mix types
    /// spread batched queries by Kairos' matching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
}

/// The master's answer to a registration.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct Registered {
    /// How often the master expects heartbeats.
    pub heartbeat_ms: u64,
}

/// `POST /v1/workers/heartbeat`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct Heartbeat {
    pub id: String,
    /// Items in service or queued right now.
    #[serde(deserialize_with = "crate::whole::one")]
    #[schema(maximum = 4_294_967_295_u64)]
    pub in_flight: usize,
    pub draining: bool,
}

/// `POST /v1/workers/notice`: the instance will go away (spot interruption, SIGTERM).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct Notice {
    pub id: String,
    /// `terminate`, `stop` or `hibernate` from the spot notice, `rebalance` for a
    /// capacity-rebalance recommendation, or `shutdown`.
    pub action: String,
    /// When it happens (RFC 3339), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// `POST /v1/workers/deregister`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct Deregistration {
    pub id: String,
}
