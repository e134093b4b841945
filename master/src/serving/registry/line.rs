//! First come, first served among the calls waiting for a pool's slots. A freed slot
//! wakes every waiter (any of them may be the one that can use it, see
//! [`super::Lease`]'s drop); without an order the fastest to wake took it, so under
//! overload some calls waited a few hundred ms and others, older, until their deadline
//! (`tests/tests/overload.rs` measured waits of 0.24 to over 1 s at the same place in
//! the queue). Written by hand: a slot here is on one of several instances, a call may
//! exclude the instances it already tried, and the packing chooses among the free ones,
//! which a semaphore cannot express.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::Instance;

/// The calls waiting for a pool's slots, oldest first.
#[derive(Debug, Default)]
pub(super) struct Line {
    waiting: Mutex<Vec<Place>>,
}

#[derive(Debug)]
struct Place {
    id: u64,
    /// The instances this call already tried (it takes no slot on them).
    exclude: Vec<Arc<Instance>>,
}

impl Place {
    fn can_use(&self, instance: &Arc<Instance>) -> bool {
        !self.exclude.iter().any(|e| Arc::ptr_eq(e, instance))
    }
}

impl Line {
    /// Joins the line as call `id` (ids grow with time); leaves it on drop.
    pub(super) fn join<'a>(
        &'a self,
        id: u64,
        exclude: &[Arc<Instance>],
        freed: &'a Notify,
    ) -> InLine<'a> {
        self.waiting.lock().push(Place {
            id,
            exclude: exclude.to_vec(),
        });
        InLine {
            line: self,
            freed,
            id,
        }
    }

    /// Whether call `me` (`None`: one that has not joined, so younger than all) may take
    /// one of the free slots now: fewer calls older than it, that could use one of the
    /// instances with a free slot, are waiting than there are free slots.
    pub(super) fn my_turn(&self, me: Option<u64>, free: &[(&Arc<Instance>, u32)]) -> bool {
        let slots: u32 = free.iter().map(|(_, n)| n).sum();
        let waiting = self.waiting.lock();
        let older = waiting
            .iter()
            .filter(|p| me.is_none_or(|me| p.id < me))
            .filter(|p| free.iter().any(|(i, _)| p.can_use(i)))
            .count();
        u32::try_from(older).unwrap_or(u32::MAX) < slots
    }
}

/// A call's place in the line; leaving it lets the calls behind look again.
pub(super) struct InLine<'a> {
    line: &'a Line,
    freed: &'a Notify,
    pub(super) id: u64,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.line.waiting.lock().retain(|p| p.id != self.id);
        self.freed.notify_waiters();
    }
}
