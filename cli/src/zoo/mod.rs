//! `cocktail zoo`: builds and checks a zoo manifest from ONNX files and label files.
//!
//! Every write goes to a temporary file in the manifest's folder and is renamed over the
//! manifest only once the new manifest loads, so a command that fails leaves it as it
//! was. `toml_edit` keeps the manifest's comments and order.

mod add;
mod check;
mod evaluate;
mod gain;
mod labels;
mod model;
mod preprocess;
mod remove;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use cocktail_common::Zoo;
use toml_edit::{Array, DocumentMut, Item, Table};

pub use add::AddArgs;

/// `cocktail zoo ...`
#[derive(Debug, Args)]
pub struct ZooArgs {
    #[command(subcommand)]
    command: ZooCommand,
}

#[derive(Debug, Subcommand)]
enum ZooCommand {
    /// Make DIR/zoo.toml with one task whose classes come from FILE (one per line, timm's
    /// config.json or TorchServe's index_to_name.json); on an existing manifest, add the task.
    Init(InitArgs),
    /// Add an ONNX model to a task: inputs, outputs and sha256 read from the file, the
    /// output whose width is the task's class count, preprocessing from a config or flags.
    Add(Box<AddArgs>),
    /// Take a model out of the manifest (its file stays); a running master drops it when
    /// it reloads the zoo (SIGHUP or `POST /v1/zoo/reload`).
    Remove(remove::RemoveArgs),
    /// Validate the manifest and the files it names; prints what to fix.
    Check,
    /// Run every model of a task over a labelled set (ImageFolder, or CSV/TSV with `text`
    /// and `label`); write accuracies and recorded answers.
    Evaluate(evaluate::EvaluateArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The zoo's folder; the manifest is DIR/zoo.toml.
    dir: PathBuf,
    /// The task's name.
    #[arg(long)]
    task: String,
    /// The class names: a text file (one per line), timm's config.json (`label_names`,
    /// with `label_descriptions` when present) or TorchServe's index_to_name.json.
    #[arg(long)]
    labels: PathBuf,
}

pub fn run(zoo: Option<&Path>, ort_lib: Option<&Path>, args: &ZooArgs) -> anyhow::Result<()> {
    match &args.command {
        ZooCommand::Init(init) => run_init(init),
        ZooCommand::Add(add) => add::run(&Zoo::locate(zoo)?, ort_lib, add),
        ZooCommand::Remove(remove) => remove::run(&Zoo::locate(zoo)?, remove),
        ZooCommand::Check => check::run(&Zoo::locate(zoo)?, ort_lib),
        ZooCommand::Evaluate(evaluate) => evaluate::run(&Zoo::locate(zoo)?, ort_lib, evaluate),
    }
}

fn run_init(args: &InitArgs) -> anyhow::Result<()> {
    let labels = labels::read(&args.labels)?;
    check_name("task", &args.task)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating the folder `{}`", args.dir.display()))?;
    let manifest = args.dir.join("zoo.toml");
    let mut doc = if manifest.exists() {
        let doc = read_doc(&manifest)?;
        if doc
            .get("tasks")
            .and_then(Item::as_table_like)
            .is_some_and(|t| t.contains_key(&args.task))
        {
            bail!(
                "`{}` already has task `{}`; pick another --task name",
                manifest.display(),
                args.task
            );
        }
        doc
    } else {
        format!(
            "# The zoo manifest, made by `cocktail zoo init`; add models with `cocktail --zoo {} zoo add MODEL.onnx --task {}`.\nschema = {}\n",
            manifest.display(),
            args.task,
            cocktail_common::zoo::SCHEMA
        )
        .parse()
        .context("the new manifest's header")?
    };
    let tasks = doc
        .entry("tasks")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .with_context(|| format!("`{}`: `tasks` is not a table", manifest.display()))?;
    let mut task = Table::new();
    task.insert(
        "labels",
        toml_edit::value(Array::from_iter(labels.iter().map(String::as_str))),
    );
    tasks.insert(&args.task, Item::Table(task));
    write_manifest(&manifest, &doc)?;
    println!(
        "{}: task `{}` with {} classes ({} ... {})",
        manifest.display(),
        args.task,
        labels.len(),
        labels.first().map_or("", String::as_str),
        labels.last().map_or("", String::as_str)
    );
    Ok(())
}

/// Names go into file names and TOML keys: keep them plain.
fn check_name(what: &str, name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.');
    if !ok {
        bail!("{what} name `{name}` must be 1 to 64 letters, digits, `_`, `-` or `.` (not first)");
    }
    Ok(())
}

fn read_doc(manifest: &Path) -> anyhow::Result<DocumentMut> {
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading `{}`", manifest.display()))?;
    text.parse()
        .with_context(|| format!("`{}` is not valid TOML", manifest.display()))
}

/// A temporary file next to `target`, renamed over it by [`commit`].
fn temp_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    target.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes the manifest atomically once its new text loads as a zoo.
fn write_manifest(manifest: &Path, doc: &DocumentMut) -> anyhow::Result<()> {
    let temp = temp_path(manifest);
    std::fs::write(&temp, doc.to_string())
        .with_context(|| format!("writing `{}`", temp.display()))?;
    if let Err(error) = Zoo::load(&temp) {
        let _ = std::fs::remove_file(&temp);
        bail!(
            "the new manifest would not load, so `{}` is left as it was: {error}",
            manifest.display()
        );
    }
    commit(&temp, manifest)
}

/// Renames `temp` over `target`, removing `temp` if that fails.
fn commit(temp: &Path, target: &Path) -> anyhow::Result<()> {
    std::fs::rename(temp, target).map_err(|error| {
        let _ = std::fs::remove_file(temp);
        anyhow::anyhow!(
            "renaming `{}` to `{}`: {error}",
            temp.display(),
            target.display()
        )
    })
}
