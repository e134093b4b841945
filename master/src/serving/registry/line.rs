//! First come, first served among the calls waiting for a pool's slots. Without an order
//! the fastest to wake took a freed slot, so under overload some calls waited a few
//! hundred ms and others, older, until their deadline (`tests/tests/overload.rs`
//! measured waits of 0.24 to over 1 s at the same place in the queue).
//!
//! A freed slot wakes one waiter: the oldest that can use its instance and has not been
//! woken already. Waking every waiter on every freed slot (as a pool-wide `Notify` does)
//! made each of N waiters look at the pool, only for one to take the slot: N wake-ups and
//! N scans per call, quadratic in the queue. Written by hand: a slot here is on one of
//! several instances, a call may exclude the instances it already tried, and the packing
//! chooses among the free ones, which a semaphore cannot express.

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
    /// Wakes this call (a permit is kept when it is not waiting yet).
    wake: Arc<Notify>,
    /// Woken for a freed slot and not yet looked: the next freed slot wakes someone else.
    woken: bool,
}

impl Place {
    fn can_use(&self, instance: &Arc<Instance>) -> bool {
        !instance.is_in(&self.exclude)
    }

    fn wake(&mut self) {
        self.woken = true;
        self.wake.notify_one();
    }
}

impl Line {
    /// Joins the line as call `id` (ids grow with time); leaves it on drop.
    pub(super) fn join<'a>(&'a self, id: u64, exclude: &[Arc<Instance>]) -> InLine<'a> {
        let wake = Arc::new(Notify::new());
        self.waiting.lock().push(Place {
            id,
            exclude: exclude.to_vec(),
            wake: Arc::clone(&wake),
            woken: false,
        });
        InLine {
            line: self,
            wake,
            id,
            served: false,
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

    /// A slot on `instance` was freed: wakes the oldest call that can use it and is not
    /// already woken.
    pub(super) fn freed(&self, instance: &Arc<Instance>) {
        let mut waiting = self.waiting.lock();
        if let Some(place) = waiting
            .iter_mut()
            .filter(|p| !p.woken && p.can_use(instance))
            .min_by_key(|p| p.id)
        {
            place.wake();
        }
    }

    /// The pool changed (an instance came, went, drained or answered a heartbeat):
    /// every call looks again.
    pub(super) fn wake_all(&self) {
        self.waiting.lock().iter_mut().for_each(Place::wake);
    }
}

/// A call's place in the line.
pub(super) struct InLine<'a> {
    line: &'a Line,
    wake: Arc<Notify>,
    pub(super) id: u64,
    served: bool,
}

impl InLine<'_> {
    /// Until a freed slot or a change of the pool wakes this call, which then looks
    /// again: the next freed slot may wake it again.
    pub(super) async fn woken(&self) {
        self.wake.notified().await;
        if let Some(place) = self
            .line
            .waiting
            .lock()
            .iter_mut()
            .find(|p| p.id == self.id)
        {
            place.woken = false;
        }
    }

    /// The call took a slot. The free slots it saw beside the one it took (`others`) may
    /// be left to calls that were not woken for them (it was woken for one and took
    /// another): each wakes its next taker. A slot freed since it looked (it was woken
    /// again) would be stranded: then everyone looks.
    pub(super) fn served(&mut self, others: &[(&Arc<Instance>, u32)]) {
        self.served = true;
        let mut waiting = self.line.waiting.lock();
        let woken_again = waiting.iter().any(|p| p.id == self.id && p.woken);
        waiting.retain(|p| p.id != self.id);
        if woken_again {
            waiting.iter_mut().for_each(Place::wake);
            return;
        }
        drop(waiting);
        for &(instance, free) in others {
            for _ in 0..free {
                self.line.freed(instance);
            }
        }
    }
}

impl Drop for InLine<'_> {
    /// A call that leaves without a slot (its deadline passed, or its request was
    /// dropped) may have been woken for a slot it will not take, and leaving moves the
    /// calls behind it forward: they all look again. Rare; a served call leaves quietly.
    fn drop(&mut self) {
        if self.served {
            return;
        }
        let mut waiting = self.line.waiting.lock();
        waiting.retain(|p| p.id != self.id);
        waiting.iter_mut().for_each(Place::wake);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;
    use crate::serving::registry::Registry;
    use cocktail_common::control::Registration;

    fn instances() -> (Registry, Arc<Instance>, Arc<Instance>) {
        let registry = Registry::default();
        for id in ["a", "b"] {
            registry
                .register(&Registration {
                    id: id.into(),
                    model: "m".into(),
                    url: format!("http://{id}"),
                    packing_factor: 1,
                    queue_items: 0,
                    threads: 1,
                    burst: false,
                    instance_type: None,
                })
                .unwrap();
        }
        let all = registry.pool("m").unwrap().instances();
        let (a, b) = (Arc::clone(&all[0]), Arc::clone(&all[1]));
        (registry, a, b)
    }

    fn woken(line: &Line) -> Vec<u64> {
        let waiting = line.waiting.lock();
        waiting.iter().filter(|p| p.woken).map(|p| p.id).collect()
    }

    #[test]
    fn a_freed_slot_wakes_the_oldest_call_that_can_use_it_and_no_other() {
        let (_registry, a, b) = instances();
        let line = Line::default();
        let tried_a = line.join(1, std::slice::from_ref(&a));
        let mut second = line.join(2, &[]);
        let third = line.join(3, &[]);
        let _fourth = line.join(4, &[]);
        line.freed(&a);
        assert_eq!(woken(&line), [2]);
        // A second slot on `a` before the second call looked: the next call.
        line.freed(&a);
        assert_eq!(woken(&line), [2, 3]);
        line.freed(&b);
        assert_eq!(woken(&line), [1, 2, 3]);
        // Waking clears the mark: the call looks again.
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(second.woken());
        assert_eq!(woken(&line), [1, 3]);
        // The second call takes a slot and saw one more on `b`: the next that can use
        // it and was not woken gets it.
        assert!(line.my_turn(Some(2), &[(&a, 2), (&b, 1)]));
        second.served(&[(&b, 1)]);
        assert_eq!(woken(&line), [1, 3, 4]);
        // A call that leaves without a slot wakes everyone behind it.
        drop(third);
        assert_eq!(woken(&line), [1, 4]);
        line.waiting.lock().iter_mut().for_each(|p| p.woken = false);
        drop(tried_a);
        assert_eq!(woken(&line), [4]);
    }
}
