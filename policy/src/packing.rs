//! Online bin packing of queries onto a pool's instances (Cocktail §4.2.1).
//!
//! Each instance has `packing_factor` slots. A query goes to the instance with the fewest
//! free slots that still has one, so busy instances fill up first and lightly used ones
//! drain and can be released by the autoscaler. Ties go to the lowest position, which
//! keeps the choice deterministic.

/// Free slots of one instance as the load balancer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    pub packing_factor: u32,
    pub in_flight: u32,
    /// Draining or failed instances take no new work.
    pub available: bool,
}

impl Slots {
    pub fn free(&self) -> u32 {
        if self.available {
            self.packing_factor.saturating_sub(self.in_flight)
        } else {
            0
        }
    }
}

/// The position of the instance to use, or `None` when every instance is full.
pub fn choose(instances: impl IntoIterator<Item = Slots>) -> Option<usize> {
    instances
        .into_iter()
        .enumerate()
        .filter(|(_, s)| s.free() > 0)
        .min_by_key(|&(i, s)| (s.free(), i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(packing_factor: u32, in_flight: u32) -> Slots {
        Slots {
            packing_factor,
            in_flight,
            available: true,
        }
    }

    #[test]
    fn fullest_instance_with_a_free_slot_wins() {
        // Free slots: 4, 1, 0, 2 → the one with a single free slot.
        assert_eq!(
            choose([slots(4, 0), slots(4, 3), slots(2, 2), slots(8, 6)]),
            Some(1)
        );
        // Ties go to the first.
        assert_eq!(choose([slots(2, 0), slots(2, 0)]), Some(0));
        assert_eq!(choose([slots(1, 1), slots(3, 3)]), None);
        assert_eq!(choose([]), None);
    }

    #[test]
    fn unavailable_instances_get_nothing() {
        let draining = Slots {
            available: false,
            ..slots(8, 7)
        };
        assert_eq!(choose([draining, slots(4, 0)]), Some(1));
        assert_eq!(choose([draining]), None);
    }

    #[test]
    fn sequential_queries_fill_one_instance_before_the_next() {
        let mut pool = [slots(3, 0), slots(3, 0)];
        let mut order = Vec::new();
        for _ in 0..6 {
            let i = choose(pool).unwrap();
            pool[i].in_flight += 1;
            order.push(i);
        }
        assert_eq!(order, [0, 0, 0, 1, 1, 1]);
    }
}
