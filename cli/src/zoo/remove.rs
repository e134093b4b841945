//! `cocktail zoo remove NAME`: takes a model out of the manifest. Its ONNX file stays:
//! a running master's workers may still serve it until a reload drains them.

use std::path::Path;

use anyhow::bail;
use clap::Args;
use toml_edit::Item;

use super::{read_doc, write_manifest};

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The model's name.
    name: String,
}

pub fn run(manifest: &Path, args: &RemoveArgs) -> anyhow::Result<()> {
    let mut doc = read_doc(manifest)?;
    let Some(models) = doc.get_mut("models").and_then(Item::as_array_of_tables_mut) else {
        bail!("`{}` has no models", manifest.display());
    };
    let names: Vec<String> = models
        .iter()
        .filter_map(|m| m.get("name").and_then(Item::as_str).map(str::to_owned))
        .collect();
    let Some(index) = names.iter().position(|n| *n == args.name) else {
        bail!(
            "`{}` has no model `{}`; it has {}",
            manifest.display(),
            args.name,
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let file = models
        .get(index)
        .and_then(|m| m.get("file"))
        .and_then(Item::as_str)
        .unwrap_or_default()
        .to_owned();
    models.remove(index);
    write_manifest(manifest, &doc)?;
    println!(
        "removed `{}` from {}; its file `{file}` stays (a running master serves it until it reloads the zoo)",
        args.name,
        manifest.display()
    );
    Ok(())
}
