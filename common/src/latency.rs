//! How long one batched query of a model takes on an instance type: the model of a
//! heterogeneous pool that Kairos' matching (Kairos §5.1, the `L` matrix), its
//! throughput bound (§5.2), the heterogeneous-pool simulator and the local provider's
//! emulated types share.
//!
//! Inference latency is close to linear in the batch size (Kairos §5.1 reports a
//! Pearson correlation above 0.99), so a model's profile row for one intra-op thread is
//! fitted as `fixed + per_item × batch` by least squares. On a CPU type the batch's items
//! spread over its vCPUs (with 75 % parallel efficiency per extra vCPU) at the type's
//! `core_speed`; on a GPU they run `gpu.item_speedup` times faster than a host core after
//! a fixed `gpu.fixed_us`.

use serde::{Deserialize, Serialize};

use crate::catalog::{GpuModel, InstanceType};
use crate::oip::limits::MAX_ITEMS;
use crate::zoo::{PACKING_SLACK, Profile};

/// Share of a vCPU's speed that each vCPU beyond the first adds to one batch.
const PARALLEL_EFFICIENCY: f64 = 0.75;

/// `fixed_us + per_item_us × batch` on one core of the profiling host.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchLatency {
    pub fixed_us: f64,
    pub per_item_us: f64,
}

impl BatchLatency {
    /// Least-squares fit of the profile's one-thread row (its first row without one).
    pub fn fit(profile: &Profile) -> Option<Self> {
        let row = profile.threads.iter().position(|&t| t == 1).unwrap_or(0);
        let latencies = profile.latency_us.get(row)?;
        let points: Vec<(f64, f64)> = profile
            .batch_sizes
            .iter()
            .zip(latencies)
            .map(|(&b, &l)| (b as f64, l))
            .collect();
        if points.len() < 2 {
            return None;
        }
        let n = points.len() as f64;
        let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let per_item_us = (sxy / sxx).max(0.0);
        let fixed_us = (mean_y - per_item_us * mean_x).max(0.0);
        Some(Self {
            fixed_us,
            per_item_us,
        })
    }

    /// The same model `factor` times slower (time dilation for emulated types whose
    /// modelled latency would otherwise be below this host's real one).
    pub fn scaled(self, factor: f64) -> Self {
        Self {
            fixed_us: self.fixed_us * factor,
            per_item_us: self.per_item_us * factor,
        }
    }

    /// Microseconds for a batch of `batch` items on one instance of `ty`.
    pub fn on(&self, ty: &InstanceType, gpu: &GpuModel, batch: usize) -> f64 {
        let items = batch.max(1) as f64;
        if ty.is_gpu() {
            return gpu.fixed_us + self.fixed_us + self.per_item_us * items / gpu.item_speedup;
        }
        let lanes = 1.0 + PARALLEL_EFFICIENCY * (f64::from(ty.vcpus) - 1.0);
        (self.fixed_us + self.per_item_us * items / lanes) / ty.core_speed
    }

    /// Milliseconds for a batch on one core of the profiling host (an instance whose
    /// type is unknown).
    pub fn host_ms(&self, batch: usize) -> f64 {
        (self.fixed_us + self.per_item_us * batch.max(1) as f64) / 1000.0
    }

    /// Milliseconds, for the policies that work in milliseconds.
    pub fn ms_on(&self, ty: &InstanceType, gpu: &GpuModel, batch: usize) -> f64 {
        self.on(ty, gpu, batch) / 1000.0
    }
}

/// The calls an instance takes at once when the hop of a member call is counted: the
/// packing factor's own rule (Cocktail §2.3.2: the largest batch within
/// [`PACKING_SLACK`] times one item's latency) with the call's cost besides inference
/// added on both sides, and the linger added to the bound. The profile's rule leaves
/// that cost out, so a 30 µs model behind a 500 µs hop packs one call though eight cost
/// little more than one. The linger: a call of such a model already accepts waiting
/// that long for the call under way before it goes out joined, so a joined batch may
/// take that much longer than the slack alone allows; without it, calls beyond the
/// slots wait for a slot, then go in a further joined call of their own with its own
/// hop, where they could have joined the batch under way (`cnn_med`: 4 slots at a
/// 0.5 ms hop, 14 with the 1 ms linger; docs/design.md, "Slots that count the
/// hop"). Counted only for the models whose calls the master joins: for the others the
/// extra slots would be separate calls, each paying its own hop. The live registry, the
/// controller's capacity plans and the simulator all count slots with this.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HopSlots {
    /// The linger in milliseconds: models whose one-item inference takes at most this
    /// long are those whose calls join, and a call of theirs may wait this long to join.
    pub linger_ms: f64,
    /// A member call's cost besides inference, in milliseconds; zero: every instance
    /// takes its packing factor's calls.
    pub hop_ms: f64,
}

impl HopSlots {
    /// The calls an instance with `packing_factor` takes at once, given its inference
    /// time per batch size (ms): at least the packing factor, at most [`MAX_ITEMS`].
    pub fn slots(&self, packing_factor: u32, inference_ms: impl Fn(usize) -> f64) -> u32 {
        let packing_factor = packing_factor.max(1);
        let one = inference_ms(1);
        if self.hop_ms <= 0.0 || one > self.linger_ms {
            return packing_factor;
        }
        let limit = PACKING_SLACK * (one + self.hop_ms) + self.linger_ms;
        let fits = (1..=MAX_ITEMS)
            .take_while(|&batch| inference_ms(batch) + self.hop_ms <= limit)
            .last()
            .unwrap_or(1);
        packing_factor.max(u32::try_from(fits).unwrap_or(u32::MAX))
    }

    /// [`Self::slots`] on a catalog type, for a model whose batch latency is fitted
    /// (without one, the packing factor).
    pub fn on_type(
        &self,
        packing_factor: u32,
        latency: Option<&BatchLatency>,
        ty: &InstanceType,
        gpu: &GpuModel,
    ) -> u32 {
        match latency {
            Some(l) => self.slots(packing_factor, |batch| l.ms_on(ty, gpu, batch)),
            None => packing_factor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn profile(latency: Vec<f64>) -> Profile {
        Profile {
            host: "test".into(),
            seq_len: None,
            threads: vec![1],
            batch_sizes: vec![1, 2, 4, 8],
            latency_us: vec![latency],
            packing_factor: vec![4],
        }
    }

    #[test]
    fn the_fit_recovers_a_line() {
        let fit = BatchLatency::fit(&profile(vec![12.0, 14.0, 18.0, 26.0])).unwrap();
        assert!((fit.fixed_us - 10.0).abs() < 1e-9);
        assert!((fit.per_item_us - 2.0).abs() < 1e-9);
        assert!(BatchLatency::fit(&profile(vec![1.0])).is_none());
    }

    #[test]
    fn gpus_win_large_batches_and_cpus_small_ones() {
        let catalog = Catalog::embedded().unwrap();
        let fit = BatchLatency {
            fixed_us: 10.0,
            per_item_us: 190.0,
        };
        let on = |name: &str, b: usize| fit.on(catalog.get(name).unwrap(), &catalog.gpu, b);
        assert!(on("c5a.xlarge", 1) < on("g4dn.xlarge", 1));
        assert!(on("g4dn.xlarge", 256) < on("c5a.xlarge", 256));
        assert!(on("c5a.2xlarge", 64) < on("c5a.xlarge", 64), "more vCPUs");
        assert!(on("c5a.xlarge", 64) < on("t3.xlarge", 64), "slower cores");
    }

    #[test]
    fn quick_models_count_the_hop_in_their_slots() {
        // 18 + 12 b µs of inference.
        let quick = |batch: usize| (18.0 + 12.0 * batch as f64) / 1000.0;
        let counting = HopSlots {
            linger_ms: 0.2,
            hop_ms: 0.3,
        };
        // 18 + 12 b + 300 ≤ 1.5 × (30 + 300) + 200: b ≤ 31.4.
        assert_eq!(counting.slots(1, quick), 31);
        assert_eq!(
            counting.slots(40, quick),
            40,
            "never below the packing factor"
        );
        let no_linger = HopSlots {
            linger_ms: 0.0,
            ..counting
        };
        assert_eq!(no_linger.slots(1, quick), 1, "no linger: no call joins");
        assert_eq!(HopSlots::default().slots(1, quick), 1, "no hop counted");
        let slow = |batch: usize| 2.0 + 0.5 * batch as f64;
        assert_eq!(
            counting.slots(1, slow),
            1,
            "not quick: its calls do not join"
        );
        let free = |_| 0.01;
        assert_eq!(
            counting.slots(1, free),
            MAX_ITEMS as u32,
            "at most one call's items"
        );
    }
}
