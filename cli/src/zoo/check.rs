//! `cocktail zoo check`: everything `Zoo::load` checks, the files the manifest names
//! (`Zoo::file_problems`, whose quick form the master and `cocktail up` run at start), and each
//! model's graph against its entry: inputs, and the output's width against the labels.

use std::path::Path;

use anyhow::bail;
use cocktail_common::Zoo;
use cocktail_common::zoo::ModelEntry;
use indicatif::{ProgressBar, ProgressStyle};

use super::model::inspect;

pub fn run(manifest: &Path, ort_lib: Option<&Path>) -> anyhow::Result<()> {
    let zoo = Zoo::load(manifest)?;
    let bar = ProgressBar::new(zoo.models().len() as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} models · {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message("hashing files");
    let mut problems = zoo.file_problems(true);
    for model in zoo.models() {
        bar.set_message(model.name.clone());
        if zoo.resolve(&model.file).is_file() {
            problems.extend(graph_problems(&zoo, model, ort_lib)?);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if problems.is_empty() {
        println!(
            "{}: {} task(s), {} model(s), all files present and matching",
            manifest.display(),
            zoo.tasks().len(),
            zoo.models().len()
        );
        return Ok(());
    }
    for problem in &problems {
        println!("{problem}");
    }
    bail!(
        "`{}` has {} problem(s), listed above",
        manifest.display(),
        problems.len()
    )
}

/// The model's graph against its entry. A missing ONNX Runtime library is an error of
/// the command, not of the zoo.
fn graph_problems(
    zoo: &Zoo,
    model: &ModelEntry,
    ort_lib: Option<&Path>,
) -> anyhow::Result<Vec<String>> {
    cocktail_onnx::environment(ort_lib)?;
    let path = zoo.resolve(&model.file);
    let signature = match inspect(&path, ort_lib) {
        Ok(s) => s,
        Err(error) => return Ok(vec![format!("model `{}`: {error:#}", model.name)]),
    };
    let mut problems = Vec::new();
    if signature.inputs != model.inputs {
        problems.push(format!(
            "model `{}`: `inputs` in the manifest are {:?} but `{}` has {:?}; re-add the model (`cocktail zoo add`) or fix `inputs`",
            model.name,
            model.inputs,
            path.display(),
            signature.inputs
        ));
    }
    let classes = zoo.task(&model.task)?.labels.len() as i64;
    match signature.outputs.iter().find(|o| o.name == model.output) {
        None => problems.push(format!(
            "model `{}`: `{}` has no output `{}` (its outputs: {}); set `output` to the logits output",
            model.name,
            path.display(),
            model.output,
            signature
                .outputs
                .iter()
                .map(|o| format!("`{}`", o.name))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Some(o) if o.width() != Some(classes) => problems.push(format!(
            "model `{}`: output `{}` has shape {:?} but task `{}` has {classes} labels; fix the task's labels or `output`",
            model.name, o.name, o.shape, model.task
        )),
        Some(_) => {}
    }
    Ok(problems)
}
