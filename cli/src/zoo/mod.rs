//! `cocktail zoo`: builds and checks a zoo manifest from ONNX files and label files.
//!
//! Every write goes to a temporary file in the manifest's folder and is renamed over the
//! manifest only once the new manifest loads, so a command that fails leaves it as it
//! was. `toml_edit` keeps the manifest's comments and order.

mod add;
mod check;
mod evaluate;
mod gain;
mod init;
mod labels;
mod model;
mod preprocess;
mod record;
mod remove;

use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use cocktail_common::Zoo;
use toml_edit::DocumentMut;

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
    Init(init::InitArgs),
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
    /// Record every model's answers on a labelled IDX set other than the task's test set
    /// (a corrupted copy of it, for a drift schedule); the manifest is left as it is.
    Record(record::RecordArgs),
}

pub fn run(zoo: Option<&Path>, ort_lib: Option<&Path>, args: &ZooArgs) -> anyhow::Result<()> {
    match &args.command {
        ZooCommand::Init(args) => init::run(args),
        ZooCommand::Add(add) => add::run(&Zoo::locate(zoo)?, ort_lib, add),
        ZooCommand::Remove(remove) => remove::run(&Zoo::locate(zoo)?, remove),
        ZooCommand::Check => check::run(&Zoo::locate(zoo)?, ort_lib),
        ZooCommand::Evaluate(evaluate) => evaluate::run(&Zoo::locate(zoo)?, ort_lib, evaluate),
        ZooCommand::Record(record) => record::run(&Zoo::locate(zoo)?, ort_lib, record),
    }
}

/// Names go into file names and TOML keys: keep them plain.
fn check_name(what: &str, name: &str) -> anyhow::Result<()> {
    if !cocktail_common::zoo::is_plain_name(name) {
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
    write_checked(manifest, doc, |_| Ok(()))
}

/// Writes the manifest atomically once its new text loads as a zoo and passes `check`.
fn write_checked(
    manifest: &Path,
    doc: &DocumentMut,
    check: impl Fn(&Zoo) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let temp = temp_path(manifest);
    std::fs::write(&temp, doc.to_string())
        .with_context(|| format!("writing `{}`", temp.display()))?;
    let loaded = Zoo::load(&temp)
        .map_err(anyhow::Error::from)
        .and_then(|zoo| check(&zoo));
    if let Err(error) = loaded {
        let _ = std::fs::remove_file(&temp);
        bail!(
            "the new manifest would not load, so `{}` is left as it was: {error:#}",
            manifest.display()
        );
    }
    commit(&temp, manifest)
}

/// Where `path` is inside the zoo's folder `root` (`fashion/linear.onnx`), when it is a
/// file there: such a file is referenced where it is instead of copied in.
fn in_zoo(root: &Path, path: &Path) -> Option<String> {
    let root = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    let root = std::fs::canonicalize(root).ok()?;
    let path = std::fs::canonicalize(path).ok()?;
    if !path.is_file() {
        return None;
    }
    let parts = path
        .strip_prefix(&root)
        .ok()?
        .components()
        .map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Copies `from` to `to` through a temporary file next to `to`.
fn copy_in(from: &Path, to: &Path) -> anyhow::Result<()> {
    let temp = temp_path(to);
    if let Err(error) = std::fs::copy(from, &temp) {
        let _ = std::fs::remove_file(&temp);
        bail!(
            "copying `{}` to `{}`: {error}",
            from.display(),
            temp.display()
        );
    }
    commit(&temp, to)
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
