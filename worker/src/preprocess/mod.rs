//! Raw inputs to model tensors, exactly as the training scripts prepared them.

mod image;
mod text;

use cocktail_common::{Input, ModelEntry, Preprocess, Zoo};

pub use self::image::{ImagePreprocessor, MAX_IMAGE_SIDE, decode_image};
pub use self::text::{TextPreprocessor, TokenRow, pad};
use crate::{Batch, WorkerError};

/// The preprocessing of one model, built from its manifest entry.
#[derive(Debug)]
pub enum Preprocessor {
    Image(ImagePreprocessor),
    Text(Box<TextPreprocessor>),
}

impl Preprocessor {
    pub fn for_model(zoo: &Zoo, model: &ModelEntry) -> Result<Self, WorkerError> {
        Ok(match &model.preprocess {
            Preprocess::Image {
                width,
                height,
                scale,
                mean,
                std,
            } => Self::Image(ImagePreprocessor {
                width: *width,
                height: *height,
                scale: *scale,
                mean: *mean,
                std: *std,
            }),
            Preprocess::Text {
                tokenizer,
                max_tokens,
            } => Self::Text(Box::new(TextPreprocessor::load(
                &zoo.resolve(tokenizer),
                *max_tokens,
            )?)),
        })
    }

    /// Turns several inputs into one batch. Every input must be of the model's kind.
    pub fn batch(&self, inputs: &[Input]) -> Result<Batch, WorkerError> {
        match self {
            Self::Image(pre) => {
                let images = inputs
                    .iter()
                    .map(|input| match input {
                        Input::Image(image) => Ok(image),
                        Input::Text(_) => {
                            Err(WorkerError::invalid("text", "this model takes images"))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Batch::Images(pre.tensor(&images)))
            }
            Self::Text(pre) => {
                let texts = inputs
                    .iter()
                    .map(|input| match input {
                        Input::Text(text) => Ok(text.as_str()),
                        Input::Image(_) => {
                            Err(WorkerError::invalid("image", "this model takes text"))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                pre.batch(&texts)
            }
        }
    }
}
