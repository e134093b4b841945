//! ONNX Runtime backend: one session, `intra_threads` intra-op threads (how instance sizes
//! are emulated locally), checked against the manifest when it loads.

use std::borrow::Cow;
use std::path::Path;

use cocktail_common::oip::tensor::Typed;
use cocktail_common::{ModelEntry, Zoo, zoo::DType};
use ndarray::{Array2, Axis, Ix2};
use ort::session::{Session, SessionInputValue, builder::GraphOptimizationLevel};
use ort::value::TensorRef;

use super::{Backend, Batch, Probabilities};
use crate::WorkerError;

/// A loaded ONNX model.
#[derive(Debug)]
pub struct OnnxBackend {
    model: ModelEntry,
    classes: usize,
    session: Session,
}

impl OnnxBackend {
    /// Loads `model` from the zoo with `intra_threads` threads, verifying the file's
    /// checksum and that the graph's inputs and output are the manifest's.
    pub fn load(
        zoo: &Zoo,
        model: &ModelEntry,
        intra_threads: usize,
        ort_lib: Option<&Path>,
    ) -> Result<Self, WorkerError> {
        let env = cocktail_onnx::environment(ort_lib)?;
        zoo.verify_checksum(model)?;
        let classes = zoo.task(&model.task)?.labels.len();
        let builder = Session::builder(env)?;
        // With `gpu`, CUDA runs the graph when the library has it; ONNX Runtime falls back
        // to the CPU provider otherwise.
        #[cfg(feature = "gpu")]
        let builder = builder
            .with_execution_providers([ort::ep::CUDA::default().build()])
            .map_err(ort::Error::from)?;
        let session = builder
            .with_optimization_level(GraphOptimizationLevel::Level3)
            .map_err(ort::Error::from)?
            .with_intra_threads(intra_threads.max(1))
            .map_err(ort::Error::from)?
            .with_inter_threads(1)
            .map_err(ort::Error::from)?
            // The same answers on every x86-64 CPU. Without VNNI, ONNX Runtime's int8
            // kernels lose precision by default: on an AVX2-only AMD EPYC, Lite0's logits
            // for the reference tensor of chelsea.jpg moved by up to 1.45 ("Egyptian cat"
            // for "tiger cat"), Lite1 answered "consomme" for coffee.jpg. With this entry
            // they are the reference's to the bit there, at 1.3 to 1.6 times the Lites'
            // time and about the same for MiniLM (`models/imagenet/int8_precision.py`).
            .with_config_entry("session.x64quantprecision", "1")
            .map_err(ort::Error::from)?
            .commit_from_file(zoo.resolve(&model.file))?;
        let backend = Self {
            model: model.clone(),
            classes,
            session,
        };
        backend.check_signature()?;
        Ok(backend)
    }

    pub fn model(&self) -> &ModelEntry {
        &self.model
    }

    fn check_signature(&self) -> Result<(), WorkerError> {
        let mismatch = |message: String| WorkerError::ModelMismatch {
            model: self.model.name.clone(),
            message,
        };
        let graph_inputs: Vec<&str> = self.session.inputs().iter().map(|i| i.name()).collect();
        let manifest_inputs: Vec<&str> =
            self.model.inputs.iter().map(|i| i.name.as_str()).collect();
        if graph_inputs != manifest_inputs {
            return Err(mismatch(format!(
                "graph inputs {graph_inputs:?}, manifest inputs {manifest_inputs:?}"
            )));
        }
        if !self
            .session
            .outputs()
            .iter()
            .any(|o| o.name() == self.model.output)
        {
            return Err(mismatch(format!("no output named `{}`", self.model.output)));
        }
        Ok(())
    }

    /// Binds the batch's tensors to the graph's input names, in manifest order.
    fn bind<'a>(
        &self,
        batch: &'a Batch,
        zeros: &'a mut Option<Array2<i64>>,
    ) -> Result<Vec<(Cow<'static, str>, SessionInputValue<'a>)>, WorkerError> {
        let cannot = |name: &str| WorkerError::ModelMismatch {
            model: self.model.name.clone(),
            message: format!("cannot feed input `{name}` from this batch"),
        };
        if let Batch::Tokens { input_ids, .. } = batch
            && self.model.inputs.iter().any(|i| i.name == "token_type_ids")
        {
            *zeros = Some(Array2::zeros(input_ids.raw_dim()));
        }
        let zeros: &'a Option<Array2<i64>> = zeros;
        let mut bound = Vec::with_capacity(self.model.inputs.len());
        for (index, input) in self.model.inputs.iter().enumerate() {
            let value: SessionInputValue<'a> = match (batch, input.dtype, input.name.as_str()) {
                (Batch::Images(images), DType::Float32, _) => {
                    TensorRef::from_array_view(images.view())?.into()
                }
                (Batch::ImagesU8(images), DType::Uint8, _) => {
                    TensorRef::from_array_view(images.view())?.into()
                }
                (Batch::Tokens { input_ids, .. }, DType::Int64, "input_ids") => {
                    TensorRef::from_array_view(input_ids.view())?.into()
                }
                (Batch::Tokens { attention_mask, .. }, DType::Int64, "attention_mask") => {
                    TensorRef::from_array_view(attention_mask.view())?.into()
                }
                (Batch::Tokens { .. }, DType::Int64, "token_type_ids") => {
                    let Some(zeros) = zeros else {
                        return Err(cannot(&input.name));
                    };
                    TensorRef::from_array_view(zeros.view())?.into()
                }
                (Batch::Tensors { inputs, .. }, _, _) => {
                    let Some((shape, values)) = inputs.get(index) else {
                        return Err(cannot(&input.name));
                    };
                    typed_value(shape, values)?
                }
                _ => return Err(cannot(&input.name)),
            };
            bound.push((Cow::Owned(input.name.clone()), value));
        }
        Ok(bound)
    }
}

/// A borrowed ONNX tensor of any element type the project feeds.
fn typed_value<'a>(
    shape: &[usize],
    values: &'a Typed,
) -> Result<SessionInputValue<'a>, WorkerError> {
    let shape = shape.to_vec();
    Ok(match values {
        Typed::F32(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::F64(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::I8(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::I16(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::I32(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::I64(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::U8(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::U16(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::U32(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::U64(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
        Typed::Bool(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
    })
}

impl Backend for OnnxBackend {
    fn health(&mut self) -> Result<(), WorkerError> {
        // A session that loaded and passed the signature check can run; a probe inference
        // here would cost a batch on every health check.
        Ok(())
    }

    fn infer(&mut self, batch: &Batch) -> Result<Probabilities, WorkerError> {
        Ok(Probabilities::from_logits(self.logits(batch)?))
    }
}

impl OnnxBackend {
    /// The model's raw output `[batch, classes]` for the batch (before the softmax). A
    /// model whose batch axis is fixed at `k` (`torch.onnx.export` without `dynamic_axes`
    /// gives 1) runs in slices of `k` items, the last one padded by repeating its last
    /// item, whose extra rows are dropped.
    pub fn logits(&mut self, batch: &Batch) -> Result<Array2<f32>, WorkerError> {
        let n = batch.len();
        let fixed = self
            .model
            .inputs
            .first()
            .and_then(|i| i.shape.first())
            .and_then(|&k| usize::try_from(k).ok())
            .filter(|&k| k > 0);
        let Some(k) = fixed.filter(|&k| k != n && n > 0) else {
            return self.run(batch);
        };
        let mut rows = Vec::with_capacity(n);
        for start in (0..n).step_by(k) {
            let slice: Vec<usize> = (start..start + k).map(|i| i.min(n - 1)).collect();
            let logits = self.run(&batch.rows(&slice))?;
            rows.extend(
                logits
                    .rows()
                    .into_iter()
                    .take(n - start)
                    .map(|r| r.to_owned()),
            );
        }
        let views: Vec<_> = rows.iter().map(|r| r.view()).collect();
        ndarray::stack(Axis(0), &views).map_err(|e| WorkerError::Ort(format!("logits: {e}")))
    }

    /// One run of the graph on exactly the batch given.
    fn run(&mut self, batch: &Batch) -> Result<Array2<f32>, WorkerError> {
        let n = batch.len();
        let mut zeros = None;
        let inputs = self.bind(batch, &mut zeros)?;
        let outputs = self.session.run(inputs)?;
        let Some(logits) = outputs.get(&self.model.output) else {
            return Err(WorkerError::Ort(format!(
                "no output `{}`",
                self.model.output
            )));
        };
        let logits = logits.try_extract_array::<f32>()?;
        let logits = logits
            .into_dimensionality::<Ix2>()
            .map_err(|e| WorkerError::Ort(format!("logits are not 2-D: {e}")))?;
        if logits.dim() != (n, self.classes) {
            return Err(WorkerError::Ort(format!(
                "logits have shape {:?}, expected ({n}, {})",
                logits.dim(),
                self.classes
            )));
        }
        Ok(Array2::from(logits.to_owned()))
    }
}
