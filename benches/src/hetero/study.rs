//! The mixed-pool study for `docs/results.md`: Ribbon's cost at QoS against the best
//! homogeneous pool and against the other searches (Ribbon §5.2–5.4), and Kairos'
//! query distribution and configuration choice against FCFS, Ribbon's instance order and
//! the best homogeneous pool on throughput at QoS (Kairos §8.1–8.3).

use std::fmt::Write as _;
use std::path::Path;

use cocktail_common::Zoo;
use cocktail_common::catalog::Catalog;
use cocktail_policy::kairos;
use cocktail_policy::mix::{ConfigEvaluator, Space};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::search::{self, SearchRun, Strategy, Table};
use super::{BatchSizes, Placement, PoolModel, SimEvaluator, Workload};
use crate::parallel::map_counted;
use crate::plots;
use crate::stats::median;

/// The models: two CNNs on Fashion-MNIST and the transformer on sentiment.
pub const MODELS: [&str; 3] = ["resnet", "vgg", "minilm"];
/// Ribbon's two diverse pools (Ribbon Table 3), the first type the homogeneous one.
pub const RIBBON_POOLS: [[&str; 3]; 2] = [
    ["c5a.2xlarge", "m5.xlarge", "t3.xlarge"],
    ["g4dn.xlarge", "c5n.2xlarge", "r5n.large"],
];
/// Kairos' pool (Kairos Table 4) and budget (§7: $2.5 per hour).
pub const KAIROS_POOL: [&str; 4] = ["g4dn.xlarge", "c5n.2xlarge", "r5n.large", "t3.xlarge"];
pub const KAIROS_BUDGET: f64 = 2.5;
/// p99: the share of queries within the latency target.
pub const TARGET: f64 = 0.99;
/// Type counts searched at most, per type.
const MAX_COUNT: u32 = 12;

/// How large a study to run: the page uses [`Scale::FULL`], the tests a small one.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub seeds: u64,
    pub queries: usize,
    /// Kairos+ measures at most this many configurations.
    pub plus_budget: usize,
}

impl Scale {
    pub const FULL: Self = Self {
        seeds: 20,
        queries: 2000,
        plus_budget: 40,
    };
}

/// The latency target: 1.3 times the largest query on the pool's fastest type for it,
/// so that type alone can meet it (Ribbon §5.1).
fn qos_for(pool: &PoolModel, largest: usize) -> f64 {
    let fastest = (0..pool.types.len())
        .map(|t| pool.latency_ms(t, largest))
        .fold(f64::INFINITY, f64::min);
    1.3 * fastest
}

#[derive(Debug, Clone, Serialize)]
pub struct RibbonCase {
    pub model: String,
    pub pool: Vec<String>,
    pub seed: u64,
    pub qos_ms: f64,
    pub rate_qps: f64,
    pub configs: usize,
    pub homogeneous: Option<(Vec<u32>, f64)>,
    pub optimum_cost: Option<f64>,
    pub runs: Vec<(String, usize, bool, f64, usize, Option<f64>)>,
    /// After the load grows by [`LOAD_GROWTH`].
    pub load_change: Option<LoadChange>,
}

/// Measurements Ribbon needs to reach the optimum at a grown load, from scratch and
/// warm-started from the search at the old load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadChange {
    pub scratch_evaluations: usize,
    pub scratch_found: bool,
    pub warm_evaluations: usize,
    pub warm_found: bool,
}

/// The load change of the warm-start study (Ribbon Fig. 16: 1.5 times).
pub const LOAD_GROWTH: f64 = 1.5;

/// One model on one pool for one seed: the table, then every strategy on it.
pub fn ribbon_case(
    zoo: &Zoo,
    catalog: &Catalog,
    model: &str,
    pool_types: &[&str],
    seed: u64,
    queries: usize,
) -> anyhow::Result<RibbonCase> {
    let mut pool = PoolModel::load(zoo, catalog, model, pool_types, 1.0)?;
    let workload = Workload::new(queries, BatchSizes::DEFAULT, seed);
    pool.qos_ms = qos_for(&pool, workload.largest());
    let mut sim = SimEvaluator::new(&pool, &workload, Placement::TypeOrder);
    // The load: what about five instances of the first type serve at QoS.
    let one = sim.throughput(&[1, 0, 0], TARGET, 1e5)?;
    let rate = 5.5 * one;
    // m_i: the count beyond which more of type i alone stops helping (Eq. 2).
    let mut max = Vec::new();
    for t in 0..pool.types.len() {
        let mut config = vec![0; pool.types.len()];
        let mut last = -1.0;
        let mut m = 1;
        while m <= MAX_COUNT {
            config[t] = m;
            let s = sim.measure(&config, rate)?.satisfaction;
            if s - last < 0.001 || s >= 0.9999 {
                break;
            }
            last = s;
            m += 1;
        }
        max.push(m.min(MAX_COUNT));
    }
    let space = pool.space(max);
    let table = Table::measure(space.clone(), &mut sim, rate, TARGET)?;
    // The load grows by half (Ribbon §5.5): Ribbon from scratch and warm-started.
    let grown = Table::measure(space, &mut sim, LOAD_GROWTH * rate, TARGET)?;
    let scratch = search::run(Strategy::Ribbon, &grown, seed);
    let load_change = search::run_warm(&table, &grown).map(|warm| LoadChange {
        scratch_evaluations: scratch.evaluations,
        scratch_found: scratch.found,
        warm_evaluations: warm.evaluations,
        warm_found: warm.found,
    });
    let runs = Strategy::ALL
        .iter()
        .map(|&s| search::run(s, &table, seed))
        .map(|r: SearchRun| {
            (
                r.strategy.name().to_owned(),
                r.evaluations,
                r.found,
                r.exploration_share,
                r.violations,
                r.chosen_cost,
            )
        })
        .collect();
    Ok(RibbonCase {
        model: model.to_owned(),
        pool: pool.names(),
        seed,
        qos_ms: pool.qos_ms,
        rate_qps: rate,
        configs: table.configs.len(),
        homogeneous: table.best_homogeneous(),
        optimum_cost: table.optimum_cost(),
        runs,
        load_change,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct KairosCase {
    pub model: String,
    pub qos_ms: f64,
    pub configs: usize,
    pub chosen: Vec<u32>,
    pub bound_qps: f64,
    /// Throughput at QoS of the chosen configuration under each placement.
    pub kairos_qps: f64,
    pub fcfs_qps: f64,
    pub ribbon_order_qps: f64,
    pub homogeneous: (Vec<u32>, f64),
    pub plus_best: Option<Vec<u32>>,
    pub plus_qps: f64,
    pub plus_evaluations: usize,
}

/// Kairos on one model: bounds for every configuration within the budget, the choice by
/// similarity, its throughput under the three placements, the best homogeneous pool and
/// Kairos+.
pub fn kairos_case(
    zoo: &Zoo,
    catalog: &Catalog,
    model: &str,
    scale: Scale,
) -> anyhow::Result<KairosCase> {
    let mut pool = PoolModel::load(zoo, catalog, model, &KAIROS_POOL, 1.0)?;
    let workload = Workload::new(scale.queries, BatchSizes::DEFAULT, 1);
    pool.qos_ms = qos_for(&pool, workload.largest());
    let space = Space::within_budget(pool.names(), pool.prices(), KAIROS_BUDGET);
    let configs = space.configs_within(KAIROS_BUDGET);
    let (base, rates) = kairos::type_rates(
        &workload.batches,
        pool.types.len(),
        |t, b| pool.latency_ms(t, b),
        pool.qos_ms,
    );
    let ranked = kairos::rank(&configs, base, &rates);
    let chosen = kairos::choose_by_similarity(&ranked, base)
        .cloned()
        .unwrap_or_default();
    let bound = kairos::upper_bound(&chosen, base, &rates);
    let ceiling = 1.05 * bound.max(1.0);
    let throughput = |config: &[u32], placement: Placement| {
        SimEvaluator::new(&pool, &workload, placement).throughput(config, TARGET, ceiling)
    };
    let kairos_qps = throughput(&chosen, Placement::Kairos)?;
    let fcfs_qps = throughput(&chosen, Placement::Fcfs)?;
    let ribbon_order_qps = throughput(&chosen, Placement::TypeOrder)?;
    let mut homogeneous = (Vec::new(), 0.0);
    for t in 0..pool.types.len() {
        let mut config = vec![0; pool.types.len()];
        config[t] = space.max[t];
        if config[t] == 0 {
            continue;
        }
        let bound = kairos::upper_bound(&config, base, &rates).max(1.0);
        let qps = SimEvaluator::new(&pool, &workload, Placement::Fcfs).throughput(
            &config,
            TARGET,
            1.05 * bound.max(kairos_qps),
        )?;
        if qps > homogeneous.1 {
            homogeneous = (config, qps);
        }
    }
    let mut measured = 0;
    let plus = kairos::kairos_plus(&ranked, |c| {
        measured += 1;
        if measured > scale.plus_budget {
            return Err(());
        }
        let bound = kairos::upper_bound(c, base, &rates);
        SimEvaluator::new(&pool, &workload, Placement::Kairos)
            .throughput(c, TARGET, 1.05 * bound.max(1.0))
            .map_err(|_| ())
    });
    let (plus_best, plus_qps) = match plus {
        Ok(p) => (p.best, p.best_qps),
        // Out of measurements: the best Kairos+ had seen.
        Err(()) => (None, 0.0),
    };
    Ok(KairosCase {
        model: model.to_owned(),
        qos_ms: pool.qos_ms,
        configs: configs.len(),
        chosen,
        bound_qps: bound,
        kairos_qps,
        fcfs_qps,
        ribbon_order_qps,
        homogeneous,
        plus_best,
        plus_qps,
        plus_evaluations: measured.min(scale.plus_budget),
    })
}

/// `a / b`, or why there is no ratio.
fn ratio(a: f64, b: f64) -> String {
    if b < 1.0 {
        "never meets QoS".to_owned()
    } else {
        format!("{:.2}x", a / b)
    }
}

/// Runs the study, writes its data and plots, and returns its section of the page.
pub fn run(zoo: &Zoo, plots_dir: &Path, data_dir: &Path, scale: Scale) -> anyhow::Result<String> {
    let catalog = Catalog::embedded()?;
    let cases = MODELS.len() as u64 * (RIBBON_POOLS.len() as u64 * scale.seeds + 1);
    let bar = ProgressBar::new(cases).with_style(
        ProgressStyle::with_template("{msg:>32} [{bar:40}] {pos}/{len} cases ({elapsed})")?
            .progress_chars("=> "),
    );
    // One case per core (rayon's pool), in this order; each is deterministic on its own.
    let ribbon_jobs: Vec<(&str, &[&str], u64)> = MODELS
        .iter()
        .flat_map(|&model| {
            RIBBON_POOLS
                .iter()
                .flat_map(move |pool| (0..scale.seeds).map(move |seed| (model, &pool[..], seed)))
        })
        .collect();
    bar.set_message("ribbon and kairos");
    let (ribbon_cases, kairos_cases) = rayon::join(
        || {
            map_counted(&ribbon_jobs, Some(&bar), |&(model, pool, seed)| {
                ribbon_case(zoo, &catalog, model, pool, seed, scale.queries)
            })
        },
        || {
            map_counted(&MODELS, Some(&bar), |&model| {
                kairos_case(zoo, &catalog, model, scale)
            })
        },
    );
    let ribbon_cases = ribbon_cases
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let kairos_cases = kairos_cases
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    bar.finish_and_clear();
    std::fs::write(
        data_dir.join("ribbon.json"),
        serde_json::to_string_pretty(&ribbon_cases)?,
    )?;
    std::fs::write(
        data_dir.join("kairos.json"),
        serde_json::to_string_pretty(&kairos_cases)?,
    )?;
    section(&ribbon_cases, &kairos_cases, plots_dir)
}

fn section(
    ribbon: &[RibbonCase],
    kairos: &[KairosCase],
    plots_dir: &Path,
) -> anyhow::Result<String> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Mixed instance pools: Ribbon and Kairos\n\n\
         One model's pool serving batched queries (Poisson arrivals, heavy-tailed log-normal batch sizes, \
         median 8, at most 128), each instance one query at a time, in `benches/src/hetero` (the policies are \
         `policy/src/{{ribbon,kairos,mix}}.rs`). A batch's latency on a type is the model's profile \
         fitted as `fixed + per_item × batch` and carried to the type by its vCPUs and the catalog's core \
         speeds and GPU model (`common/src/latency.rs`, assumptions listed in `common/data/catalog.toml`). \
         The latency target is 1.3 times the largest query on the pool's fastest type; QoS is met when 99 % \
         of queries are within it.\n"
    );
    // Ribbon: cost at QoS against the best homogeneous pool.
    let mut groups = Vec::new();
    let (mut homogeneous, mut found) = (Vec::new(), Vec::new());
    let _ = writeln!(
        s,
        "### Ribbon: cost at QoS against the best homogeneous pool\n\n\
         The load is 5.5 times what one instance of the pool's first type serves at QoS; `m_i` is where more \
         of type `i` alone stops helping (at most {MAX_COUNT}). Medians over the seeds. The optimum is the \
         cheapest configuration that meets QoS (from measuring all of them); savings are against the cheapest \
         single-type pool that meets QoS (the paper: 9 % to 16 %).\n\n\
         | model | pool | configurations | best homogeneous ($/h) | optimum ($/h) | Ribbon ($/h) | optimum's saving | Ribbon's saving |\n\
         |---|---|---:|---:|---:|---:|---:|---:|"
    );
    for model in MODELS {
        for pool in RIBBON_POOLS {
            let cases: Vec<&RibbonCase> = ribbon
                .iter()
                .filter(|c| c.model == model && c.pool.first().map(String::as_str) == Some(pool[0]))
                .collect();
            let mut homo: Vec<f64> = cases
                .iter()
                .filter_map(|c| c.homogeneous.as_ref().map(|h| h.1))
                .collect();
            let mut picked: Vec<f64> = cases
                .iter()
                .filter_map(|c| {
                    c.runs
                        .iter()
                        .find(|r| r.0 == Strategy::Ribbon.name())
                        .and_then(|r| r.5)
                })
                .collect();
            let mut savings: Vec<f64> = cases
                .iter()
                .filter_map(|c| {
                    let h = c.homogeneous.as_ref()?.1;
                    let r = c.runs.iter().find(|r| r.0 == Strategy::Ribbon.name())?.5?;
                    Some(1.0 - r / h)
                })
                .collect();
            let mut optimum: Vec<f64> = cases.iter().filter_map(|c| c.optimum_cost).collect();
            let mut possible: Vec<f64> = cases
                .iter()
                .filter_map(|c| Some(1.0 - c.optimum_cost? / c.homogeneous.as_ref()?.1))
                .collect();
            let configs = cases.first().map_or(0, |c| c.configs);
            let (h, r) = (median(&mut homo), median(&mut picked));
            let _ = writeln!(
                s,
                "| {model} | {} | {configs} | {h:.3} | {:.3} | {r:.3} | {:.1} % | {:.1} % |",
                pool.join(", "),
                median(&mut optimum),
                100.0 * median(&mut possible),
                100.0 * median(&mut savings)
            );
            groups.push(format!(
                "{model}/{}",
                pool[0].split('.').next().unwrap_or("")
            ));
            homogeneous.push(h);
            found.push(r);
        }
    }
    plots::bars(
        &plots_dir.join("ribbon_cost.png"),
        "Cost at QoS: best homogeneous pool vs Ribbon's mix",
        "USD per hour",
        &groups,
        &[
            ("best homogeneous".to_owned(), homogeneous),
            ("Ribbon".to_owned(), found),
        ],
    )?;
    let mixed = ribbon
        .iter()
        .filter(|c| {
            c.optimum_cost
                .zip(c.homogeneous.as_ref())
                .is_some_and(|(o, h)| o < h.1 - 1e-9)
        })
        .count();
    let _ = writeln!(
        s,
        "\nThe optimum mixes types in {mixed} of {} cases. Mixing pays when a cheaper-per-query type cannot serve \
         every query in time; here it rarely is: c5a.2xlarge is the fastest and the cheapest per vCPU of the first \
         pool, and c5n.2xlarge serves all but the largest batches of the second at a fraction of the GPU's price per \
         query, so the savings come from granularity only (a smaller type rounding up the last instance). The paper's \
         memory-bound recommendation models made r5 and t3 the most cost-effective types, which is where its 9–16 % \
         come from. The catalog's core speeds and GPU model are assumptions (`common/data/catalog.toml`).\n",
        ribbon.len()
    );
    let _ = writeln!(s, "![Ribbon cost](plots/ribbon_cost.png)\n");

    // The searches.
    let _ = writeln!(
        s,
        "### Ribbon against the other searches\n\n\
         All {} cases ({} models × {} pools × {} seeds). Evaluations: configurations measured until the \
         optimum was first measured; exploration cost: their cost over the cost of measuring every \
         configuration (the paper: Ribbon under 3 %, the others 10 % to 20 %).\n\n\
         | search | found the optimum | evaluations (median) | exploration cost (median) | QoS-violating evaluations (median) |\n\
         |---|---:|---:|---:|---:|",
        ribbon.len(),
        MODELS.len(),
        RIBBON_POOLS.len(),
        ribbon.len() / (MODELS.len() * RIBBON_POOLS.len()).max(1)
    );
    let mut evaluations: Vec<(String, Vec<f32>)> = Vec::new();
    let mut shares = Vec::new();
    for strategy in Strategy::ALL {
        let runs: Vec<_> = ribbon
            .iter()
            .filter_map(|c| c.runs.iter().find(|r| r.0 == strategy.name()))
            .collect();
        let found = runs.iter().filter(|r| r.2).count();
        let mut evals: Vec<f64> = runs.iter().map(|r| r.1 as f64).collect();
        let mut share: Vec<f64> = runs.iter().map(|r| r.3).collect();
        let mut violations: Vec<f64> = runs.iter().map(|r| r.4 as f64).collect();
        let _ = writeln!(
            s,
            "| {} | {found}/{} | {:.0} | {:.1} % | {:.0} |",
            strategy.name(),
            runs.len(),
            median(&mut evals),
            100.0 * median(&mut share),
            median(&mut violations)
        );
        evaluations.push((
            strategy.name().to_owned(),
            evals.iter().map(|&e| e as f32).collect(),
        ));
        shares.push(100.0 * median(&mut share));
    }
    let mut excess: Vec<f64> = ribbon
        .iter()
        .filter_map(|c| {
            let r = c.runs.iter().find(|r| r.0 == Strategy::Ribbon.name())?;
            (!r.2).then_some(r.5? / c.optimum_cost? - 1.0)
        })
        .collect();
    let missed = ribbon
        .iter()
        .filter(|c| {
            c.runs
                .iter()
                .any(|r| r.0 == Strategy::Ribbon.name() && !r.2)
        })
        .count();
    if missed > 0 {
        let _ = writeln!(
            s,
            "\nRibbon missed the optimum in {missed} cases: FCFS in type order makes satisfaction non-monotone in the counts \
             (a slow instance that takes a large batch breaks the target), so pruning the sub-configurations of a \
             failing one can cut the optimum off. Where it still found a configuration that meets QoS ({} cases), \
             that cost {:.1} % more than the optimum (median).",
            excess.len(),
            100.0 * median(&mut excess)
        );
    }
    let changes: Vec<&LoadChange> = ribbon
        .iter()
        .filter_map(|c| c.load_change.as_ref())
        .collect();
    if !changes.is_empty() {
        let mut scratch: Vec<f64> = changes
            .iter()
            .map(|c| c.scratch_evaluations as f64)
            .collect();
        let mut warm: Vec<f64> = changes.iter().map(|c| c.warm_evaluations as f64).collect();
        let mut ratio: Vec<f64> = changes
            .iter()
            .map(|c| c.warm_evaluations as f64 / c.scratch_evaluations.max(1) as f64)
            .collect();
        let _ = writeln!(
            s,
            "\nAfter the load grows {LOAD_GROWTH}x ({} cases), Ribbon reaches the new optimum in {:.0} measurements \
             from scratch and {:.0} warm-started from its record (the old optimum re-measured; what did clearly worse \
             than it, by more than θ = 1 %, pruned and fed to the GP as estimates; medians), {:.0} % of the \
             measurements (median per case; the paper: under 60 % of the time). Found: {}/{} from scratch, {}/{} \
             warm; at the higher load the type-order FCFS is further from monotone, so pruning misses more often.",
            changes.len(),
            median(&mut scratch),
            median(&mut warm),
            100.0 * median(&mut ratio),
            changes.iter().filter(|c| c.scratch_found).count(),
            changes.len(),
            changes.iter().filter(|c| c.warm_found).count(),
            changes.len(),
        );
    }
    let boxes: Vec<(String, &[f32])> = evaluations
        .iter()
        .filter(|(n, _)| n != Strategy::Exhaustive.name())
        .map(|(n, v)| (n.clone(), v.as_slice()))
        .collect();
    plots::boxes(
        &plots_dir.join("ribbon_evaluations.png"),
        "Configurations measured before the optimum",
        "evaluations",
        &boxes,
    )?;
    plots::bars(
        &plots_dir.join("ribbon_exploration.png"),
        "Exploration cost, % of measuring every configuration (median)",
        "%",
        &Strategy::ALL
            .iter()
            .map(|s| s.name().to_owned())
            .collect::<Vec<_>>(),
        &[("median".to_owned(), shares)],
    )?;
    let _ = writeln!(
        s,
        "\n![evaluations](plots/ribbon_evaluations.png)\n![exploration](plots/ribbon_exploration.png)\n"
    );

    // Kairos.
    let _ = writeln!(
        s,
        "### Kairos: throughput at QoS within ${KAIROS_BUDGET} per hour\n\n\
         Pool {}. Kairos ranks every configuration within the budget by its upper bound (Eq. 15) and picks \
         by similarity among the top ones (§5.2) without measuring any; that configuration is then served \
         with Kairos' matching, plain FCFS and FCFS in Ribbon's type order. The homogeneous pool is the best \
         single type the budget buys. Kairos+ measures from the highest bound down, pruning by bound and \
         sub-configuration (Algorithm 1; at most {} measurements here). Throughput is the highest Poisson \
         rate with 99 % of queries in time (bisection).\n\n\
         | model | target (ms) | configurations | Kairos pick | bound | Kairos | FCFS | Ribbon order | best homogeneous | Kairos vs homogeneous | vs Ribbon order | vs FCFS | Kairos+ (measured) |\n\
         |---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        KAIROS_POOL.join(", "),
        Scale::FULL.plus_budget
    );
    let mut placement_series = vec![
        ("best homogeneous".to_owned(), Vec::new()),
        ("FCFS".to_owned(), Vec::new()),
        ("Ribbon order".to_owned(), Vec::new()),
        ("Kairos".to_owned(), Vec::new()),
    ];
    for k in kairos {
        let plus = k.plus_best.as_ref().map_or_else(
            || "budget exhausted".to_owned(),
            |c| format!("{c:?} {:.0} q/s ({})", k.plus_qps, k.plus_evaluations),
        );
        let _ = writeln!(
            s,
            "| {} | {:.1} | {} | {:?} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} {:?} | {:.2}x | {} | {} | {plus} |",
            k.model,
            k.qos_ms,
            k.configs,
            k.chosen,
            k.bound_qps,
            k.kairos_qps,
            k.fcfs_qps,
            k.ribbon_order_qps,
            k.homogeneous.1,
            k.homogeneous.0,
            k.kairos_qps / k.homogeneous.1.max(1e-9),
            ratio(k.kairos_qps, k.ribbon_order_qps),
            ratio(k.kairos_qps, k.fcfs_qps),
        );
        for (series, value) in placement_series.iter_mut().zip([
            k.homogeneous.1,
            k.fcfs_qps,
            k.ribbon_order_qps,
            k.kairos_qps,
        ]) {
            series.1.push(value);
        }
    }
    plots::bars(
        &plots_dir.join("kairos_throughput.png"),
        "Throughput at QoS within $2.5/h",
        "queries per second",
        &kairos.iter().map(|k| k.model.clone()).collect::<Vec<_>>(),
        &placement_series,
    )?;
    let _ = writeln!(s, "\n![Kairos throughput](plots/kairos_throughput.png)\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_study_runs_end_to_end() {
        let zoo = Zoo::load(Zoo::locate(None).unwrap()).unwrap();
        let catalog = Catalog::embedded().unwrap();
        let case = ribbon_case(&zoo, &catalog, "resnet", &RIBBON_POOLS[1], 0, 400).unwrap();
        assert!(case.configs > 10);
        // FCFS in type order makes satisfaction non-monotone in the counts (a slow
        // instance that takes a large query breaks it), so Ribbon's pruning may cut the
        // optimum off; what it picks still meets QoS, for less than the homogeneous pool.
        let ribbon = case.runs.iter().find(|r| r.0 == "Ribbon").unwrap();
        let picked = ribbon
            .5
            .expect("Ribbon found a configuration that meets QoS");
        assert!(picked >= case.optimum_cost.unwrap() - 1e-9);
        assert!(
            picked <= case.homogeneous.as_ref().unwrap().1 + 1e-9,
            "{case:?}"
        );
        let exhaustive = case.runs.iter().find(|r| r.0 == "exhaustive").unwrap();
        assert_eq!(exhaustive.1, case.configs);
        assert!(exhaustive.2);
        assert!(ribbon.1 < exhaustive.1);
    }
}
