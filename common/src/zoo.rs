//! The model-zoo manifest, `models/zoo.toml`.
//!
//! `cocktail zoo init`, `add` and `evaluate` write it (the project's own by
//! `models/build-zoo.sh`); the `[models.profile]` tables are what `cocktail profile`
//! measures on the local machine. Paths inside the manifest are relative to the folder
//! that holds it.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::CommonError;
pub use crate::preprocess::Preprocess;

/// Where the manifest lives in a checkout, relative to the workspace root.
pub const DEFAULT_MANIFEST: &str = "models/zoo.toml";

/// The manifest schema this code reads.
pub const SCHEMA: u32 = 1;

/// A loaded, validated zoo manifest.
#[derive(Debug, Clone)]
pub struct Zoo {
    root: PathBuf,
    tasks: BTreeMap<String, TaskSpec>,
    models: Vec<ModelEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    schema: u32,
    tasks: BTreeMap<String, TaskSpec>,
    /// Absent in a manifest `cocktail zoo init` has just made.
    #[serde(default)]
    models: Vec<ModelEntry>,
}

/// One classification task (`fashion`, `sentiment`): its classes and its test data.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Class labels, indexed by class id.
    pub labels: Vec<String>,
    /// The labelled test set; a task without one (e.g. ImageNet, whose validation set
    /// cannot ship) is served, but selection has no recorded answers to estimate from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_set: Option<TestSetSpec>,
    /// Every model's recorded answer on every test item (see [`crate::Predictions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predictions: Option<String>,
}

impl TaskSpec {
    /// The recorded predictions' file, relative to the manifest, or an error naming the
    /// task when it has none.
    pub fn predictions_file(&self, task: &str) -> Result<&str, CommonError> {
        self.predictions.as_deref().ok_or_else(|| {
            CommonError::ManifestInvalid(format!(
                "task `{task}` has no `predictions`; record them on its test set first"
            ))
        })
    }
}

/// How a task's committed test set is stored.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "format", rename_all = "lowercase", deny_unknown_fields)]
pub enum TestSetSpec {
    /// gzip'd IDX files as distributed with (Fashion-)MNIST.
    Idx { images: String, labels: String },
    /// A UTF-8 TSV file with the header `label\tsource\ttext`.
    Tsv { path: String },
}

/// One model of the zoo.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub name: String,
    pub task: String,
    /// The ONNX file, relative to the manifest's folder.
    pub file: String,
    pub sha256: String,
    pub arch: String,
    pub description: String,
    pub params: u64,
    pub train_examples: u64,
    pub epochs: u32,
    /// Top-1 accuracy on the task's full test set.
    pub accuracy: f64,
    /// Recall per class on the test set, indexed by class id.
    pub class_accuracy: Vec<f64>,
    pub inputs: Vec<TensorSpec>,
    /// The output holding logits `[batch, classes]`.
    pub output: String,
    pub preprocess: Preprocess,
    pub profile: Option<Profile>,
}

/// An ONNX input: its name, element type and shape (`-1` marks a dynamic axis).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
}

/// An ONNX element type this project feeds. FP16 and BF16 are not supported (they would
/// need a half-float crate in every binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Float32,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Bool,
}

impl DType {
    /// The Open Inference Protocol's name of the type.
    pub fn oip(self) -> &'static str {
        match self {
            Self::Float32 => "FP32",
            Self::Float64 => "FP64",
            Self::Int8 => "INT8",
            Self::Int16 => "INT16",
            Self::Int32 => "INT32",
            Self::Int64 => "INT64",
            Self::Uint8 => "UINT8",
            Self::Uint16 => "UINT16",
            Self::Uint32 => "UINT32",
            Self::Uint64 => "UINT64",
            Self::Bool => "BOOL",
        }
    }
}

/// Latency measured on this machine by `cocktail profile`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The machine the numbers come from.
    pub host: String,
    /// Token count of the input used for text models (the test set's median).
    pub seq_len: Option<usize>,
    /// Intra-op thread counts measured (rows of `latency_us`).
    pub threads: Vec<usize>,
    /// Batch sizes measured (columns of `latency_us`).
    pub batch_sizes: Vec<usize>,
    /// Median latency of one batch in microseconds, `[threads][batch size]`.
    pub latency_us: Vec<Vec<f64>>,
    /// Packing factor per thread count (see [`packing_factor`]).
    pub packing_factor: Vec<u32>,
}

impl Profile {
    /// Median latency of a batch of `batch` items with `threads` intra-op threads, when
    /// both were measured.
    pub fn latency_us(&self, threads: usize, batch: usize) -> Option<f64> {
        let row = self.threads.iter().position(|&t| t == threads)?;
        let col = self.batch_sizes.iter().position(|&b| b == batch)?;
        self.latency_us.get(row)?.get(col).copied()
    }

    /// The packing factor measured with `threads` intra-op threads.
    pub fn packing_factor(&self, threads: usize) -> Option<u32> {
        let row = self.threads.iter().position(|&t| t == threads)?;
        self.packing_factor.get(row).copied()
    }
}

/// How much slower than a lone request a request may get when packed with others before
/// the packing breaks "the inference latency" (Cocktail §2.3.2 leaves the tolerance open).
pub const PACKING_SLACK: f64 = 1.5;

/// Packing factor Pf: how many requests one instance serves concurrently without breaking
/// the model's latency (Cocktail §2.3.2). The worker serves concurrent requests as one
/// batch, so Pf is the largest batch whose latency stays within [`PACKING_SLACK`] times
/// the latency of a single item, interpolated linearly between measured batch sizes.
/// `batch_sizes` must be ascending and start at 1.
pub fn packing_factor(batch_sizes: &[usize], latency_us: &[f64]) -> u32 {
    let (Some(&single), true) = (latency_us.first(), batch_sizes.first() == Some(&1)) else {
        return 1;
    };
    let limit = single * PACKING_SLACK;
    let mut best = 1.0_f64;
    for (window_b, window_l) in batch_sizes.windows(2).zip(latency_us.windows(2)) {
        let (b0, b1) = (window_b[0] as f64, window_b[1] as f64);
        let (l0, l1) = (window_l[0], window_l[1]);
        if l1 <= limit {
            best = b1;
            continue;
        }
        if l0 <= limit && l1 > l0 {
            best = b0 + (limit - l0) / (l1 - l0) * (b1 - b0);
        }
        break;
    }
    best.floor().max(1.0) as u32
}

/// Whether `b` answers the requests `a` does: both images (each worker prepares them its
/// own way), both text, or both the same input tensors.
fn same_request(a: &ModelEntry, b: &ModelEntry) -> bool {
    match (&a.preprocess, &b.preprocess) {
        (Preprocess::Image(_), Preprocess::Image(_))
        | (Preprocess::Text { .. }, Preprocess::Text { .. }) => true,
        (Preprocess::Tensor, Preprocess::Tensor) => a.inputs == b.inputs,
        _ => false,
    }
}

/// What a model's requests carry, for messages.
fn request_kind(m: &ModelEntry) -> String {
    match &m.preprocess {
        Preprocess::Image(_) => "image".into(),
        Preprocess::Text { .. } => "text".into(),
        Preprocess::Tensor => format!(
            "tensor ({})",
            m.inputs
                .iter()
                .map(|i| format!("`{}` {:?} {:?}", i.name, i.dtype, i.shape))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl Zoo {
    /// Reads and validates the manifest at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, CommonError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| CommonError::io(path, e))?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|e| CommonError::ManifestSyntax {
                path: path.to_path_buf(),
                source: Box::new(e),
            })?;
        let root = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let zoo = Self {
            root,
            tasks: manifest.tasks,
            models: manifest.models,
        };
        zoo.validate(manifest.schema)?;
        Ok(zoo)
    }

    /// Finds the manifest: `explicit` if given, else `models/zoo.toml` in the current
    /// folder or one of its parents (so binaries work from any folder of a checkout).
    pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, CommonError> {
        if let Some(path) = explicit {
            return Ok(path.to_path_buf());
        }
        let cwd = std::env::current_dir().map_err(|e| CommonError::io(".", e))?;
        cwd.ancestors()
            .map(|dir| dir.join(DEFAULT_MANIFEST))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| {
                CommonError::ManifestInvalid(format!(
                    "no {DEFAULT_MANIFEST} in {} or its parents; pass --zoo",
                    cwd.display()
                ))
            })
    }

    fn validate(&self, schema: u32) -> Result<(), CommonError> {
        let fail = |msg: String| Err(CommonError::ManifestInvalid(msg));
        if schema != SCHEMA {
            return fail(format!(
                "schema {schema} is not supported (expected {SCHEMA})"
            ));
        }
        let mut names = HashSet::new();
        for m in &self.models {
            if !names.insert(m.name.as_str()) {
                return fail(format!("model `{}` appears twice", m.name));
            }
            let Some(task) = self.tasks.get(&m.task) else {
                return fail(format!(
                    "model `{}` names unknown task `{}`",
                    m.name, m.task
                ));
            };
            if m.class_accuracy.len() != task.labels.len() {
                return fail(format!(
                    "model `{}` has {} class accuracies for {} classes",
                    m.name,
                    m.class_accuracy.len(),
                    task.labels.len()
                ));
            }
            if let Err(message) = m.preprocess.check(&m.inputs) {
                return fail(format!("model `{}`: preprocess: {message}", m.name));
            }
            let in_unit = |a: f64| (0.0..=1.0).contains(&a);
            if !in_unit(m.accuracy) || !m.class_accuracy.iter().all(|&a| in_unit(a)) {
                return fail(format!("model `{}` has an accuracy outside [0, 1]", m.name));
            }
            if let Some(first) = self.models.iter().find(|f| f.task == m.task)
                && !same_request(first, m)
            {
                return fail(format!(
                    "model `{}` takes {} requests, but `{}`, the first model of task `{}`, takes {}: every model of a task answers the same requests; put `{}` in a task of its own",
                    m.name,
                    request_kind(m),
                    first.name,
                    m.task,
                    request_kind(first),
                    m.name
                ));
            }
            if let Some(p) = &m.profile {
                let rows_ok = p.latency_us.len() == p.threads.len()
                    && p.packing_factor.len() == p.threads.len()
                    && p.latency_us.iter().all(|r| r.len() == p.batch_sizes.len());
                if !rows_ok {
                    return fail(format!("model `{}` has a ragged profile", m.name));
                }
            }
        }
        Ok(())
    }

    /// The folder holding the manifest; the manifest's paths are relative to it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path from the manifest made usable from the current folder.
    pub fn resolve(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub fn tasks(&self) -> &BTreeMap<String, TaskSpec> {
        &self.tasks
    }

    pub fn task(&self, name: &str) -> Result<&TaskSpec, CommonError> {
        self.tasks
            .get(name)
            .ok_or_else(|| CommonError::UnknownTask(name.to_owned()))
    }

    pub fn models(&self) -> &[ModelEntry] {
        &self.models
    }

    pub fn model(&self, name: &str) -> Result<&ModelEntry, CommonError> {
        self.models
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| CommonError::UnknownModel(name.to_owned()))
    }

    /// The models serving `task`, in manifest order.
    pub fn models_for<'a>(&'a self, task: &'a str) -> impl Iterator<Item = &'a ModelEntry> {
        self.models.iter().filter(move |m| m.task == task)
    }

    /// Checks that a model's ONNX file is the one the manifest describes.
    pub fn verify_checksum(&self, model: &ModelEntry) -> Result<(), CommonError> {
        let path = self.resolve(&model.file);
        let actual = sha256_file(&path)?;
        if actual != model.sha256 {
            return Err(CommonError::Checksum {
                path,
                expected: model.sha256.clone(),
                actual,
            });
        }
        Ok(())
    }
}

impl Zoo {
    /// What is wrong with the files the manifest names, one line each naming the file
    /// and the fix: model files missing, test sets and recorded answers missing, recorded
    /// answers lacking a model of their task; with `thorough`, also model files with
    /// another sha256 and recorded answers with another item count than the test set.
    /// `cocktail zoo check` runs it thorough; `cocktail up` and the master run the quick
    /// form at every start (hashing the project's 83 MB of models takes seconds in a
    /// debug build), and each worker checks its own model's hash when loading it.
    pub fn file_problems(&self, thorough: bool) -> Vec<String> {
        let mut problems = Vec::new();
        for m in &self.models {
            let path = self.resolve(&m.file);
            if !path.is_file() {
                problems.push(format!(
                    "model `{}`: file `{}` is missing; put the ONNX file there or remove the entry",
                    m.name,
                    path.display()
                ));
                continue;
            }
            if !thorough {
                continue;
            }
            match sha256_file(&path) {
                Ok(actual) if actual == m.sha256 => {}
                Ok(actual) => problems.push(format!(
                    "model `{}`: `{}` has sha256 {actual} but the manifest says {}; re-add the model (`cocktail zoo add`) or restore the file",
                    m.name,
                    path.display(),
                    m.sha256
                )),
                Err(error) => problems.push(format!("model `{}`: {error}", m.name)),
            }
        }
        for (name, task) in &self.tasks {
            let mut files: Vec<&str> = match &task.test_set {
                Some(TestSetSpec::Idx { images, labels }) => vec![images, labels],
                Some(TestSetSpec::Tsv { path }) => vec![path],
                None => Vec::new(),
            };
            files.extend(task.predictions.as_deref());
            let mut all_there = true;
            for file in files {
                let path = self.resolve(file);
                if !path.is_file() {
                    all_there = false;
                    problems.push(format!(
                        "task `{name}`: `{}` is missing; restore it or remove it from the task",
                        path.display()
                    ));
                }
            }
            if let (true, Some(file)) = (all_there, &task.predictions) {
                problems.extend(self.prediction_problems(name, file, thorough));
            }
        }
        problems
    }

    /// Recorded answers complete: one column per model of the task, one row per test item.
    fn prediction_problems(&self, task: &str, file: &str, thorough: bool) -> Vec<String> {
        let path = self.resolve(file);
        let predictions = match crate::Predictions::load(&path) {
            Ok(p) => p,
            Err(error) => return vec![format!("task `{task}`: {error}")],
        };
        let mut problems: Vec<String> = self
            .models_for(task)
            .filter(|m| predictions.model_index(&m.name).is_none())
            .map(|m| {
                format!(
                    "task `{task}`: `{}` has no recorded answers of model `{}`; run `cocktail zoo evaluate --task {task}`",
                    path.display(),
                    m.name
                )
            })
            .collect();
        if thorough
            && self
                .tasks
                .get(task)
                .and_then(|t| t.test_set.as_ref())
                .is_some()
        {
            match crate::TestSet::load(self, task) {
                Ok(set) if set.len() != predictions.len() => problems.push(format!(
                    "task `{task}`: `{}` records {} items but the test set has {}; record them again on this test set",
                    path.display(),
                    predictions.len(),
                    set.len()
                )),
                Ok(_) => {}
                Err(error) => problems.push(format!("task `{task}`: {error}")),
            }
        }
        problems
    }

    /// The quick [`Self::file_problems`] as one error, for binaries that refuse to
    /// start on them.
    pub fn check_files(&self) -> Result<(), CommonError> {
        let problems = self.file_problems(false);
        if problems.is_empty() {
            return Ok(());
        }
        Err(CommonError::ManifestInvalid(format!(
            "{} problem(s) with the zoo's files (`cocktail zoo check` lists them): {}",
            problems.len(),
            problems.join("; ")
        )))
    }
}

/// Whether `name` is a plain task or model name: 1 to 64 letters, digits, `_`, `-` or
/// `.`, not starting with `.`. Such a name can go into file names, TOML keys and URL
/// paths as it is (`cocktail zoo` asks for one; a hand-written manifest may hold others).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.')
}

/// Hex sha256 of a file's bytes, streamed.
pub fn sha256_file(path: &Path) -> Result<String, CommonError> {
    let mut file = std::fs::File::open(path).map_err(|e| CommonError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0_u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(|e| CommonError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_factor_cases() {
        let sizes = [1, 2, 4, 8, 16, 32];
        // Overhead-bound tiny model: everything within 1.5x, so the largest batch.
        assert_eq!(
            packing_factor(&sizes, &[10.0, 10.5, 11.0, 12.0, 13.0, 14.0]),
            32
        );
        // Compute-bound model: twice the items, twice the time.
        assert_eq!(
            packing_factor(&sizes, &[100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0]),
            1
        );
        // Crossing between 4 (130) and 8 (170): limit 150 is half way, so 6.
        assert_eq!(
            packing_factor(&sizes, &[100.0, 110.0, 130.0, 170.0, 300.0, 600.0]),
            6
        );
        assert_eq!(packing_factor(&[], &[]), 1);
        assert_eq!(packing_factor(&[2, 4], &[1.0, 2.0]), 1);
    }

    #[test]
    fn profile_lookup() {
        let p = Profile {
            host: "test".into(),
            seq_len: None,
            threads: vec![1, 2],
            batch_sizes: vec![1, 2],
            latency_us: vec![vec![10.0, 15.0], vec![6.0, 8.0]],
            packing_factor: vec![2, 2],
        };
        assert_eq!(p.latency_us(2, 2), Some(8.0));
        assert_eq!(p.latency_us(4, 2), None);
        assert_eq!(p.packing_factor(1), Some(2));
    }

    #[test]
    fn rejects_unknown_fields_and_bad_tasks() {
        let bad = "schema = 1\nbogus = 2\n[tasks]\nmodels = []\n";
        assert!(toml::from_str::<Manifest>(bad).is_err());
        let dir = std::env::temp_dir().join(format!("zoo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("zoo.toml");
        std::fs::write(
            &path,
            r#"schema = 1
[tasks.t]
labels = ["a", "b"]
predictions = "p.tsv.gz"
test_set = { format = "tsv", path = "t.tsv" }
[[models]]
name = "m"
task = "other"
file = "m.onnx"
sha256 = ""
arch = ""
description = ""
params = 1
train_examples = 1
epochs = 1
accuracy = 0.5
class_accuracy = [0.5, 0.5]
inputs = [{ name = "input_ids", dtype = "int64", shape = [-1, -1] }, { name = "attention_mask", dtype = "int64", shape = [-1, -1] }]
output = "logits"
preprocess = { kind = "text", tokenizer = "tok.json", max_tokens = 8 }
"#,
        )
        .unwrap();
        let err = Zoo::load(&path).unwrap_err().to_string();
        assert!(err.contains("unknown task `other`"), "{err}");
    }

    #[test]
    fn every_model_of_a_task_takes_the_same_requests() {
        let dir = std::env::temp_dir().join(format!("zoo-kinds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("zoo.toml");
        let model = |name: &str, width: usize| {
            format!(
                r#"[[models]]
name = "{name}"
task = "t"
file = "{name}.onnx"
sha256 = ""
arch = ""
description = ""
params = 1
train_examples = 1
epochs = 1
accuracy = 0.5
class_accuracy = [0.5, 0.5]
inputs = [{{ name = "x", dtype = "float32", shape = [-1, {width}] }}]
output = "logits"
preprocess = {{ kind = "tensor" }}
"#
            )
        };
        let head = "schema = 1\n[tasks.t]\nlabels = [\"a\", \"b\"]\n";
        std::fs::write(&path, format!("{head}{}{}", model("a", 4), model("b", 4))).unwrap();
        Zoo::load(&path).unwrap();
        std::fs::write(&path, format!("{head}{}{}", model("a", 4), model("b", 5))).unwrap();
        let err = Zoo::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("model `b` takes tensor (`x` Float32 [-1, 5]) requests, but `a`, the first model of task `t`, takes tensor (`x` Float32 [-1, 4])"),
            "{err}"
        );
        assert!(err.contains("put `b` in a task of its own"), "{err}");
    }
}
