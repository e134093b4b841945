//! The inference engine behind a small synchronous trait. A worker owns one backend on a
//! dedicated thread; ONNX Runtime is the implementation (`onnx`).

mod onnx;

use cocktail_common::oip::tensor::Typed;
use ndarray::{Array2, Array4, ArrayView1, Axis};

use crate::WorkerError;

pub use onnx::OnnxBackend;

/// Model-ready tensors for several items.
#[derive(Debug, Clone)]
pub enum Batch {
    /// Normalised pixels in the model's layout (`[batch, C, H, W]` or `[batch, H, W, C]`).
    Images(Array4<f32>),
    /// 8-bit pixels in the model's layout, for graphs that normalise inside.
    ImagesU8(Array4<u8>),
    /// Right-padded token ids and their mask, both `[batch, seq]`; a model that also
    /// takes `token_type_ids` gets zeros of the same shape (one segment per item).
    Tokens {
        input_ids: Array2<i64>,
        attention_mask: Array2<i64>,
    },
    /// The model's own input tensors (`kind = "tensor"`), in manifest order: each its
    /// shape (batch axis first) and its elements.
    Tensors {
        items: usize,
        inputs: Vec<(Vec<usize>, Typed)>,
    },
}

impl Batch {
    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            Self::Images(images) => images.shape()[0],
            Self::ImagesU8(images) => images.shape()[0],
            Self::Tokens { input_ids, .. } => input_ids.nrows(),
            Self::Tensors { items, .. } => *items,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items `rows` (repeats allowed), in that order: how a batch is cut to fit a
    /// model whose batch axis is fixed.
    pub fn rows(&self, rows: &[usize]) -> Self {
        match self {
            Self::Images(images) => Self::Images(images.select(Axis(0), rows)),
            Self::ImagesU8(images) => Self::ImagesU8(images.select(Axis(0), rows)),
            Self::Tokens {
                input_ids,
                attention_mask,
            } => Self::Tokens {
                input_ids: input_ids.select(Axis(0), rows),
                attention_mask: attention_mask.select(Axis(0), rows),
            },
            Self::Tensors { inputs, .. } => Self::Tensors {
                items: rows.len(),
                inputs: inputs
                    .iter()
                    .map(|(shape, values)| {
                        let row_len = shape.iter().skip(1).product();
                        let mut shape = shape.clone();
                        if let Some(first) = shape.first_mut() {
                            *first = rows.len();
                        }
                        (shape, values.rows(rows, row_len))
                    })
                    .collect(),
            },
        }
    }
}

/// Class probabilities, one row per item (softmax of the model's logits).
#[derive(Debug, Clone, PartialEq)]
pub struct Probabilities(pub Array2<f32>);

impl Probabilities {
    /// Turns logits `[batch, classes]` into probabilities with a stable softmax.
    pub fn from_logits(mut logits: Array2<f32>) -> Self {
        for mut row in logits.rows_mut() {
            let max = row.fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            row.mapv_inplace(|x| (x - max).exp());
            let sum = row.sum();
            row.mapv_inplace(|x| x / sum);
        }
        Self(logits)
    }

    pub fn len(&self) -> usize {
        self.0.nrows()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The predicted class and its probability for each item; the lowest class id wins a
    /// tie, as numpy's argmax does in the training scripts.
    pub fn top(&self) -> Vec<(usize, f32)> {
        self.0.rows().into_iter().map(argmax).collect()
    }
}

fn argmax(row: ArrayView1<'_, f32>) -> (usize, f32) {
    row.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &p)| {
            if p > best.1 { (i, p) } else { best }
        })
}

/// An inference engine for one model. `infer` takes `&mut self` because engines (ONNX
/// Runtime sessions among them) are driven by one thread at a time.
pub trait Backend: Send {
    /// Checks that the engine can serve (the model is loaded and answers).
    fn health(&mut self) -> Result<(), WorkerError>;
    /// Runs one batch and returns a probability row per item.
    fn infer(&mut self, batch: &Batch) -> Result<Probabilities, WorkerError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn softmax_and_top() {
        let p = Probabilities::from_logits(array![
            [1.0, 3.0, 2.0],
            [0.0, 0.0, 0.0],
            [1000.0, -1000.0, 0.0]
        ]);
        for row in p.0.rows() {
            assert!((row.sum() - 1.0).abs() < 1e-6);
        }
        let top = p.top();
        assert_eq!(top[0].0, 1);
        assert_eq!(top[1].0, 0, "ties go to the lowest class id");
        assert_eq!(top[2], (0, 1.0));
    }
}
