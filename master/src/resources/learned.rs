//! The learned load predictor: a small MLP trained offline on generated traces
//! (`models/train/predictor.py`) and run through ONNX Runtime. It sees the last 30 rates
//! divided by their mean and answers the rates 1 to 10 intervals ahead over that mean,
//! so it works at any load level. Until it has seen 30 rates it forecasts their mean.

use std::collections::VecDeque;
use std::path::Path;

use ndarray::Array2;
use ort::session::Session;
use ort::value::TensorRef;

use crate::MasterError;
use cocktail_policy::predict::Predictor;
use parking_lot::Mutex;

/// Rates the model reads.
pub const WINDOW: usize = 30;
/// Leads the model answers (1 to `HORIZON` intervals ahead, in order).
pub const HORIZON: usize = 10;
/// The model's file, relative to the zoo's folder.
pub const MODEL_FILE: &str = "predictors/load_mlp.onnx";

#[derive(Debug)]
pub struct Learned {
    // `forecast` takes `&self`, but running a session needs `&mut`.
    session: Mutex<Session>,
    recent: VecDeque<f64>,
}

impl Learned {
    pub fn load(model: &Path, ort_lib: Option<&Path>) -> Result<Self, MasterError> {
        let failed = |e: String| {
            MasterError::Internal(format!("learned predictor `{}`: {e}", model.display()))
        };
        let env = cocktail_onnx::environment(ort_lib).map_err(|e| failed(e.to_string()))?;
        let session = Session::builder(env)
            .and_then(|b| b.with_intra_threads(1).map_err(ort::Error::from))
            .and_then(|mut b| b.commit_from_file(model))
            .map_err(|e| failed(e.to_string()))?;
        Ok(Self {
            session: Mutex::new(session),
            recent: VecDeque::with_capacity(WINDOW),
        })
    }

    fn mean(&self) -> f64 {
        if self.recent.is_empty() {
            0.0
        } else {
            self.recent.iter().sum::<f64>() / self.recent.len() as f64
        }
    }

    /// The forecast `steps` intervals ahead (the model's last lead beyond it).
    fn run(&self, steps: usize) -> Result<f64, String> {
        let scale = self.mean().max(1e-6);
        let input = Array2::from_shape_vec(
            (1, WINDOW),
            self.recent.iter().map(|r| (r / scale) as f32).collect(),
        )
        .map_err(|e| e.to_string())?;
        let mut session = self.session.lock();
        let tensor = TensorRef::from_array_view(input.view()).map_err(|e| e.to_string())?;
        let outputs = session
            .run(ort::inputs!["rates" => tensor])
            .map_err(|e| e.to_string())?;
        let (_, value) = outputs
            .iter()
            .next()
            .ok_or_else(|| "the model has no output".to_owned())?;
        let (_, data) = value
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        data.get(steps.clamp(1, HORIZON) - 1)
            .map(|v| f64::from(*v) * scale)
            .ok_or_else(|| format!("the output has {} leads, not {HORIZON}", data.len()))
    }
}

impl Predictor for Learned {
    fn name(&self) -> &'static str {
        "learned (MLP)"
    }

    fn observe(&mut self, rate: f64) {
        self.recent.push_back(rate);
        if self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
    }

    /// Trained for 1 to 10 steps ahead; further leads get the 10-step answer.
    fn forecast(&self, steps: usize) -> f64 {
        if self.recent.len() < WINDOW {
            return self.mean().max(0.0);
        }
        // A failed run falls back to the recent mean, visibly: logged and counted.
        match self.run(steps) {
            Ok(forecast) => forecast.max(0.0),
            Err(e) => {
                tracing::warn!(error = %e, "learned predictor failed: forecasting the recent mean");
                metrics::counter!("cocktail_master_predictor_errors_total").increment(1);
                self.mean().max(0.0)
            }
        }
    }
}
