//! Serving one ensemble slot so that a request fails only when no candidate could answer
//! in time (docs/design.md, "The request path"). A slot is the member O1/O2 chose; when
//! it cannot answer (no live instance, refused, 5xx, deadline), the next candidate of
//! [`cocktail_policy::selection::substitutes`] that some worker serves stands in. A member that is
//! slow to answer is hedged: past [`hedge_after`] another instance of its pool is asked
//! too when one has a free slot, else a substitute (and a substitute when that instance
//! does not answer in time either), and the first answer wins, so a hung worker costs a
//! request a few milliseconds, not its deadline.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;

use crate::serving::dispatch::{Asked, Call, MemberAnswer, MemberError};
use crate::serving::registry::Registry;
use crate::serving::tasks::TaskTable;
use parking_lot::Mutex;

/// A member is hedged when it has not answered within this many of its pool's typical
/// call times...
const HEDGE_FACTOR: u32 = 4;
/// ... and never sooner than this by default (a call's time varies a lot at the µs
/// scale); `--hedge-min-ms` sets it.
pub const HEDGE_MIN: Duration = Duration::from_millis(5);

/// What lists a request's substitutes, best first (a request's selection and its members
/// in [`crate::serving::service`]).
pub type SubstituteSource<'a> = &'a (dyn Fn() -> Vec<usize> + Sync);

/// The substitutes a request may still use, best first, shared by its slots so that two
/// failing members never take the same one. Listed when a slot first needs one (a member
/// failed or is hedged), not for every request: most requests never need one, and the
/// list takes the constraint's lock, a filter and two sorts.
pub struct Spares<'a> {
    source: SubstituteSource<'a>,
    /// `None` until a slot first asks.
    queue: Mutex<Option<VecDeque<usize>>>,
}

impl std::fmt::Debug for Spares<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spares")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<'a> Spares<'a> {
    pub fn new(source: SubstituteSource<'a>) -> Self {
        Self {
            source,
            queue: Mutex::new(None),
        }
    }

    /// The best remaining substitute that some worker serves now.
    fn take(&self, task: &TaskTable, registry: &Registry) -> Option<usize> {
        let mut queue = self.queue.lock();
        let queue = queue.get_or_insert_with(|| (self.source)().into());
        while let Some(model) = queue.pop_front() {
            if registry.serves(&task.models[model]) {
                return Some(model);
            }
        }
        None
    }
}

/// How a slot was served.
#[derive(Debug)]
pub struct Slot {
    /// The model that answered (the member itself or a substitute) and its answer, or the
    /// last reason nothing did.
    pub answer: Result<(usize, MemberAnswer), MemberError>,
    /// Every model that was asked and gave no answer, with why.
    pub failures: Vec<(usize, MemberError)>,
    /// When the slot was done (answered or given up).
    pub finished: Instant,
    /// Whether a call of the slot waited for a free slot on its pool
    /// ([`crate::serving::dispatch::Asked::queued`]); assumed of a slot the request
    /// stopped waiting for.
    pub queued: bool,
}

impl Slot {
    /// A slot the request stopped waiting for: its member counts as late.
    fn cut_off(member: usize) -> Self {
        Self {
            answer: Err(MemberError::Deadline),
            failures: vec![(member, MemberError::Deadline)],
            finished: Instant::now(),
            // Not known (the slot has not reported): assumed, so that a pool whose calls
            // are still queued when the request answers without them counts its misses.
            queued: true,
        }
    }
}

/// When a request stops waiting for its slots ([`gather`]).
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    /// When the answer is due: from then on, the members that answered vote.
    pub due: Instant,
    /// Wait for every slot (to the call deadline) rather than answer at `due` with the
    /// members back by then: the ensemble was chosen knowing all would be late.
    pub all: bool,
}

/// Serves every member's slot and returns them in member order. At `due` the request
/// answers with the members back by then; when none is, it takes the first late answer
/// instead of failing (the calls themselves end at the call deadline, [`Call::deadline`],
/// which is `due` itself when the client asked for strict deadlines). Slots still
/// running when the request stops waiting count as missed their deadline. A slow member
/// is hedged after `hedge_min` at the earliest.
pub async fn gather(
    call: Call<'_>,
    hedge_min: Duration,
    members: &[usize],
    spares: &Spares<'_>,
    waiting: Waiting,
) -> Vec<Slot> {
    let mut running: FuturesUnordered<_> = members
        .iter()
        .enumerate()
        .map(|(i, &m)| async move { (i, serve_slot(call, hedge_min, m, spares).await) })
        .collect();
    let mut slots: Vec<Option<Slot>> = members.iter().map(|_| None).collect();
    let answered = |slots: &[Option<Slot>]| slots.iter().flatten().any(|s| s.answer.is_ok());
    let due = tokio::time::sleep_until(waiting.due.into());
    let mut due = std::pin::pin!(due);
    let mut past_due = false;
    loop {
        tokio::select! {
            next = running.next() => {
                let Some((i, slot)) = next else { break };
                slots[i] = Some(slot);
                if past_due && !waiting.all && answered(&slots) {
                    break;
                }
            }
            () = &mut due, if !past_due => {
                past_due = true;
                if !waiting.all && answered(&slots) {
                    break;
                }
            }
        }
    }
    slots
        .into_iter()
        .zip(members)
        .map(|(slot, &m)| slot.unwrap_or_else(|| Slot::cut_off(m)))
        .collect()
}

/// When a call to `model`'s pool started at `started` is hedged, never before `min`;
/// `None` when hedging could not finish before the deadline anyway.
pub fn hedge_after(
    typical: Option<Duration>,
    started: Instant,
    deadline: Instant,
    min: Duration,
) -> Option<Instant> {
    let wait = typical.map_or(min, |t| (t * HEDGE_FACTOR).max(min));
    let at = started + wait;
    (at + min / 2 < deadline).then_some(at)
}

/// Serves one slot: the member, then substitutes while time remains; at most two hedges:
/// on another instance of the member's pool when one is free, then, or else, on a
/// substitute.
pub async fn serve_slot(
    call: Call<'_>,
    hedge_min: Duration,
    member: usize,
    spares: &Spares<'_>,
) -> Slot {
    let started = Instant::now();
    let name = &call.task.models[member];
    let typical = call.registry.pool(name).and_then(|p| p.typical_call());
    let mut hedge_at = hedge_after(typical, started, call.deadline, hedge_min);
    let mut hedged_instance = false;
    let asked = Asked::default();
    let ask = |model: usize| {
        let asked = &asked;
        async move { (model, call.ask(model, asked).await) }
    };
    let mut running = FuturesUnordered::new();
    running.push(ask(member));
    let mut failures = Vec::new();
    loop {
        let finished = match hedge_at {
            Some(at) => tokio::select! {
                finished = running.next() => finished,
                () = tokio::time::sleep_until(at.into()) => {
                    // Past a hedge on another instance, one more on a substitute: when
                    // that instance hangs too (two of the pool's containers killed or
                    // cut off at once, neither yet out of rotation), the pool cannot
                    // answer, and a substitute still can.
                    let (hedge, on) = if !hedged_instance && asked.elsewhere(call.registry, name) {
                        hedged_instance = true;
                        hedge_at = hedge_after(typical, Instant::now(), call.deadline, hedge_min);
                        (Some(member), "instance")
                    } else {
                        hedge_at = None;
                        (spares.take(call.task, call.registry), "substitute")
                    };
                    if let Some(model) = hedge {
                        metrics::counter!("cocktail_master_hedges_total",
                            "model" => name.clone(), "on" => on)
                        .increment(1);
                        running.push(ask(model));
                    }
                    continue;
                }
            },
            None => running.next().await,
        };
        let Some((model, answer)) = finished else {
            // Nothing in flight and nothing left to ask.
            let last = failures
                .last()
                .map_or(MemberError::NoInstance, |(_, e): &(usize, MemberError)| {
                    e.clone()
                });
            return Slot {
                answer: Err(last),
                failures,
                finished: Instant::now(),
                queued: asked.queued(),
            };
        };
        match answer {
            Ok(answer) => {
                return Slot {
                    answer: Ok((model, answer)),
                    failures,
                    finished: Instant::now(),
                    queued: asked.queued(),
                };
            }
            // The input is at fault: another model would refuse it too.
            Err(rejected @ MemberError::Rejected { .. }) => {
                return Slot {
                    answer: Err(rejected),
                    failures,
                    finished: Instant::now(),
                    queued: asked.queued(),
                };
            }
            Err(error) => {
                failures.push((model, error));
                // A call still running beside the failed one is late (two run only once
                // the member was hedged): it is not waited for before a substitute is asked.
                if Instant::now() < call.deadline
                    && let Some(spare) = spares.take(call.task, call.registry)
                {
                    metrics::counter!("cocktail_master_substitutions_total",
                        "model" => call.task.models[model].clone())
                    .increment(1);
                    running.push(ask(spare));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::{Master, MasterConfig};

    #[tokio::test]
    async fn substitutes_are_listed_once_and_only_when_a_slot_asks() {
        let master = Master::new(MasterConfig::default()).unwrap();
        let task = master.task("fashion").unwrap();
        let listed = AtomicUsize::new(0);
        let source = || {
            listed.fetch_add(1, Ordering::Relaxed);
            vec![0, 1]
        };
        let spares = Spares::new(&source);
        assert_eq!(listed.load(Ordering::Relaxed), 0, "not for every request");
        // No worker serves either model: neither stands in, and the list is made once.
        assert_eq!(spares.take(&task, &master.registry), None);
        assert_eq!(spares.take(&task, &master.registry), None);
        assert_eq!(listed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn hedging_waits_a_few_typical_calls_and_never_past_the_deadline() {
        let now = Instant::now();
        let deadline = now + Duration::from_millis(100);
        assert_eq!(
            hedge_after(None, now, deadline, HEDGE_MIN),
            Some(now + HEDGE_MIN)
        );
        assert_eq!(
            hedge_after(Some(Duration::from_micros(300)), now, deadline, HEDGE_MIN),
            Some(now + HEDGE_MIN),
            "never sooner than the floor"
        );
        assert_eq!(
            hedge_after(Some(Duration::from_millis(10)), now, deadline, HEDGE_MIN),
            Some(now + Duration::from_millis(40))
        );
        assert_eq!(
            hedge_after(Some(Duration::from_millis(30)), now, deadline, HEDGE_MIN),
            None,
            "a hedge at 120 ms could not answer by 100 ms"
        );
    }
}
