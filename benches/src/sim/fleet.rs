//! The simulated fleet: the cluster, its pending launches and ends, and how the
//! simulator carries out the shared control loop's decisions (`policy::control`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cocktail_policy::autoscale::{self, Action, Decision};
use cocktail_policy::control::{Control, Interruption, Measurements};
use cocktail_policy::ensemble::Ensemble;
use rand::Rng;
use rand::rngs::SmallRng;

use super::World;
use super::cluster::Cluster;
use super::config::SimConfig;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Event {
    Ready(usize),
    End(usize),
}

/// An event at a time; the sequence number keeps events at the same time in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Timed(pub f64, pub usize, pub Event);

impl Eq for Timed {}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Debug)]
pub(super) struct Fleet {
    pub cluster: Cluster,
    pub events: BinaryHeap<Reverse<Timed>>,
    pub sequence: usize,
    /// Instances launched so far.
    pub launches: u64,
    /// Seconds from a launch to serving.
    pub launch_s: f64,
}

impl Fleet {
    /// Runs the control loop at `at` until nothing more is due there: measure, step,
    /// carry out. `targets[pool]`: the tightest latency target of the ensembles using the
    /// pool (`None`: out of use); `spot`: the scheme buys spot.
    #[allow(clippy::too_many_arguments)]
    pub fn control(
        &mut self,
        control: &mut Control,
        world: &World,
        targets: &[Option<f64>],
        requests: u64,
        mut interruptions: Vec<Interruption>,
        at: f64,
        spot: bool,
    ) {
        loop {
            let measurements = Measurements {
                requests,
                pools: world
                    .models
                    .iter()
                    .zip(&world.candidates)
                    .enumerate()
                    .map(|(p, (model, candidate))| {
                        let target = targets.get(p).copied().flatten();
                        self.cluster
                            .measure(p, model, candidate.latency_ms, target, spot, at)
                    })
                    .collect(),
                interruptions: std::mem::take(&mut interruptions),
            };
            let step = control.step(&measurements, at);
            self.execute(world, step.decisions.into_iter().map(|(_, d)| d), at);
            if !control.due(at) {
                break;
            }
        }
    }

    /// Pools start sized for `first_rate` requests per second, ready at once: each pool
    /// in use covers its share of the mix (`shares` per constraint type) at the policy's
    /// utilisation.
    pub fn warm_start(
        &mut self,
        world: &World,
        config: &SimConfig,
        ensembles: &[Ensemble],
        shares: &[f64],
        first_rate: f64,
    ) {
        for (pool, candidate) in world.candidates.iter().enumerate() {
            let users = ensembles
                .iter()
                .zip(shares)
                .filter(|(e, _)| e.members.contains(&pool));
            if users.clone().next().is_none() {
                continue;
            }
            let share: f64 = if config.importance_weights {
                users.map(|(_, s)| s).sum()
            } else {
                1.0
            };
            // Headroom as the policy plans it (twice the load for target-2x).
            let factor = 1.0 / config.control().utilisation();
            let offers = self.cluster.offers(pool, config.scheme.spot(), 0.0);
            let Some((offer, count)) = autoscale::procure(
                (first_rate * share * factor).max(f64::MIN_POSITIVE),
                candidate.latency_ms,
                &offers,
                &config.autoscale,
            ) else {
                continue;
            };
            let name = offer.instance_type.clone();
            for id in self
                .cluster
                .launch(pool, &name, offer.spot, count, 0.0, 0.0)
            {
                self.cluster.ready(id);
                self.launches += 1;
            }
        }
    }

    /// Launches `count` instances of a type for a pool, `(pool, type, spot, count)`,
    /// serving `launch_s` after `at`.
    pub fn launch(
        &mut self,
        (pool, instance_type, spot, count): (usize, &str, bool, u32),
        at: f64,
    ) {
        let ids = self
            .cluster
            .launch(pool, instance_type, spot, count, at, self.launch_s);
        for &id in &ids {
            self.sequence += 1;
            self.events.push(Reverse(Timed(
                at + self.launch_s,
                self.sequence,
                Event::Ready(id),
            )));
        }
        self.launches += ids.len() as u64;
    }

    /// Carries out the control loop's decisions.
    pub fn execute(
        &mut self,
        world: &World,
        decisions: impl IntoIterator<Item = Decision>,
        at: f64,
    ) {
        for decision in decisions {
            let Some(pool) = world.models.iter().position(|m| *m == decision.pool) else {
                continue;
            };
            match decision.action {
                Action::Launch {
                    instance_type,
                    count,
                    spot,
                    ..
                } => self.launch((pool, &instance_type, spot, count), at),
                Action::Terminate { id } => {
                    if let Ok(id) = id.parse::<usize>() {
                        self.cluster.end(id, at);
                    }
                }
                Action::Resume { .. } | Action::Stop { .. } => {}
            }
        }
    }

    /// Spot revocations at `at` (the price above the bid, or the `chaos` chance): each
    /// instance stops taking work and ends after the notice. Returns the notices.
    pub fn revoke(
        &mut self,
        world: &World,
        at: f64,
        chaos: f64,
        rng: &mut SmallRng,
    ) -> Vec<Interruption> {
        let mut coin = || rng.random::<f64>() < chaos;
        let revoked = self.cluster.revoked(at, &mut coin);
        let mut notices = Vec::new();
        for id in revoked {
            self.cluster.revocations += 1;
            self.cluster.stop_serving(id);
            self.sequence += 1;
            self.events.push(Reverse(Timed(
                at + self.cluster.catalog.spot.notice_seconds,
                self.sequence,
                Event::End(id),
            )));
            let Some(instance) = self.cluster.instances.get(id) else {
                continue;
            };
            let (Some(model), Some(ty)) = (
                world.models.get(instance.pool),
                self.cluster.catalog.types.get(instance.instance_type),
            ) else {
                continue;
            };
            notices.push(Interruption {
                id: id.to_string(),
                pool: model.clone(),
                instance_type: ty.name.clone(),
                reason: "spot revocation".into(),
            });
        }
        notices
    }

    /// A share of the serving instances fails at once; the health check replaces each at
    /// once, same type and market (`controller::health`).
    pub fn fail(&mut self, fraction: f64, at: f64, rng: &mut SmallRng) {
        let mut serving: Vec<usize> = (0..self.cluster.instances.len())
            .filter(|&id| self.cluster.instances.get(id).is_some_and(|i| i.serving))
            .collect();
        let kill = (serving.len() as f64 * fraction).round() as usize;
        for k in 0..kill.min(serving.len()) {
            let j = rng.random_range(k..serving.len());
            serving.swap(k, j);
            let Some(&id) = serving.get(k) else {
                continue;
            };
            self.cluster.end(id, at);
            let Some(dead) = self.cluster.instances.get(id) else {
                continue;
            };
            let (pool, spot) = (dead.pool, dead.spot);
            let Some(name) = self
                .cluster
                .catalog
                .types
                .get(dead.instance_type)
                .map(|t| t.name.clone())
            else {
                continue;
            };
            self.launch((pool, &name, spot, 1), at);
        }
    }
}
