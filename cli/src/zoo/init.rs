//! `cocktail zoo init DIR --task NAME --labels FILE`: a task with its classes and, when
//! given, its labelled test set (IDX or TSV), which `evaluate` runs on without `--data`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use cocktail_common::TestSet;
use toml_edit::{Array, InlineTable, Item, Table};

use super::{check_name, copy_in, in_zoo, labels, read_doc, write_checked};

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
    /// The task's test set as gzip'd IDX files, as (Fashion-)MNIST ships them: the images
    /// (28x28 grey), then the class ids. Files outside DIR are copied to DIR/data/TASK/.
    #[arg(long, num_args = 2, value_names = ["IMAGES", "LABELS"], conflicts_with = "test_tsv")]
    test_idx: Option<Vec<PathBuf>>,
    /// The task's test set as a TSV file with the header `label<TAB>source<TAB>text` (class
    /// ids, then any source, then the text). A file outside DIR is copied to DIR/data/TASK/.
    #[arg(long)]
    test_tsv: Option<PathBuf>,
}

pub fn run(args: &InitArgs) -> anyhow::Result<()> {
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

    // The test set's files: referenced where they are inside the folder, else copied in.
    let (format, files): (&str, Vec<(&str, &PathBuf)>) =
        match (args.test_idx.as_deref(), &args.test_tsv) {
            (Some([images, labels]), _) => ("idx", vec![("images", images), ("labels", labels)]),
            (Some(_), _) => bail!("--test-idx takes two files: the images, then the labels"),
            (None, Some(tsv)) => ("tsv", vec![("path", tsv)]),
            (None, None) => ("", Vec::new()),
        };
    let mut copies = Vec::new();
    if !files.is_empty() {
        let mut spec = InlineTable::new();
        spec.insert("format", format.into());
        for (key, file) in files {
            if !file.is_file() {
                bail!(
                    "the test set file `{}` does not exist; give the path of the task's {} file",
                    file.display(),
                    format.to_uppercase()
                );
            }
            let place = match in_zoo(&args.dir, file) {
                Some(relative) => relative,
                None => {
                    let name = file
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .context("the test set file has no file name")?;
                    let relative = format!("data/{}/{name}", args.task);
                    if args.dir.join(&relative).exists() {
                        bail!(
                            "`{}` already exists; remove it or give the test set from inside the zoo's folder",
                            args.dir.join(&relative).display()
                        );
                    }
                    copies.push((file.clone(), args.dir.join(&relative)));
                    relative
                }
            };
            spec.insert(key, place.as_str().into());
        }
        task.insert("test_set", toml_edit::value(spec));
    }
    tasks.insert(&args.task, Item::Table(task));

    // Copy the test set in, then swap the manifest once the set loads; undo on failure.
    let mut copied = Vec::new();
    let items = std::cell::Cell::new(None);
    let result = (|| -> anyhow::Result<()> {
        for (from, to) in &copies {
            if let Some(folder) = to.parent() {
                std::fs::create_dir_all(folder)
                    .with_context(|| format!("creating `{}`", folder.display()))?;
            }
            copy_in(from, to)?;
            copied.push(to.clone());
        }
        write_checked(&manifest, &doc, |zoo| {
            if zoo.task(&args.task)?.test_set.is_some() {
                let set = TestSet::load(zoo, &args.task)
                    .with_context(|| format!("the test set of task `{}`", args.task))?;
                items.set(Some(set.len()));
            }
            Ok(())
        })
    })();
    if let Err(error) = result {
        for path in &copied {
            let _ = std::fs::remove_file(path);
            remove_empty_parents(path, &args.dir);
        }
        return Err(error);
    }
    println!(
        "{}: task `{}` with {} classes ({} ... {})",
        manifest.display(),
        args.task,
        labels.len(),
        labels.first().map_or("", String::as_str),
        labels.last().map_or("", String::as_str)
    );
    if let Some(items) = items.get() {
        println!("task `{}`: a test set of {items} items", args.task);
    }
    Ok(())
}

/// Removes the folders `init` made for a copy that was undone (`data/TASK/`, `data/`),
/// when empty, up to the zoo's folder.
fn remove_empty_parents(file: &Path, root: &Path) {
    let mut folder = file.parent();
    while let Some(dir) = folder {
        if dir == root || std::fs::remove_dir(dir).is_err() {
            break;
        }
        folder = dir.parent();
    }
}
