//! One request's member calls in the simulator, with failover as the live master does it
//! (`cocktail_master::serving::failover`): for a member whose pool has no instance, the
//! best unused candidate that has one answers. Hedging is not modelled.

use cocktail_policy::ensemble::Ensemble;
use cocktail_policy::{response, selection};

use super::World;
use super::cluster::{Cluster, Served};

/// What the members of one request answered, reused from request to request.
#[derive(Debug, Default)]
pub(super) struct Ballots {
    /// Per member slot, its own answer (a substitute's answer is not its member's).
    pub member_classes: Vec<Option<usize>>,
    /// The answers that vote: (model, its class).
    pub cast: Vec<(usize, [usize; 1])>,
}

impl Ballots {
    /// Asks every one of `members` of `ensemble` for test item `item` at `t`, due at `due`
    /// and waited for until `deadline` (later than `due` only when no member is predicted
    /// to answer in time): `(item, t, due, deadline)`. Returns when the request answers
    /// and whether some member answered after `due`, missed the deadline or could not be
    /// served. As live (`cocktail_master::serving::failover::gather`), when no member
    /// answered by `deadline`, the first late answer within [`response::LATE_LIMIT_MS`]
    /// of `t` votes alone. Unlike live, a call that got no slot by `deadline` is not
    /// queued on to answer late: the simulator books a slot once.
    pub fn ask(
        &mut self,
        cluster: &mut Cluster,
        world: &World,
        ensemble: &Ensemble,
        members: &[usize],
        (item, t, due, deadline): (usize, f64, f64, f64),
    ) -> (f64, bool) {
        self.member_classes.clear();
        self.cast.clear();
        let answer = |model: usize| -> Option<usize> {
            world
                .answers
                .get(model)
                .and_then(|a| a.get(item))
                .map(|&c| usize::from(c))
        };
        let mut finish = t;
        let mut missed = false;
        let mut spares: Option<Vec<usize>> = None;
        // The first late answer: when it came, its model and its member's slot.
        let mut first_late: Option<(f64, usize, Option<usize>)> = None;
        let mut late = |at: f64, model: usize, slot: Option<usize>| {
            if first_late.is_none_or(|(first, _, _)| at < first) {
                first_late = Some((at, model, slot));
            }
        };
        for &m in members {
            match cluster.serve(m, t, deadline) {
                Served::At(at) => {
                    finish = finish.max(at);
                    missed |= at > due + 1e-12;
                    self.member_classes.push(answer(m));
                    if let Some(class) = answer(m) {
                        self.cast.push((m, [class]));
                    }
                }
                Served::Late(at) => {
                    late(at, m, Some(self.member_classes.len()));
                    finish = finish.max(deadline);
                    missed = true;
                    self.member_classes.push(None);
                }
                Served::Missed => {
                    finish = finish.max(deadline);
                    missed = true;
                    self.member_classes.push(None);
                }
                Served::NoInstance => {
                    // The member's slot learns nothing either way, as live.
                    self.member_classes.push(None);
                    let spares = spares.get_or_insert_with(|| {
                        selection::substitutes(
                            &world.candidates,
                            &ensemble.pool,
                            members,
                            &ensemble.constraint,
                        )
                    });
                    match stand_in(cluster, spares, t, deadline) {
                        Some((model, Served::At(at))) => {
                            finish = finish.max(at);
                            missed |= at > due + 1e-12;
                            if let Some(class) = answer(model) {
                                self.cast.push((model, [class]));
                            }
                        }
                        Some((model, served)) => {
                            if let Served::Late(at) = served {
                                late(at, model, None);
                            }
                            finish = finish.max(deadline);
                            missed = true;
                        }
                        None => missed = true,
                    }
                }
            }
        }
        let limit = t + response::LATE_LIMIT_MS / 1e3;
        if self.cast.is_empty()
            && let Some((at, model, slot)) = first_late.filter(|&(at, _, _)| at <= limit + 1e-12)
            && let Some(class) = answer(model)
        {
            self.cast.push((model, [class]));
            if let Some(own) = slot.and_then(|k| self.member_classes.get_mut(k)) {
                *own = Some(class);
            }
            finish = at;
        }
        (finish, missed)
    }
}

/// The first of `spares` whose pool has an instance, and how its call went.
fn stand_in(
    cluster: &mut Cluster,
    spares: &mut Vec<usize>,
    t: f64,
    deadline: f64,
) -> Option<(usize, Served)> {
    while !spares.is_empty() {
        let model = spares.remove(0);
        match cluster.serve(model, t, deadline) {
            Served::NoInstance => {}
            served => return Some((model, served)),
        }
    }
    None
}
