//! Recorded predictions: every zoo model's predicted class and top probability on every
//! test item of a task, so the simulator replays real ensemble accuracy.
//!
//! File format (gzip'd TSV, one row per test item in test-set order): the header is
//! `label` followed by a `<model>` and `<model>.p` column per model; rows hold the true
//! class id, then each model's predicted class id and its softmax probability.

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

#[cfg(test)]
mod tests {
    use super::*;

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
