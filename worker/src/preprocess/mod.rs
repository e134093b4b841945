//! Raw inputs to model tensors, exactly as the training pipelines prepared them: one
//! implementation for the worker, `cocktail profile` and the zoo tests.

pub mod geometry;
mod image;
pub mod resample;
mod tensor;
mod text;

use cocktail_common::{Input, ModelEntry, Preprocess, Zoo};

pub use self::image::{
    DecodedImage, ImagePreprocessor, MAX_IMAGE_SIDE, PixelValues, decode_image, to_channels,
};
pub use self::resample::Pixels;
pub use self::tensor::{TensorPreprocessor, TensorRows};
pub use self::text::{TextPreprocessor, TokenRow, pad};
use crate::{Batch, WorkerError};

/// The preprocessing of one model, built from its manifest entry.
#[derive(Debug)]
pub enum Preprocessor {
    Image(ImagePreprocessor),
    Text(Box<TextPreprocessor>),
    Tensor(TensorPreprocessor),
}

impl Preprocessor {
    pub fn for_model(zoo: &Zoo, model: &ModelEntry) -> Result<Self, WorkerError> {
        model
            .preprocess
            .check(&model.inputs)
            .map_err(|message| WorkerError::ModelMismatch {
                model: model.name.clone(),
                message: format!("preprocess: {message}"),
            })?;
        Ok(match &model.preprocess {
            Preprocess::Image(spec) => Self::Image(ImagePreprocessor::new(spec.clone())),
            Preprocess::Text {
                tokenizer,
                max_tokens,
            } => Self::Text(Box::new(TextPreprocessor::load(
                &zoo.resolve(tokenizer),
                *max_tokens,
            )?)),
            Preprocess::Tensor => Self::Tensor(TensorPreprocessor::new(model.inputs.clone())),
        })
    }

    /// Turns several test-set inputs into one batch. Every input must be of the model's
    /// kind; tensor models have no raw inputs.
    pub fn batch(&self, inputs: &[Input]) -> Result<Batch, WorkerError> {
        match self {
            Self::Image(pre) => {
                let images = inputs
                    .iter()
                    .map(|input| match input {
                        Input::Image(image) => Ok(Pixels::from(image)),
                        Input::Text(_) => {
                            Err(WorkerError::invalid("text", "this model takes images"))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                pre.tensor(&images.iter().collect::<Vec<_>>())
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
            Self::Tensor(_) => Err(WorkerError::invalid(
                "inputs",
                "this model takes tensors, not images or text",
            )),
        }
    }
}
