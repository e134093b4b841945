//! Recorded predictions: every zoo model's predicted class and top probability on every
//! test item of a task, so the simulator replays real ensemble accuracy.
//!
//! File format (gzip'd TSV, one row per test item in test-set order): the header is
//! `label` followed by a `<model>` and `<model>.p` column per model; rows hold the true
//! class id, then each model's predicted class id and its softmax probability.
//!
//! The full probability vectors sit next to that file, in
//! [`probabilities_path`]`(file)` (gzip'd TSV: `model`, `item`, then `p0`..`pK`, one row
//! per model and item), for the votes that average probabilities (soft voting).

use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;

use crate::CommonError;

/// Every model's answers on a task's test set.
#[derive(Debug, Clone)]
pub struct Predictions {
    /// Model names, in column order.
    pub models: Vec<String>,
    /// True class per test item.
    pub labels: Vec<u16>,
    /// `classes[model][item]`: the model's predicted class.
    pub classes: Vec<Vec<u16>>,
    /// `probs[model][item]`: the probability the model gave its predicted class.
    pub probs: Vec<Vec<f32>>,
}

impl Predictions {
    pub fn load(path: &Path) -> Result<Self, CommonError> {
        let file = std::fs::File::open(path).map_err(|e| CommonError::io(path, e))?;
        let mut text = String::new();
        GzDecoder::new(file)
            .read_to_string(&mut text)
            .map_err(|e| CommonError::io(path, e))?;
        Self::parse(&text).map_err(|message| CommonError::format(path, message))
    }

    fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().ok_or("empty file")?.split('\t').collect();
        let (Some(&"label"), rest) = (header.first(), header.get(1..).unwrap_or_default()) else {
            return Err("the first column must be `label`".into());
        };
        if rest.len() % 2 != 0 {
            return Err("each model needs a class and a `.p` column".into());
        }
        let mut models = Vec::new();
        for pair in rest.chunks_exact(2) {
            if pair[1] != format!("{}.p", pair[0]) {
                return Err(format!("column `{}` must follow `{}`", pair[1], pair[0]));
            }
            models.push(pair[0].to_owned());
        }
        let mut out = Self {
            classes: vec![Vec::new(); models.len()],
            probs: vec![Vec::new(); models.len()],
            models,
            labels: Vec::new(),
        };
        for (row, line) in lines.enumerate() {
            let fields: Vec<&str> = line.split('\t').collect();
            if fields.len() != header.len() {
                return Err(format!(
                    "row {} has {} fields, not {}",
                    row + 2,
                    fields.len(),
                    header.len()
                ));
            }
            let bad = |f: &str| format!("row {}: `{f}` is not a number", row + 2);
            out.labels
                .push(fields[0].parse().map_err(|_| bad(fields[0]))?);
            for (m, pair) in fields[1..].chunks_exact(2).enumerate() {
                out.classes[m].push(pair[0].parse().map_err(|_| bad(pair[0]))?);
                out.probs[m].push(pair[1].parse().map_err(|_| bad(pair[1]))?);
            }
        }
        Ok(out)
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn model_index(&self, name: &str) -> Option<usize> {
        self.models.iter().position(|m| m == name)
    }

    /// Top-1 accuracy of one model's recorded answers.
    pub fn accuracy(&self, model: usize) -> f64 {
        let Some(classes) = self.classes.get(model) else {
            return 0.0;
        };
        let right = classes
            .iter()
            .zip(&self.labels)
            .filter(|(p, l)| p == l)
            .count();
        right as f64 / self.labels.len().max(1) as f64
    }
}

/// Where the full probability vectors of the recorded answers in `predictions` live:
/// `x.tsv.gz` -> `x.probabilities.tsv.gz`.
pub fn probabilities_path(predictions: &str) -> String {
    let stem = predictions.strip_suffix(".tsv.gz").unwrap_or(predictions);
    format!("{stem}.probabilities.tsv.gz")
}

/// Every model's probability vector on every item: `values[model]` holds `items ×
/// classes` probabilities, row-major, in the order of `models`.
#[derive(Debug, Clone, PartialEq)]
pub struct Probabilities {
    pub classes: usize,
    pub values: Vec<Vec<f32>>,
}

impl Probabilities {
    /// Reads the vectors of `models` on `items` items from `path`; every model must have
    /// a row per item, each with the same number of classes.
    pub fn load(path: &Path, models: &[String], items: usize) -> Result<Self, CommonError> {
        let file = std::fs::File::open(path).map_err(|e| CommonError::io(path, e))?;
        let mut text = String::new();
        GzDecoder::new(file)
            .read_to_string(&mut text)
            .map_err(|e| CommonError::io(path, e))?;
        Self::parse(&text, models, items).map_err(|message| CommonError::format(path, message))
    }

    fn parse(text: &str, models: &[String], items: usize) -> Result<Self, String> {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().ok_or("empty file")?.split('\t').collect();
        let classes = header.len().saturating_sub(2);
        let named = header.get(..2) == Some(&["model", "item"][..])
            && header
                .iter()
                .skip(2)
                .enumerate()
                .all(|(c, h)| *h == format!("p{c}"));
        if !named || classes == 0 {
            return Err("the header must be `model`, `item`, then `p0`, `p1`, ...".into());
        }
        let mut values = vec![Vec::new(); models.len()];
        for (row, line) in lines.enumerate() {
            let at = row + 2;
            let mut fields = line.split('\t');
            let model = fields.next().unwrap_or_default();
            let Some(m) = models.iter().position(|name| name == model) else {
                continue;
            };
            let item: usize = fields
                .next()
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("row {at}: no item number"))?;
            if item != values[m].len() / classes {
                return Err(format!(
                    "row {at}: `{model}` item {item} where item {} was due (rows go in item order)",
                    values[m].len() / classes
                ));
            }
            let before = values[m].len();
            for f in fields {
                values[m].push(
                    f.parse()
                        .map_err(|_| format!("row {at}: `{f}` is not a number"))?,
                );
            }
            if values[m].len() - before != classes {
                return Err(format!(
                    "row {at} has {} probabilities, not {classes}",
                    values[m].len() - before
                ));
            }
        }
        if let Some((m, v)) = models
            .iter()
            .zip(&values)
            .find(|(_, v)| v.len() != items * classes)
        {
            return Err(format!(
                "`{m}` has vectors for {} items, not {items}",
                v.len() / classes
            ));
        }
        Ok(Self { classes, values })
    }

    /// Model `model`'s vector on `item`.
    pub fn row(&self, model: usize, item: usize) -> Option<&[f32]> {
        self.values
            .get(model)?
            .get(item * self.classes..(item + 1) * self.classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probability_vectors_load_for_the_models_asked_in_item_order() {
        let text =
            "model\titem\tp0\tp1\nb\t0\t0.25\t0.75\na\t0\t1\t0\nb\t1\t0.5\t0.5\na\t1\t0\t1\n";
        let names = ["a".to_owned(), "b".to_owned()];
        let p = Probabilities::parse(text, &names, 2).unwrap();
        assert_eq!(p.classes, 2);
        assert_eq!(p.row(0, 1), Some(&[0.0, 1.0][..]));
        assert_eq!(p.row(1, 0), Some(&[0.25, 0.75][..]));
        assert_eq!(p.row(1, 2), None);
        let err = Probabilities::parse(text, &names, 3).unwrap_err();
        assert!(err.contains("`a` has vectors for 2 items, not 3"), "{err}");
        let err =
            Probabilities::parse("model\titem\tp0\tp1\na\t1\t0\t1\n", &names[..1], 1).unwrap_err();
        assert!(err.contains("item 1 where item 0 was due"), "{err}");
        assert!(Probabilities::parse("model\tp0\n", &names, 1).is_err());
        assert!(Probabilities::parse("model\titem\tp0\tp1\na\t0\t1\n", &names, 1).is_err());
        assert_eq!(
            probabilities_path("predictions/f.tsv.gz"),
            "predictions/f.probabilities.tsv.gz"
        );
    }

    #[test]
    fn parses_and_scores() {
        let p =
            Predictions::parse("label\ta\ta.p\tb\tb.p\n1\t1\t0.9\t0\t0.6\n0\t1\t0.5\t0\t0.99\n")
                .unwrap();
        assert_eq!(p.models, ["a", "b"]);
        assert_eq!(p.len(), 2);
        assert_eq!(p.accuracy(0), 0.5);
        assert_eq!(p.accuracy(1), 0.5);
        assert_eq!(p.probs[1][1], 0.99);
        assert_eq!(p.model_index("b"), Some(1));
    }

    #[test]
    fn rejects_malformed() {
        assert!(Predictions::parse("").is_err());
        assert!(Predictions::parse("item\ta\ta.p\n").is_err());
        assert!(Predictions::parse("label\ta\tb.p\n").is_err());
        assert!(Predictions::parse("label\ta\ta.p\n1\t1\n").is_err());
        assert!(Predictions::parse("label\ta\ta.p\n1\tx\t0.5\n").is_err());
    }
}
