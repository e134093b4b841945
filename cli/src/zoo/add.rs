//! `cocktail zoo add MODEL.onnx --task NAME`: a manifest entry read from the file itself.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use cocktail_common::Preprocess;
use cocktail_common::zoo::{Profile, TensorSpec, Zoo, sha256_file};
use toml_edit::{Array, ArrayOfTables, InlineTable, Item, Table, Value};

use super::model::{inspect, pick_output};
use super::preprocess::{ImageFlags, image};
use super::{check_name, copy_in, in_zoo, read_doc};

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The ONNX file; it is copied into the zoo's folder (as NAME.onnx) unless it is
    /// already inside it, where it stays.
    model: PathBuf,
    /// The task the model classifies for (made by `cocktail zoo init`).
    #[arg(long)]
    task: String,
    /// The model's name in the zoo (default: the file's stem).
    #[arg(long)]
    name: Option<String>,
    /// The output holding the logits, when several are [batch, classes].
    #[arg(long)]
    output: Option<String>,
    /// Image preprocessing from timm's config.json or a Hugging Face preprocessor_config.json.
    #[arg(long, conflicts_with_all = ["tokenizer", "kind"])]
    preprocess_from: Option<PathBuf>,
    /// A Hugging Face tokenizer.json for a text model (copied into the zoo's folder as
    /// NAME.tokenizer.json unless it is already inside it, where it stays).
    #[arg(long, conflicts_with = "kind")]
    tokenizer: Option<PathBuf>,
    /// The longest token sequence fed to a text model.
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// `tensor`: requests carry the model's input tensors, no preprocessing.
    #[arg(long, value_parser = ["tensor"])]
    kind: Option<String>,
    #[command(flatten)]
    image: ImageFlags,
    /// Top-1 accuracy in [0, 1] (e.g. the published figure), spread evenly over the
    /// classes until `cocktail zoo evaluate` measures it on a labelled set.
    #[arg(long)]
    accuracy: f64,
    /// The architecture, shown in listings (default: the model's name).
    #[arg(long)]
    arch: Option<String>,
    /// One line about the model.
    #[arg(long)]
    description: Option<String>,
    /// Parameter count, shown in listings (0: not given).
    #[arg(long, default_value_t = 0)]
    params: u64,
    /// Training examples, shown in listings (0: not given).
    #[arg(long, default_value_t = 0)]
    train_examples: u64,
    /// Training epochs, shown in listings (0: not given).
    #[arg(long, default_value_t = 0)]
    epochs: u32,
    /// Keep the `[models.profile]` that `cocktail profile` measured for this model in
    /// another manifest (e.g. the one being rebuilt): taken from its entry of the same
    /// name when that entry's sha256 is this file's.
    #[arg(long, value_name = "MANIFEST")]
    profile_from: Option<PathBuf>,
}

pub fn run(manifest: &Path, ort_lib: Option<&Path>, args: &AddArgs) -> anyhow::Result<()> {
    let zoo = Zoo::load(manifest)?;
    let task = zoo.task(&args.task).with_context(|| {
        format!(
            "`{}` has no task `{}`; make it with `cocktail zoo init {} --task {} --labels FILE`",
            manifest.display(),
            args.task,
            zoo.root().display(),
            args.task
        )
    })?;
    let classes = task.labels.len();
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .context("the model's path has no file name; pass --name")?,
    };
    check_name("model", &name)?;
    if zoo.model(&name).is_ok() {
        bail!(
            "`{}` already has a model `{name}`; pass another --name",
            manifest.display()
        );
    }
    if !(0.0..=1.0).contains(&args.accuracy) {
        bail!("--accuracy must be in [0, 1]; given {}", args.accuracy);
    }
    let signature = inspect(&args.model, ort_lib)?;
    let output = pick_output(
        &args.model,
        &signature.outputs,
        classes,
        &args.task,
        args.output.as_deref(),
    )?;
    // Files already inside the zoo's folder are referenced where they are.
    let model_in_zoo = in_zoo(zoo.root(), &args.model);
    let file = model_in_zoo
        .clone()
        .unwrap_or_else(|| format!("{name}.onnx"));
    let tokenizer_in_zoo = args
        .tokenizer
        .as_deref()
        .and_then(|t| in_zoo(zoo.root(), t));
    let tokenizer_file = tokenizer_in_zoo
        .clone()
        .unwrap_or_else(|| format!("{name}.tokenizer.json"));
    let preprocess = preprocess(args, &signature.inputs, &tokenizer_file)?;
    if let Err(message) = preprocess.check(&signature.inputs) {
        bail!("`{}`: {message}", args.model.display());
    }
    let mut copies: Vec<(PathBuf, PathBuf)> = Vec::new();
    if model_in_zoo.is_none() {
        copies.push((args.model.clone(), zoo.resolve(&file)));
    }
    if let (Some(tokenizer), None) = (&args.tokenizer, &tokenizer_in_zoo) {
        copies.push((tokenizer.clone(), zoo.resolve(&tokenizer_file)));
    }
    // A file already in the zoo's folder with the same bytes (one that `cocktail zoo
    // remove` left, say) is used where it is; other bytes under its name are refused.
    let mut kept = Vec::with_capacity(copies.len());
    for (from, to) in copies {
        if !to.exists() {
            kept.push((from, to));
        } else if sha256_file(&from)? != sha256_file(&to)? {
            bail!(
                "`{}` already exists in the zoo's folder with other contents; pass another --name or remove the file",
                to.display()
            );
        }
    }
    let copies = kept;
    let sha256 = sha256_file(&args.model)?;
    let mut entry = entry(
        args,
        &name,
        &file,
        &sha256,
        &output,
        &signature.inputs,
        &preprocess,
        classes,
    )?;
    let kept = match &args.profile_from {
        Some(other) => kept_profile(other, &name, &sha256)?,
        None => None,
    };
    if let Some(profile) = &kept {
        entry.insert(
            "profile",
            Item::Table(crate::profile::profile_table(profile)),
        );
    }

    // Copy the files, then swap the manifest; undo the copies if the manifest fails.
    let mut copied = Vec::new();
    let result = (|| -> anyhow::Result<()> {
        for (from, to) in &copies {
            copy_in(from, to)?;
            copied.push(to.clone());
        }
        let mut doc = read_doc(manifest)?;
        let models = doc
            .entry("models")
            .or_insert_with(|| Item::ArrayOfTables(ArrayOfTables::new()))
            .as_array_of_tables_mut()
            .with_context(|| format!("`{}`: `models` is not [[models]]", manifest.display()))?;
        models.push(entry);
        super::write_manifest(manifest, &doc)
    })();
    if let Err(error) = result {
        for path in copied {
            let _ = std::fs::remove_file(path);
        }
        return Err(error);
    }
    println!(
        "added `{name}` to task `{}`: {} -> output `{output}` [batch, {classes}], sha256 {}",
        args.task,
        signature
            .inputs
            .iter()
            .map(|i| format!("`{}` {:?} {:?}", i.name, i.dtype, i.shape))
            .collect::<Vec<_>>()
            .join(", "),
        &sha256[..12]
    );
    match (&args.profile_from, &kept) {
        (Some(_), Some(profile)) => println!("kept its profile measured on {}", profile.host),
        (Some(other), None) => println!(
            "`{}` has no profile of this file for `{name}`; measure it with `cocktail profile --models {name}`",
            other.display()
        ),
        (None, _) => {}
    }
    Ok(())
}

/// The profile of model `name` in the manifest `other`, when its file there is the same
/// (same sha256): what `cocktail profile` measured stays valid for the same bytes.
fn kept_profile(other: &Path, name: &str, sha256: &str) -> anyhow::Result<Option<Profile>> {
    let zoo = Zoo::load(other).with_context(|| format!("--profile-from `{}`", other.display()))?;
    Ok(zoo
        .model(name)
        .ok()
        .filter(|m| m.sha256 == sha256)
        .and_then(|m| m.profile.clone()))
}

fn preprocess(
    args: &AddArgs,
    inputs: &[TensorSpec],
    tokenizer_file: &str,
) -> anyhow::Result<Preprocess> {
    if args.kind.is_some() {
        return Ok(Preprocess::Tensor);
    }
    if let Some(tokenizer) = &args.tokenizer {
        if !tokenizer.is_file() {
            bail!("the tokenizer `{}` does not exist", tokenizer.display());
        }
        // The worker's own loader: a file it cannot read is refused now, not at start.
        cocktail_worker::preprocess::TextPreprocessor::load(tokenizer, args.max_tokens)
            .with_context(|| {
                format!(
                    "give a Hugging Face tokenizer.json (as `tokenizer.save()` writes it) to --tokenizer instead of `{}`",
                    tokenizer.display()
                )
            })?;
        return Ok(Preprocess::Text {
            tokenizer: tokenizer_file.to_owned(),
            max_tokens: args.max_tokens,
        });
    }
    match image(
        args.preprocess_from.as_deref(),
        &args.image,
        inputs,
        &args.model,
    )? {
        Some(p) => Ok(p),
        None => bail!(
            "say how `{}` is fed: --preprocess-from CONFIG (timm's config.json or a Hugging Face preprocessor_config.json), image flags (--mean, --std, --interpolation, ...), --tokenizer tokenizer.json, or --kind tensor",
            args.model.display()
        ),
    }
}

#[allow(clippy::too_many_arguments)]
fn entry(
    args: &AddArgs,
    name: &str,
    file: &str,
    sha256: &str,
    output: &str,
    inputs: &[TensorSpec],
    preprocess: &Preprocess,
    classes: usize,
) -> anyhow::Result<Table> {
    let mut t = Table::new();
    t.insert("name", toml_edit::value(name));
    t.insert("task", toml_edit::value(&args.task));
    t.insert("file", toml_edit::value(file));
    t.insert("sha256", toml_edit::value(sha256));
    t.insert(
        "arch",
        toml_edit::value(args.arch.as_deref().unwrap_or(name)),
    );
    let description = args.description.clone().unwrap_or_else(|| {
        format!(
            "added by `cocktail zoo add` from {}; accuracy given, not measured here",
            args.model.display()
        )
    });
    t.insert("description", toml_edit::value(description));
    t.insert("params", toml_edit::value(i64::try_from(args.params)?));
    t.insert(
        "train_examples",
        toml_edit::value(i64::try_from(args.train_examples)?),
    );
    t.insert("epochs", toml_edit::value(i64::from(args.epochs)));
    t.insert("accuracy", toml_edit::value(args.accuracy));
    t.insert(
        "class_accuracy",
        toml_edit::value(Array::from_iter(std::iter::repeat_n(
            args.accuracy,
            classes,
        ))),
    );
    t.insert("output", toml_edit::value(output));
    let mut array = Array::new();
    for input in inputs {
        let mut spec = InlineTable::new();
        spec.insert("name", input.name.as_str().into());
        spec.insert("dtype", to_edit(&toml::Value::try_from(input.dtype)?));
        spec.insert(
            "shape",
            Value::Array(Array::from_iter(input.shape.iter().copied())),
        );
        array.push(spec);
    }
    t.insert("inputs", toml_edit::value(array));
    t.insert(
        "preprocess",
        toml_edit::value(to_edit(&toml::Value::try_from(preprocess)?)),
    );
    Ok(t)
}

/// The order of the `preprocess` block's fields in the manifest (as in the struct).
const KEY_ORDER: [&str; 14] = [
    "kind",
    "colour",
    "input_size",
    "interpolation",
    "crop_pct",
    "crop_mode",
    "resize_size",
    "scale",
    "mean",
    "std",
    "layout",
    "dtype",
    "tokenizer",
    "max_tokens",
];

/// A serialised value as an inline `toml_edit` value. Floats are written as their
/// shortest f32 form: every float of the block is an f32 (or a crop fraction), so
/// 0.485 stays `0.485` instead of the f32's exact expansion `0.48500001430511475`.
fn to_edit(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => s.as_str().into(),
        toml::Value::Integer(i) => (*i).into(),
        toml::Value::Float(f) => {
            let short: f64 = format!("{}", *f as f32).parse().unwrap_or(*f);
            short.into()
        }
        toml::Value::Boolean(b) => (*b).into(),
        toml::Value::Datetime(d) => d.to_string().into(),
        toml::Value::Array(items) => Value::Array(items.iter().map(to_edit).collect()),
        toml::Value::Table(table) => {
            // `toml`'s tables are sorted; write the fields in the manifest's own order.
            let rank = |k: &str| KEY_ORDER.iter().position(|o| *o == k).unwrap_or(usize::MAX);
            let mut keys: Vec<&String> = table.keys().collect();
            keys.sort_by_key(|k| rank(k));
            let mut inline = InlineTable::new();
            for k in keys {
                inline.insert(k, to_edit(&table[k]));
            }
            Value::InlineTable(inline)
        }
    }
}
