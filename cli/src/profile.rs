//! `cocktail profile`: re-measures every model's latency per batch size and intra-op
//! thread count through ONNX Runtime on this machine, derives its packing factor
//! ([`cocktail_common::zoo::packing_factor`]), and rewrites the `[models.profile]` tables of
//! the manifest (and only those) plus the table in the README.md next to it, when there is one.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use cocktail_common::zoo::packing_factor;
use cocktail_common::{Input, ModelEntry, Profile, TestSet, Zoo};
use cocktail_worker::preprocess::Preprocessor;
use cocktail_worker::{Backend, Batch, OnnxBackend};
use indicatif::{ProgressBar, ProgressStyle};
use toml_edit::{Array, DocumentMut, Item, Table, Value, value};

#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// Only these models (comma-separated names); default: every model.
    #[arg(long, env = "COCKTAIL_PROFILE_MODELS", value_delimiter = ',')]
    models: Vec<String>,
    /// Intra-op thread counts to measure (how instance sizes are emulated locally).
    #[arg(
        long,
        env = "COCKTAIL_PROFILE_THREADS",
        value_delimiter = ',',
        default_value = "1,2"
    )]
    threads: Vec<usize>,
    /// Batch sizes to measure, ascending, starting at 1.
    #[arg(
        long,
        env = "COCKTAIL_PROFILE_BATCH_SIZES",
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32"
    )]
    batch_sizes: Vec<usize>,
    /// Least time spent measuring each point, in milliseconds (at least 5 runs each).
    #[arg(long, env = "COCKTAIL_PROFILE_MIN_TIME_MS", default_value_t = 300)]
    min_time_ms: u64,
    /// Print the measurements without rewriting any file.
    #[arg(long)]
    dry_run: bool,
}

const MIN_RUNS: usize = 5;
const WARMUP_RUNS: usize = 3;

pub fn run(
    zoo_path: Option<&Path>,
    ort_lib: Option<&Path>,
    args: &ProfileArgs,
) -> anyhow::Result<()> {
    ensure!(
        args.batch_sizes.first() == Some(&1) && args.batch_sizes.windows(2).all(|w| w[0] < w[1]),
        "`--batch-sizes` must be ascending and start at 1; given {:?}",
        args.batch_sizes
    );
    ensure!(
        !args.threads.is_empty() && args.threads.iter().all(|&t| (1..=256).contains(&t)),
        "`--threads` must be between 1 and 256; given {:?}",
        args.threads
    );
    cocktail_onnx::environment(ort_lib)?;
    let manifest = Zoo::locate(zoo_path)?;
    let zoo = Zoo::load(&manifest)?;
    let models: Vec<&ModelEntry> = zoo
        .models()
        .iter()
        .filter(|m| args.models.is_empty() || args.models.contains(&m.name))
        .collect();
    if let Some(unknown) = args
        .models
        .iter()
        .find(|n| !models.iter().any(|m| &m.name == *n))
    {
        bail!("`--models`: unknown model `{unknown}`");
    }

    let points = models.len() * args.threads.len() * args.batch_sizes.len();
    let bar = ProgressBar::new(points as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} points, eta {eta} · {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let host = host_description();
    let mut test_sets: BTreeMap<String, TestSet> = BTreeMap::new();
    let mut profiles = BTreeMap::new();
    for model in models {
        bar.set_message(model.name.clone());
        if !test_sets.contains_key(&model.task) {
            test_sets.insert(model.task.clone(), TestSet::load(&zoo, &model.task)?);
        }
        let test_set = test_sets.get(&model.task).context("test set just loaded")?;
        let profile = profile_model(&zoo, model, test_set, ort_lib, args, &host, &bar)
            .with_context(|| format!("profiling `{}`", model.name))?;
        profiles.insert(model.name.clone(), profile);
    }
    bar.finish_and_clear();

    print_summary(&profiles);
    if args.dry_run {
        return Ok(());
    }
    rewrite_manifest(&manifest, &profiles)?;
    let zoo = Zoo::load(&manifest)?;
    // The project's zoo lists its models in its README; a zoo without one has no table.
    let readme = zoo.root().join("README.md");
    if readme.is_file() {
        super::table::rewrite_readme(&readme, &zoo)?;
    }
    println!(
        "rewrote the profiles of {} models in {}",
        profiles.len(),
        manifest.display()
    );
    Ok(())
}

fn profile_model(
    zoo: &Zoo,
    model: &ModelEntry,
    test_set: &TestSet,
    ort_lib: Option<&Path>,
    args: &ProfileArgs,
    host: &str,
    bar: &ProgressBar,
) -> anyhow::Result<Profile> {
    let preprocessor = Preprocessor::for_model(zoo, model)?;
    let largest = args.batch_sizes.last().copied().unwrap_or(1);
    let (inputs, seq_len) = sample_inputs(&preprocessor, test_set, largest)?;
    let min_time = Duration::from_millis(args.min_time_ms);
    let mut latency_us = Vec::new();
    let mut packing = Vec::new();
    for &threads in &args.threads {
        let mut backend = OnnxBackend::load(zoo, model, threads, ort_lib)?;
        let mut row = Vec::new();
        for &size in &args.batch_sizes {
            let batch = preprocessor.batch(&inputs[..size])?;
            row.push(median_latency_us(&mut backend, &batch, min_time)?);
            bar.inc(1);
        }
        packing.push(packing_factor(&args.batch_sizes, &row));
        latency_us.push(row);
    }
    Ok(Profile {
        host: host.to_owned(),
        seq_len,
        threads: args.threads.clone(),
        batch_sizes: args.batch_sizes.clone(),
        latency_us,
        packing_factor: packing,
    })
}

/// Inputs to measure with: the first test images, or the test sentence of median token
/// length repeated (a batch of equal lengths, so batch size is the only variable).
fn sample_inputs(
    preprocessor: &Preprocessor,
    test_set: &TestSet,
    count: usize,
) -> anyhow::Result<(Vec<Input>, Option<usize>)> {
    ensure!(
        test_set.len() >= count,
        "the test set has fewer than {count} items"
    );
    match preprocessor {
        Preprocessor::Image(_) => Ok((test_set.items[..count].to_vec(), None)),
        Preprocessor::Text(text) => {
            let mut lengths = Vec::with_capacity(test_set.len());
            for (index, item) in test_set.items.iter().enumerate() {
                if let Input::Text(sentence) = item {
                    lengths.push((text.encode(sentence)?.len(), index));
                }
            }
            lengths.sort_unstable();
            let Some((tokens, median)) = cocktail_benches::stats::upper_median(&lengths) else {
                bail!("the test set holds no text");
            };
            Ok((vec![test_set.items[median].clone(); count], Some(tokens)))
        }
        Preprocessor::Tensor(_) => bail!(
            "profiling a `kind = \"tensor\"` model needs a tensor test set, which the manifest cannot name yet"
        ),
    }
}

fn median_latency_us(
    backend: &mut OnnxBackend,
    batch: &Batch,
    min_time: Duration,
) -> anyhow::Result<f64> {
    for _ in 0..WARMUP_RUNS {
        backend.infer(batch)?;
    }
    let mut samples = Vec::new();
    let started = Instant::now();
    while samples.len() < MIN_RUNS || started.elapsed() < min_time {
        let t = Instant::now();
        backend.infer(batch)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(cocktail_benches::stats::median(&mut samples))
}

fn host_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|name| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "{cpu}, {cores} cores, onnxruntime {}",
        cocktail_onnx::ORT_VERSION
    )
}

fn print_summary(profiles: &BTreeMap<String, Profile>) {
    println!(
        "{:<16} {:>8} {:>12} {:>12} {:>12}",
        "model", "threads", "b=1 (µs)", "b=32 (µs)", "Pf"
    );
    for (name, p) in profiles {
        for (row, threads) in p.threads.iter().enumerate() {
            let first = p.latency_us[row].first().copied().unwrap_or(f64::NAN);
            let last = p.latency_us[row].last().copied().unwrap_or(f64::NAN);
            println!(
                "{name:<16} {threads:>8} {first:>12.1} {last:>12.1} {:>12}",
                p.packing_factor[row]
            );
        }
    }
}

/// Replaces the `profile` table of each measured model, leaving every other byte alone.
fn rewrite_manifest(manifest: &Path, profiles: &BTreeMap<String, Profile>) -> anyhow::Result<()> {
    let original = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let mut doc: DocumentMut = original.parse().context("parsing the manifest")?;
    let models = doc
        .get_mut("models")
        .and_then(Item::as_array_of_tables_mut)
        .context("the manifest has no [[models]]")?;
    for table in models.iter_mut() {
        let Some(name) = table.get("name").and_then(Item::as_str).map(str::to_owned) else {
            continue;
        };
        if let Some(profile) = profiles.get(&name) {
            table.insert("profile", Item::Table(profile_table(profile)));
        }
    }
    std::fs::write(manifest, doc.to_string())
        .with_context(|| format!("writing {}", manifest.display()))?;
    if let Err(error) = Zoo::load(manifest) {
        std::fs::write(manifest, original)
            .with_context(|| format!("restoring {}", manifest.display()))?;
        bail!("the rewritten manifest did not load, so it was restored: {error}");
    }
    Ok(())
}

pub(crate) fn profile_table(p: &Profile) -> Table {
    let ints = |xs: &[usize]| Array::from_iter(xs.iter().map(|&x| x as i64));
    let mut t = Table::new();
    t.insert("host", value(p.host.as_str()));
    if let Some(seq_len) = p.seq_len {
        t.insert("seq_len", value(seq_len as i64));
    }
    t.insert("threads", value(ints(&p.threads)));
    t.insert("batch_sizes", value(ints(&p.batch_sizes)));
    let rows = p.latency_us.iter().map(|row| {
        Value::Array(Array::from_iter(
            row.iter().map(|&us| (us * 10.0).round() / 10.0),
        ))
    });
    t.insert("latency_us", value(Array::from_iter(rows)));
    t.insert(
        "packing_factor",
        value(Array::from_iter(
            p.packing_factor.iter().map(|&pf| i64::from(pf)),
        )),
    );
    t
}
