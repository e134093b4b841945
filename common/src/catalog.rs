//! The instance catalog (`common/data/catalog.toml`, embedded): the instance types the
//! resource controller may procure, their on-demand prices, the spot price process, and
//! the packing factor of a model on each type.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::CommonError;
use crate::zoo::Profile;

const EMBEDDED: &str = include_str!("../data/catalog.toml");

/// Seconds in a day: the period of the spot price's fluctuation.
const DAY_S: f64 = 86_400.0;
/// The spot price changes in steps of this many seconds (EC2 reprices every few minutes).
const PRICE_STEP_S: f64 = 300.0;
/// Spikes are drawn per type and hour: at most one starts in each hour.
const SPIKE_WINDOW_S: f64 = 3600.0;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceType {
    pub name: String,
    pub vcpus: u32,
    pub memory_gib: f64,
    #[serde(default)]
    pub gpus: u32,
    pub on_demand_per_hour: f64,
    /// Burstable (t3): cheap standby capacity (MArk §4.5).
    #[serde(default)]
    pub burstable: bool,
    /// Speed of one vCPU relative to one core of the profiling host (1.0 when absent);
    /// used by [`crate::latency`] for batches on heterogeneous pools.
    #[serde(default = "one")]
    pub core_speed: f64,
    /// Where the price comes from.
    pub source: String,
}

impl InstanceType {
    pub fn is_gpu(&self) -> bool {
        self.gpus > 0
    }
}

/// The spot price process (Cocktail §6.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpotModel {
    /// Mean spot discount from on-demand (0.70: spot costs 30 %).
    pub mean_discount: f64,
    /// Relative amplitude of the daily swing around the mean spot price.
    pub daily_amplitude: f64,
    /// Relative amplitude of the per-step noise.
    pub noise: f64,
    /// The bid as a share of on-demand; a price above it revokes the instance.
    pub bid_fraction: f64,
    /// Warning before a revocation.
    pub notice_seconds: f64,
    /// Price spikes above the bid per type and day (0: the price never crosses it, and
    /// only chaos revokes). During a spike the price is between the bid and on-demand.
    #[serde(default)]
    pub spikes_per_day: f64,
    /// How long a spike lasts.
    #[serde(default = "spike_seconds")]
    pub spike_seconds: f64,
}

fn spike_seconds() -> f64 {
    1200.0
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuModel {
    /// 4-vCPU CPU instances' worth of concurrent requests one GPU serves.
    pub speedup: f64,
    /// Fixed cost of one batch on the GPU (launch and transfers), microseconds.
    #[serde(default = "gpu_fixed_us")]
    pub fixed_us: f64,
    /// How many times faster than one profiling-host core the GPU works through items.
    #[serde(default = "gpu_item_speedup")]
    pub item_speedup: f64,
}

fn one() -> f64 {
    1.0
}

fn gpu_fixed_us() -> f64 {
    1000.0
}

fn gpu_item_speedup() -> f64 {
    24.0
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    pub schema: u32,
    pub spot: SpotModel,
    pub gpu: GpuModel,
    pub types: Vec<InstanceType>,
}

impl Catalog {
    /// The catalog shipped in the binary.
    pub fn embedded() -> Result<Self, CommonError> {
        Self::parse(EMBEDDED, Path::new("common/data/catalog.toml"))
    }

    pub fn load(path: &Path) -> Result<Self, CommonError> {
        let text = std::fs::read_to_string(path).map_err(|e| CommonError::io(path, e))?;
        Self::parse(&text, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, CommonError> {
        let catalog: Self =
            toml::from_str(text).map_err(|e| CommonError::format(path, e.to_string()))?;
        if catalog.types.is_empty() {
            return Err(CommonError::format(path, "no instance types"));
        }
        for t in &catalog.types {
            if t.vcpus == 0 || t.on_demand_per_hour.is_nan() || t.on_demand_per_hour <= 0.0 {
                return Err(CommonError::format(
                    path,
                    format!("`{}` needs vcpus > 0 and a positive price", t.name),
                ));
            }
            if t.core_speed.is_nan() || t.core_speed <= 0.0 {
                return Err(CommonError::format(
                    path,
                    format!("`{}` needs a positive core_speed", t.name),
                ));
            }
        }
        let s = catalog.spot;
        if !((0.0..1.0).contains(&s.mean_discount) && (0.0..=1.0).contains(&s.bid_fraction)) {
            return Err(CommonError::format(
                path,
                "spot.mean_discount must be in [0, 1) and spot.bid_fraction in [0, 1]",
            ));
        }
        Ok(catalog)
    }

    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The bid for a spot instance of `ty`, USD per hour.
    pub fn bid(&self, ty: &InstanceType) -> f64 {
        ty.on_demand_per_hour * self.spot.bid_fraction
    }
}

/// Pf(model, type): requests the model serves at once on the type within its latency.
///
/// The profile measures Pf per intra-op thread count on this machine (1 and 2 threads).
/// A CPU type uses the measurement for its vCPU count when there is one. A larger type
/// runs `vcpus / t` copies of the best measured configuration (`t` threads each), so
/// Pf grows linearly with vCPUs: the models are small and gain little from more
/// intra-op threads, so separate copies are how a big instance is used. A GPU type counts
/// as `gpu.speedup` 4-vCPU instances (an assumption; no GPU here to measure). Without a
/// profile, Pf is 1 per vCPU.
pub fn packing_factor(profile: Option<&Profile>, ty: &InstanceType, gpu: &GpuModel) -> u32 {
    let per_vcpu = |vcpus: u32| -> f64 {
        let Some(p) = profile else {
            return f64::from(vcpus);
        };
        if let Some(exact) = p.packing_factor(vcpus as usize) {
            return f64::from(exact);
        }
        // The measured configuration with the most requests per thread.
        let best = p
            .threads
            .iter()
            .filter_map(|&t| {
                p.packing_factor(t)
                    .map(|pf| f64::from(pf) / t.max(1) as f64)
            })
            .fold(0.0_f64, f64::max);
        (best * f64::from(vcpus)).max(1.0)
    };
    let pf = if ty.is_gpu() {
        per_vcpu(4) * gpu.speedup
    } else {
        per_vcpu(ty.vcpus)
    };
    pf.floor().max(1.0) as u32
}

/// Spot prices over time.
pub trait SpotPrices: Send + Sync + std::fmt::Debug {
    /// USD per hour for `ty` at `t` seconds since the start.
    fn price(&self, ty: &InstanceType, t: f64) -> f64;
}

/// The synthetic process: a daily sine around `(1 - mean_discount) × on-demand`, plus
/// noise that changes every five minutes, plus rare spikes above the bid (the excursions
/// that revoke spot instances in real price histories; each type spikes on its own).
/// Deterministic for a seed, so the simulator and the tests replay the same prices.
#[derive(Debug, Clone)]
pub struct SpotProcess {
    model: SpotModel,
    seed: u64,
}

impl SpotProcess {
    pub fn new(model: SpotModel, seed: u64) -> Self {
        Self { model, seed }
    }
}

/// SplitMix64, written here because the noise must be a pure function of (seed, type,
/// step) for replays; a stateful RNG would make prices depend on the order of queries.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A uniform number in [0, 1) that is a pure function of `(seed, counter)`: the chaos of
/// the local provider and the simulator replay exactly for a seed.
pub fn unit_random(seed: u64, counter: u64) -> f64 {
    (mix(seed ^ mix(counter)) >> 11) as f64 / (1_u64 << 53) as f64
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}

impl SpotPrices for SpotProcess {
    fn price(&self, ty: &InstanceType, t: f64) -> f64 {
        let m = &self.model;
        let base = ty.on_demand_per_hour * (1.0 - m.mean_discount);
        let key = name_hash(&ty.name) ^ self.seed;
        // Each type peaks at its own hour of the day.
        let phase = (mix(key) % 1000) as f64 / 1000.0 * std::f64::consts::TAU;
        let daily = m.daily_amplitude * (std::f64::consts::TAU * t / DAY_S + phase).sin();
        let step = (t / PRICE_STEP_S).floor() as i64 as u64;
        let uniform = (mix(key ^ mix(step)) % 1_000_001) as f64 / 1_000_000.0;
        let noise = m.noise * (2.0 * uniform - 1.0);
        let price = (base * (1.0 + daily + noise)).min(ty.on_demand_per_hour);
        match self.spike(key, t) {
            Some(height) => {
                let bid = ty.on_demand_per_hour * m.bid_fraction;
                (bid + height * (ty.on_demand_per_hour - bid)).max(price)
            }
            None => price,
        }
    }
}

impl SpotProcess {
    /// Whether a spike covers `t` for the type keyed `key`, and its height above the bid
    /// as a share of the way to on-demand (0.1 to 0.9).
    fn spike(&self, key: u64, t: f64) -> Option<f64> {
        let m = &self.model;
        if m.spikes_per_day <= 0.0 || t < 0.0 {
            return None;
        }
        let window = (t / SPIKE_WINDOW_S).floor();
        let draw = |salt: u64| {
            let x = mix(key ^ mix(window as u64 ^ salt.wrapping_mul(0xA5A5_A5A5)));
            (x >> 11) as f64 / (1_u64 << 53) as f64
        };
        if draw(1) >= m.spikes_per_day * SPIKE_WINDOW_S / DAY_S {
            return None;
        }
        let length = m.spike_seconds.clamp(0.0, SPIKE_WINDOW_S);
        let start = window * SPIKE_WINDOW_S + draw(2) * (SPIKE_WINDOW_S - length);
        (t >= start && t < start + length).then(|| 0.1 + 0.8 * draw(3))
    }
}

/// Prices replayed from a CSV history `seconds,instance_type,price` (a header line is
/// skipped); between samples the last price holds, before the first the first applies.
#[derive(Debug, Clone, Default)]
pub struct SpotReplay {
    history: BTreeMap<String, Vec<(f64, f64)>>,
}

impl SpotReplay {
    pub fn load(path: &Path) -> Result<Self, CommonError> {
        let text = std::fs::read_to_string(path).map_err(|e| CommonError::io(path, e))?;
        let mut history: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [t, ty, price] = fields.as_slice() else {
                return Err(CommonError::format(
                    path,
                    format!("line {}: expected 3 fields", i + 1),
                ));
            };
            let (Ok(t), Ok(price)) = (t.parse::<f64>(), price.parse::<f64>()) else {
                if i == 0 {
                    continue; // header
                }
                return Err(CommonError::format(
                    path,
                    format!("line {}: not numbers", i + 1),
                ));
            };
            history
                .entry((*ty).to_owned())
                .or_default()
                .push((t, price));
        }
        for samples in history.values_mut() {
            samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Ok(Self { history })
    }
}

impl SpotPrices for SpotReplay {
    fn price(&self, ty: &InstanceType, t: f64) -> f64 {
        let Some(samples) = self.history.get(&ty.name) else {
            return ty.on_demand_per_hour;
        };
        let at = samples.partition_point(|(s, _)| *s <= t);
        samples
            .get(at.saturating_sub(1))
            .map_or(ty.on_demand_per_hour, |(_, p)| *p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_catalog_has_the_papers_prices() {
        let catalog = Catalog::embedded().unwrap();
        let price = |n: &str| catalog.get(n).unwrap().on_demand_per_hour;
        assert_eq!(price("c5a.xlarge"), 0.154);
        assert_eq!(price("c5a.8xlarge"), 1.232);
        assert_eq!(price("g4dn.xlarge"), 0.526);
        assert_eq!(price("r5n.large"), 0.149);
        assert!(catalog.get("g4dn.xlarge").unwrap().is_gpu());
        assert!(catalog.get("t3.xlarge").unwrap().burstable);
    }

    #[test]
    fn spot_prices_spike_above_the_bid_about_as_often_as_the_catalog_says() {
        let catalog = Catalog::embedded().unwrap();
        let rate = catalog.spot.spikes_per_day;
        assert!(rate > 0.0);
        let process = SpotProcess::new(catalog.spot, 3);
        let days = 20.0;
        let (mut spikes, mut spiked_s) = (0, 0.0);
        for ty in &catalog.types {
            let mut was_above = false;
            for i in 0..(days * DAY_S / 60.0) as u32 {
                let t = f64::from(i) * 60.0;
                let price = process.price(ty, t);
                let above = price > catalog.bid(ty);
                assert!(price <= ty.on_demand_per_hour + 1e-12);
                spikes += usize::from(above && !was_above);
                spiked_s += if above { 60.0 } else { 0.0 };
                was_above = above;
            }
        }
        let expected = rate * days * catalog.types.len() as f64;
        assert!(
            (spikes as f64) > expected * 0.6 && (spikes as f64) < expected * 1.4,
            "{spikes} spikes against {expected:.0} expected"
        );
        let mean_s = spiked_s / spikes.max(1) as f64;
        assert!(
            (mean_s - catalog.spot.spike_seconds).abs() <= 120.0,
            "spikes last {mean_s} s"
        );
        // Without spikes the price never crosses the bid.
        let calm = SpotProcess::new(
            SpotModel {
                spikes_per_day: 0.0,
                ..catalog.spot
            },
            3,
        );
        for ty in &catalog.types {
            assert!((0..2000).all(|i| calm.price(ty, f64::from(i) * 300.0) < catalog.bid(ty)));
        }
    }

    #[test]
    fn spot_is_about_70_percent_below_on_demand_and_deterministic() {
        let catalog = Catalog::embedded().unwrap();
        let process = SpotProcess::new(catalog.spot, 7);
        for ty in &catalog.types {
            let samples: Vec<f64> = (0..288 * 7)
                .map(|i| process.price(ty, f64::from(i) * 300.0))
                .collect();
            let mean = samples.iter().sum::<f64>() / samples.len() as f64;
            let ratio = mean / ty.on_demand_per_hour;
            assert!((0.27..0.33).contains(&ratio), "{}: {ratio}", ty.name);
            let above = samples.iter().filter(|p| **p > catalog.bid(ty)).count();
            assert!(
                above <= samples.len() / 50,
                "30 % ± 14 % stays under a 40 % bid but for spikes: {above}"
            );
            assert_eq!(
                process.price(ty, 1234.0),
                SpotProcess::new(catalog.spot, 7).price(ty, 1234.0)
            );
        }
        let other = SpotProcess::new(catalog.spot, 8);
        let ty = &catalog.types[0];
        assert!(
            (0..50).any(|i| other.price(ty, f64::from(i) * 300.0)
                != process.price(ty, f64::from(i) * 300.0))
        );
    }

    #[test]
    fn packing_factor_scales_with_vcpus_and_gpus() {
        let catalog = Catalog::embedded().unwrap();
        let profile = Profile {
            host: "test".into(),
            seq_len: None,
            threads: vec![1, 2],
            batch_sizes: vec![1],
            latency_us: vec![vec![10.0], vec![9.0]],
            packing_factor: vec![3, 4],
        };
        let pf =
            |name: &str| packing_factor(Some(&profile), catalog.get(name).unwrap(), &catalog.gpu);
        assert_eq!(pf("r5n.large"), 4, "2 vCPUs: measured");
        assert_eq!(
            pf("c5a.xlarge"),
            12,
            "best is 3 per thread (1 thread), times 4"
        );
        assert_eq!(pf("c5a.8xlarge"), 96);
        assert_eq!(pf("g4dn.xlarge"), 96, "8 x a 4-vCPU instance");
        assert_eq!(
            packing_factor(None, catalog.get("c5a.2xlarge").unwrap(), &catalog.gpu),
            8
        );
    }

    #[test]
    fn a_price_history_replays_step_by_step() {
        let dir = std::env::temp_dir().join(format!("cocktail-spot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.csv");
        std::fs::write(
            &path,
            "seconds,instance_type,price\n0,c5a.xlarge,0.05\n600,c5a.xlarge,0.07\n",
        )
        .unwrap();
        let replay = SpotReplay::load(&path).unwrap();
        let catalog = Catalog::embedded().unwrap();
        let ty = catalog.get("c5a.xlarge").unwrap();
        assert_eq!(replay.price(ty, 0.0), 0.05);
        assert_eq!(replay.price(ty, 599.0), 0.05);
        assert_eq!(replay.price(ty, 600.0), 0.07);
        assert_eq!(
            replay.price(catalog.get("t3.xlarge").unwrap(), 5.0),
            0.1664,
            "no history: on-demand"
        );
        std::fs::write(&path, "0,c5a.xlarge\n").unwrap();
        assert!(SpotReplay::load(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
