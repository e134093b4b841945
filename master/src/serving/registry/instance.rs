//! One worker instance: its slots and the signals of its health.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use cocktail_policy::packing::Slots;

#[derive(Debug)]
pub struct Instance {
    pub id: String,
    pub model: String,
    pub url: String,
    /// `{url}/v2/models/{model}/infer`, parsed once at registration rather than by
    /// every member call.
    pub infer_url: http::Uri,
    /// The calls it takes at once: its registered packing factor, or more for a quick
    /// model when the registry counts the hop ([`cocktail_common::latency::HopSlots`]).
    pub packing_factor: u32,
    /// A burst instance serves only what the regular ones cannot take at once.
    pub burst: bool,
    /// Its instance type, when the worker said.
    pub instance_type: Option<String>,
    pub(super) in_flight: AtomicU32,
    pub(super) draining: AtomicBool,
    pub(super) down: AtomicBool,
    /// Calls in a row that got no answer in time (reset by an answer or a heartbeat).
    pub(super) unanswered: AtomicU32,
    pub(super) last_seen: Mutex<Instant>,
    /// When a request last took a slot (registration time before that).
    pub(super) last_used: Mutex<Instant>,
    /// Its calls under way and those waiting to join them ([`crate::serving::dispatch`]).
    pub line: crate::serving::dispatch::Line,
}

impl Instance {
    pub(super) fn slots(&self) -> Slots {
        Slots {
            packing_factor: self.packing_factor,
            in_flight: self.in_flight.load(Ordering::Acquire),
            available: !self.draining.load(Ordering::Acquire)
                && !self.down.load(Ordering::Acquire)
                && self.unanswered.load(Ordering::Acquire) < UNANSWERED_LIMIT,
        }
    }

    /// Whether this instance is one of `list` (this registration, not an equal one).
    pub(super) fn is_in(&self, list: &[Arc<Self>]) -> bool {
        list.iter().any(|e| std::ptr::eq(Arc::as_ptr(e), self))
    }

    /// Takes a slot if one is free.
    pub(super) fn try_take(&self) -> bool {
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.packing_factor).then_some(n + 1)
            })
            .is_ok()
    }

    /// The instance refused a connection: no work until it heartbeats again.
    pub(super) fn mark_down(&self) {
        self.down.store(true, Ordering::Release);
    }

    /// The worker answered (whatever it said): it is alive.
    pub(super) fn answered(&self) {
        self.unanswered.store(0, Ordering::Release);
    }
}

/// Calls in a row an instance may leave unanswered before it gets no more work until its
/// next heartbeat: a hung worker (SIGSTOP, a stuck runtime) stops taking requests within
/// a few calls instead of eating every request's deadline.
pub const UNANSWERED_LIMIT: u32 = 3;
