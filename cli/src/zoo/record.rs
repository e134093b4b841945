//! `cocktail zoo record --task NAME --images IDX --labels IDX --out PATH`: every model's
//! answers on a labelled IDX set that is not the task's test set, such as a corrupted
//! copy of it (`models/data/fashion-c/`), in the recorded-answers format selection and
//! the drift schedules read. Unlike `evaluate`, it leaves the manifest and the task's
//! own recorded answers alone: the set shifts what the models see, not what they are.
//! The full probability vectors go next to `--out`, as `evaluate` writes them.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use cocktail_common::testset::{read_idx_images, read_idx_labels};
use cocktail_common::{Input, Zoo};

use super::evaluate::{Items, answer, answers_table, gzip, probabilities_table};
use super::{commit, temp_path};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The task whose models answer.
    #[arg(long)]
    task: String,
    /// The images: a gzip'd IDX3 file of 8-bit grey images.
    #[arg(long)]
    images: PathBuf,
    /// Their true classes: a gzip'd IDX1 file, one per image.
    #[arg(long)]
    labels: PathBuf,
    /// Where the answers go (`.tsv.gz`); written whole or not at all.
    #[arg(long)]
    out: PathBuf,
}

pub fn run(manifest: &Path, ort_lib: Option<&Path>, args: &RecordArgs) -> anyhow::Result<()> {
    let zoo = Zoo::load(manifest)?;
    let classes = zoo.task(&args.task)?.labels.len();
    let models: Vec<_> = zoo.models_for(&args.task).cloned().collect();
    if models.is_empty() {
        bail!(
            "task `{}` has no models; add them with `cocktail zoo add`",
            args.task
        );
    }
    let images = read_idx_images(&args.images)?;
    let labels = read_idx_labels(&args.labels)?;
    if images.len() != labels.len() {
        bail!(
            "`{}` holds {} images but `{}` {} labels: give one label per image",
            args.images.display(),
            images.len(),
            args.labels.display(),
            labels.len()
        );
    }
    if let Some(bad) = labels.iter().find(|&&l| l >= classes) {
        bail!(
            "`{}`: label {bad} is not below task `{}`'s {classes} classes",
            args.labels.display(),
            args.task
        );
    }
    let items = Items::Inputs(images.into_iter().map(Input::Image).collect());
    let source = args.images.display().to_string();
    let answers = answer(&zoo, &models, &items, &source, ort_lib)?;
    if let Some(folder) = args.out.parent() {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("creating `{}`", folder.display()))?;
    }
    let out = args.out.to_string_lossy();
    let full = PathBuf::from(cocktail_common::predictions::probabilities_path(&out));
    let tables = [
        (&args.out, answers_table(&models, &labels, &answers)),
        (&full, probabilities_table(&models, &answers, classes)),
    ];
    let mut temps = Vec::new();
    for (target, text) in &tables {
        let temp = temp_path(target);
        if let Err(error) = gzip(&temp, text) {
            for t in temps.iter().chain([&temp]) {
                let _ = std::fs::remove_file(t);
            }
            return Err(error);
        }
        temps.push(temp);
    }
    for (temp, (target, _)) in temps.iter().zip(&tables) {
        commit(temp, target)?;
    }
    println!(
        "recorded {} models' answers on {} items: {}",
        models.len(),
        labels.len(),
        args.out.display()
    );
    Ok(())
}
