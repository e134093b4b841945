//! The committed test sets: Fashion-MNIST's 10k test images (gzip'd IDX, as Debian ships
//! them) and the sentiment test sentences (TSV).

use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;

use crate::zoo::TestSetSpec;
use crate::{CommonError, Zoo};

/// An 8-bit grey image, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GreyImage {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// One raw input to a model: a decoded grey image or a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Image(GreyImage),
    Text(String),
}

/// A task's test items with their true class ids, in the order the recorded predictions use.
#[derive(Debug, Clone)]
pub struct TestSet {
    pub items: Vec<Input>,
    pub labels: Vec<usize>,
}

impl TestSet {
    /// Loads the test set of `task` as the manifest describes it.
    pub fn load(zoo: &Zoo, task: &str) -> Result<Self, CommonError> {
        let spec = zoo.task(task)?;
        let Some(test_set) = &spec.test_set else {
            return Err(CommonError::ManifestInvalid(format!(
                "task `{task}` has no `test_set`; add one to the manifest"
            )));
        };
        let set = match test_set {
            TestSetSpec::Idx { images, labels } => {
                let items = read_idx_images(&zoo.resolve(images))?
                    .into_iter()
                    .map(Input::Image)
                    .collect();
                let labels = read_idx_labels(&zoo.resolve(labels))?;
                Self { items, labels }
            }
            TestSetSpec::Tsv { path } => read_tsv(&zoo.resolve(path))?,
        };
        let classes = spec.labels.len();
        if set.items.len() != set.labels.len() {
            return Err(CommonError::ManifestInvalid(format!(
                "task `{task}`: {} items but {} labels",
                set.items.len(),
                set.labels.len()
            )));
        }
        if let Some(bad) = set.labels.iter().find(|&&l| l >= classes) {
            return Err(CommonError::ManifestInvalid(format!(
                "task `{task}`: label {bad} is not below its {classes} classes"
            )));
        }
        Ok(set)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

fn read_gz(path: &Path) -> Result<Vec<u8>, CommonError> {
    let file = std::fs::File::open(path).map_err(|e| CommonError::io(path, e))?;
    let mut bytes = Vec::new();
    GzDecoder::new(file)
        .read_to_end(&mut bytes)
        .map_err(|e| CommonError::io(path, e))?;
    Ok(bytes)
}

/// IDX is four bytes of magic, then big-endian u32 dimensions, then the data. It is small
/// and fixed enough that a crate would add more than it saves.
fn idx_dims(bytes: &[u8], path: &Path, magic: u32, rank: usize) -> Result<Vec<usize>, CommonError> {
    let word = |i: usize| -> Option<u32> {
        let b = bytes.get(4 * i..4 * i + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    if word(0) != Some(magic) {
        return Err(CommonError::format(
            path,
            format!("IDX magic is not {magic:#x}"),
        ));
    }
    let dims: Option<Vec<usize>> = (1..=rank).map(|i| word(i).map(|d| d as usize)).collect();
    let dims = dims.ok_or_else(|| CommonError::format(path, "truncated IDX header"))?;
    let expected = 4 * (rank + 1) + dims.iter().product::<usize>();
    if bytes.len() != expected {
        return Err(CommonError::format(
            path,
            format!(
                "IDX holds {} bytes, its header implies {expected}",
                bytes.len()
            ),
        ));
    }
    Ok(dims)
}

/// Reads a gzip'd IDX3 image file (magic 0x803).
pub fn read_idx_images(path: &Path) -> Result<Vec<GreyImage>, CommonError> {
    let bytes = read_gz(path)?;
    let dims = idx_dims(&bytes, path, 0x0803, 3)?;
    let (height, width) = (dims[1], dims[2]);
    let size = height * width;
    Ok(bytes[16..]
        .chunks_exact(size)
        .map(|pixels| GreyImage {
            width: width as u32,
            height: height as u32,
            pixels: pixels.to_vec(),
        })
        .collect())
}

/// Reads a gzip'd IDX1 label file (magic 0x801).
pub fn read_idx_labels(path: &Path) -> Result<Vec<usize>, CommonError> {
    let bytes = read_gz(path)?;
    idx_dims(&bytes, path, 0x0801, 1)?;
    Ok(bytes[8..].iter().map(|&l| usize::from(l)).collect())
}

/// The `source` column of a task's TSV test set (the sentiment set's domains), one per
/// item in the order the recorded predictions use; `None` for a test set without one
/// (IDX images).
pub fn sources(zoo: &Zoo, task: &str) -> Result<Option<Vec<String>>, CommonError> {
    let spec = zoo.task(task)?;
    let Some(TestSetSpec::Tsv { path }) = &spec.test_set else {
        return Ok(None);
    };
    let path = zoo.resolve(path);
    let text = std::fs::read_to_string(&path).map_err(|e| CommonError::io(&path, e))?;
    let mut sources = Vec::new();
    for (n, line) in text.lines().skip(1).enumerate() {
        let Some(source) = line.split('\t').nth(1) else {
            return Err(CommonError::format(
                &path,
                format!("line {} has no source field", n + 2),
            ));
        };
        sources.push(source.to_owned());
    }
    Ok(Some(sources))
}

/// Reads `label\tsource\ttext` lines after a header. The text never holds a tab (the
/// training script replaces them), so splitting on the first two tabs is exact.
pub fn read_tsv(path: &Path) -> Result<TestSet, CommonError> {
    let text = std::fs::read_to_string(path).map_err(|e| CommonError::io(path, e))?;
    let mut lines = text.lines();
    if lines.next() != Some("label\tsource\ttext") {
        return Err(CommonError::format(
            path,
            "header must be `label\\tsource\\ttext`",
        ));
    }
    let mut set = TestSet {
        items: Vec::new(),
        labels: Vec::new(),
    };
    for (n, line) in lines.enumerate() {
        let mut fields = line.splitn(3, '\t');
        let (Some(label), Some(_source), Some(text)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(CommonError::format(
                path,
                format!("line {} has fewer than 3 fields", n + 2),
            ));
        };
        let label = label.parse().map_err(|_| {
            CommonError::format(path, format!("line {}: bad label `{label}`", n + 2))
        })?;
        set.labels.push(label);
        set.items.push(Input::Text(text.to_owned()));
    }
    Ok(set)
}
