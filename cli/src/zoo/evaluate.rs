//! `cocktail zoo evaluate --task NAME --data PATH`: every model of the task through the
//! worker's own preprocessing and ONNX Runtime over a labelled set; writes each model's
//! accuracy and per-class accuracy into the manifest, its recorded answers into the
//! task's `predictions` file (default `predictions/<task>.tsv.gz`; the format selection
//! reads: true class, then each model's class and its probability) and the full
//! probability vectors next to it in `<stem>.probabilities.tsv.gz` (`model`, `item`, one
//! column per class). Without `--data`, the task's committed test set is used.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use cocktail_common::{Input, Zoo};
use cocktail_worker::OnnxBackend;
use cocktail_worker::preprocess::{Preprocessor, decode_image};
use flate2::Compression;
use flate2::write::GzEncoder;
use indicatif::{ProgressBar, ProgressStyle};
use toml_edit::{Array, Item};

use super::{commit, read_doc, temp_path};

/// Items per ONNX Runtime call.
const BATCH: usize = 16;

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The task whose models are evaluated.
    #[arg(long)]
    task: String,
    /// The labelled set: an ImageFolder tree (PATH/<class>/<image>) or a CSV/TSV file
    /// with `text` and `label` columns; classes by the task's label names. Without it,
    /// the task's committed `test_set` (IDX or TSV).
    #[arg(long)]
    data: Option<PathBuf>,
}

pub(super) enum Items {
    Images(Vec<PathBuf>),
    Texts(Vec<String>),
    /// The task's committed test set, decoded.
    Inputs(Vec<Input>),
}

impl Items {
    fn len(&self) -> usize {
        match self {
            Self::Images(v) => v.len(),
            Self::Texts(v) => v.len(),
            Self::Inputs(v) => v.len(),
        }
    }
}

/// One model's answers: the predicted class and the probability vector per item.
pub(super) struct Answers {
    classes: Vec<usize>,
    probs: Vec<Vec<f64>>,
}

pub fn run(manifest: &Path, ort_lib: Option<&Path>, args: &EvaluateArgs) -> anyhow::Result<()> {
    let zoo = Zoo::load(manifest)?;
    let task = zoo.task(&args.task)?;
    if task.test_set.is_some() && args.data.is_some() {
        bail!(
            "task `{}` has a committed `test_set`, whose recorded answers `evaluate` would replace with answers on another set; remove `test_set` and `predictions` from the task first",
            args.task
        );
    }
    let models: Vec<_> = zoo.models_for(&args.task).cloned().collect();
    if models.is_empty() {
        bail!(
            "task `{}` has no models; add them with `cocktail zoo add`",
            args.task
        );
    }
    let (items, labels, source) = match &args.data {
        Some(data) => {
            let (items, labels) = load_data(data, &task.labels)?;
            (items, labels, data.display().to_string())
        }
        None if task.test_set.is_some() => {
            let set = cocktail_common::TestSet::load(&zoo, &args.task)?;
            (
                Items::Inputs(set.items),
                set.labels,
                "its test set".to_owned(),
            )
        }
        None => bail!(
            "task `{}` has no `test_set`; pass --data (an ImageFolder, or a CSV/TSV with `text` and `label`)",
            args.task
        ),
    };
    let classes = task.labels.len();
    let answers = answer(&zoo, &models, &items, &source, ort_lib)?;
    let accuracy = write_all(
        manifest, &zoo, &args.task, &models, &labels, classes, &answers,
    )?;
    let names: Vec<String> = models.iter().map(|m| m.name.clone()).collect();
    let classes: Vec<Vec<usize>> = answers.into_iter().map(|a| a.classes).collect();
    println!(
        "\nensemble gain: the best plain-majority vote of each size among the {} most accurate models\n\n{}",
        names.len().min(9),
        super::gain::table(&names, &classes, &labels, &accuracy)
    );
    Ok(())
}

/// Every model's answers on `items` (described as `source` in errors), through the
/// worker's own preprocessing and ONNX Runtime, with a progress bar.
pub(super) fn answer(
    zoo: &Zoo,
    models: &[cocktail_common::ModelEntry],
    items: &Items,
    source: &str,
    ort_lib: Option<&Path>,
) -> anyhow::Result<Vec<Answers>> {
    let bar = ProgressBar::new((models.len() * items.len()) as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} answers, eta {eta} · {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut answers = Vec::new();
    for model in models {
        bar.set_message(model.name.clone());
        let mut backend = OnnxBackend::load(zoo, model, 1, ort_lib)?;
        let pre = Preprocessor::for_model(zoo, model)?;
        let mut out = Answers {
            classes: Vec::new(),
            probs: Vec::new(),
        };
        for start in (0..items.len()).step_by(BATCH) {
            let end = (start + BATCH).min(items.len());
            let batch = match (items, &pre) {
                (Items::Images(paths), Preprocessor::Image(image)) => {
                    let decoded = paths[start..end]
                        .iter()
                        .map(|p| {
                            let bytes = std::fs::read(p)
                                .with_context(|| format!("reading `{}`", p.display()))?;
                            decode_image(&bytes).with_context(|| {
                                format!("`{}`; replace or remove the file", p.display())
                            })
                        })
                        .collect::<anyhow::Result<Vec<_>>>()?;
                    image.tensor(&decoded.iter().collect::<Vec<_>>())?
                }
                (Items::Inputs(inputs), _) => pre.batch(&inputs[start..end])?,
                (Items::Texts(texts), Preprocessor::Text(_)) => {
                    let inputs: Vec<Input> = texts[start..end]
                        .iter()
                        .map(|t| Input::Text(t.clone()))
                        .collect();
                    pre.batch(&inputs)?
                }
                _ => bail!(
                    "model `{}` does not take the items of {source} (images for image models, text for text models)",
                    model.name
                ),
            };
            for row in backend.logits(&batch)?.rows() {
                let probs = softmax(&row.to_vec());
                out.classes.push(argmax(&probs));
                out.probs.push(probs);
            }
            bar.inc((end - start) as u64);
        }
        answers.push(out);
    }
    bar.finish_and_clear();
    Ok(answers)
}

/// The items and their class ids, in a fixed order (sorted paths, file rows).
fn load_data(path: &Path, labels: &[String]) -> anyhow::Result<(Items, Vec<usize>)> {
    let class_of = |name: &str, place: &str| {
        labels.iter().position(|l| l == name).with_context(|| {
            format!(
                "{place}: class `{name}` is not one of the task's {} labels; rename it to a label of the task or remove it",
                labels.len()
            )
        })
    };
    if path.is_dir() {
        let mut dirs: Vec<PathBuf> = read_sorted(path)?;
        dirs.retain(|d| !is_hidden(d));
        let mut files = Vec::new();
        let mut ids = Vec::new();
        for dir in dirs {
            if !dir.is_dir() {
                bail!(
                    "`{}` is not a folder: an ImageFolder holds one folder per class (PATH/<class>/<image>)",
                    dir.display()
                );
            }
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let id = class_of(&name, &format!("`{}`", dir.display()))?;
            for file in read_sorted(&dir)? {
                if !is_hidden(&file) && file.is_file() {
                    files.push(file);
                    ids.push(id);
                }
            }
        }
        if files.is_empty() {
            bail!(
                "`{}` holds no images (PATH/<class>/<image>)",
                path.display()
            );
        }
        return Ok((Items::Images(files), ids));
    }
    let tsv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("tsv"));
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(if tsv { b'\t' } else { b',' })
        // TSV has no quoting: a text starting with `"` is text.
        .quoting(!tsv)
        .from_path(path)
        .with_context(|| format!("reading `{}`", path.display()))?;
    let headers = reader
        .headers()
        .with_context(|| format!("`{}`", path.display()))?
        .clone();
    let column = |name: &str| {
        headers.iter().position(|h| h == name).with_context(|| {
            format!(
                "`{}` has no `{name}` column; give a CSV or TSV file with `text` and `label` columns, or an ImageFolder",
                path.display()
            )
        })
    };
    let (text, label) = (column("text")?, column("label")?);
    let mut texts = Vec::new();
    let mut ids = Vec::new();
    for (row, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("`{}` row {}", path.display(), row + 2))?;
        let place = format!("`{}` row {}", path.display(), row + 2);
        ids.push(class_of(record.get(label).unwrap_or_default(), &place)?);
        texts.push(record.get(text).unwrap_or_default().to_owned());
    }
    if texts.is_empty() {
        bail!("`{}` has no rows", path.display());
    }
    Ok((Items::Texts(texts), ids))
}

fn read_sorted(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading `{}`", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading `{}`", dir.display()))?;
    entries.sort();
    Ok(entries)
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Writes both answer files and the manifest: temporary files first, renamed once the
/// new manifest loads.
fn write_all(
    manifest: &Path,
    zoo: &Zoo,
    task: &str,
    models: &[cocktail_common::ModelEntry],
    labels: &[usize],
    classes: usize,
    answers: &[Answers],
) -> anyhow::Result<Vec<f64>> {
    let predictions = zoo
        .task(task)?
        .predictions
        .clone()
        .unwrap_or_else(|| format!("predictions/{task}.tsv.gz"));
    let probabilities = cocktail_common::predictions::probabilities_path(&predictions);
    if let Some(folder) = zoo.resolve(&predictions).parent() {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("creating `{}`", folder.display()))?;
    }
    let table = answers_table(models, labels, answers);
    let full = probabilities_table(models, answers, classes);
    let mut doc = read_doc(manifest)?;
    doc["tasks"][task]["predictions"] = toml_edit::value(predictions.as_str());
    let mut report = Vec::new();
    let mut accuracy = vec![0.0; models.len()];
    if let Some(entries) = doc.get_mut("models").and_then(Item::as_array_of_tables_mut) {
        for entry in entries.iter_mut() {
            let Some(i) = models
                .iter()
                .position(|m| entry.get("name").and_then(Item::as_str) == Some(m.name.as_str()))
            else {
                continue;
            };
            let (overall, per_class, empty) = accuracies(labels, &answers[i].classes, classes);
            accuracy[i] = overall;
            entry.insert("accuracy", toml_edit::value(overall));
            entry.insert(
                "class_accuracy",
                toml_edit::value(Array::from_iter(per_class)),
            );
            report.push((models[i].name.clone(), overall, empty));
        }
    }
    let mut temps = Vec::new();
    for (file, text) in [(&predictions, &table), (&probabilities, &full)] {
        let target = zoo.resolve(file);
        let temp = temp_path(&target);
        gzip(&temp, text)?;
        temps.push((temp, target));
    }
    let manifest_temp = temp_path(manifest);
    let loaded = std::fs::write(&manifest_temp, doc.to_string())
        .with_context(|| format!("writing `{}`", manifest_temp.display()))
        .and_then(|()| Zoo::load(&manifest_temp).map_err(anyhow::Error::from));
    if let Err(error) = loaded {
        for (temp, _) in &temps {
            let _ = std::fs::remove_file(temp);
        }
        let _ = std::fs::remove_file(&manifest_temp);
        bail!("the new manifest would not load, so nothing was written: {error:#}");
    }
    for (temp, target) in temps {
        commit(&temp, &target)?;
    }
    commit(&manifest_temp, manifest)?;
    for (name, accuracy, empty) in report {
        println!(
            "{name}: accuracy {accuracy:.4} on {} items{}",
            labels.len(),
            if empty > 0 {
                format!(" ({empty} classes without items take the overall accuracy)")
            } else {
                String::new()
            }
        );
    }
    println!("recorded answers: {}", zoo.resolve(&predictions).display());
    Ok(accuracy)
}

/// The recorded answers in the format selection reads: the true class, then each model's
/// class and the probability it gave it.
pub(super) fn answers_table(
    models: &[cocktail_common::ModelEntry],
    labels: &[usize],
    answers: &[Answers],
) -> String {
    let mut table = String::from("label");
    for m in models {
        table.push_str(&format!("\t{0}\t{0}.p", m.name));
    }
    table.push('\n');
    for (item, label) in labels.iter().enumerate() {
        table.push_str(&label.to_string());
        for a in answers {
            let class = a.classes[item];
            table.push_str(&format!("\t{class}\t{:.4}", a.probs[item][class]));
        }
        table.push('\n');
    }
    table
}

/// The full probability vectors ([`cocktail_common::Probabilities`]'s format): `model`,
/// `item`, then one column per class, to 4 places as the answers' `.p` column (the
/// argmax of every recorded vector is the recorded class).
pub(super) fn probabilities_table(
    models: &[cocktail_common::ModelEntry],
    answers: &[Answers],
    classes: usize,
) -> String {
    let mut full = String::from("model\titem");
    for c in 0..classes {
        full.push_str(&format!("\tp{c}"));
    }
    full.push('\n');
    for (m, a) in models.iter().zip(answers) {
        for (item, row) in a.probs.iter().enumerate() {
            full.push_str(&format!("{}\t{item}", m.name));
            for p in row {
                full.push_str(&format!("\t{p:.4}"));
            }
            full.push('\n');
        }
    }
    full
}

/// Top-1 accuracy, recall per class (rounded to 6 places, as the project's manifest),
/// and how many classes had no item (they take the overall accuracy).
fn accuracies(labels: &[usize], predicted: &[usize], classes: usize) -> (f64, Vec<f64>, usize) {
    let mut right = vec![0_usize; classes];
    let mut total = vec![0_usize; classes];
    for (&l, &p) in labels.iter().zip(predicted) {
        total[l] += 1;
        right[l] += usize::from(l == p);
    }
    let overall = round6(right.iter().sum::<usize>() as f64 / labels.len().max(1) as f64);
    let empty = total.iter().filter(|&&t| t == 0).count();
    let per_class = right
        .iter()
        .zip(&total)
        .map(|(&r, &t)| {
            if t == 0 {
                overall
            } else {
                round6(r as f64 / t as f64)
            }
        })
        .collect();
    (overall, per_class, empty)
}

/// The double nearest to `x` rounded to 6 decimal places (Python's `round(x, 6)`).
fn round6(x: f64) -> f64 {
    format!("{x:.6}").parse().unwrap_or(x)
}

pub(super) fn gzip(path: &Path, text: &str) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("writing `{}`", path.display()))?;
    let mut encoder = GzEncoder::new(file, Compression::default());
    encoder
        .write_all(text.as_bytes())
        .and_then(|()| encoder.finish().map(|_| ()))
        .with_context(|| format!("writing `{}`", path.display()))
}

/// Probabilities from a row of logits, in f64 as the training scripts' numpy computes
/// them (`exp(x - max) / sum`), so the recorded answers match theirs to the last digit.
fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &x| m.max(f64::from(x)));
    let exp: Vec<f64> = logits.iter().map(|&x| (f64::from(x) - max).exp()).collect();
    let sum: f64 = exp.iter().sum();
    exp.into_iter().map(|e| e / sum).collect()
}

/// The first class with the highest probability (numpy's argmax).
fn argmax(probs: &[f64]) -> usize {
    probs
        .iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (i, &p)| {
            if p > best.1 { (i, p) } else { best }
        })
        .0
}
