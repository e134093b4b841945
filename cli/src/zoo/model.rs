//! What an ONNX file says about itself: inputs, outputs, element types and shapes, read
//! from ONNX Runtime's session metadata (the same library that will serve the model).

use std::path::Path;

use anyhow::{Context as _, anyhow, bail};
use cocktail_common::zoo::{DType, TensorSpec};
use ort::session::Session;
use ort::value::{TensorElementType, ValueType};

/// An output: its name and shape (`-1` marks a dynamic axis), or `None` when not a tensor.
#[derive(Debug, Clone)]
pub struct Output {
    pub name: String,
    pub shape: Option<Vec<i64>>,
}

impl Output {
    /// The class axis' width, for a `[batch, classes]` output.
    pub fn width(&self) -> Option<i64> {
        match self.shape.as_deref() {
            Some([_, w]) => Some(*w),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Signature {
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<Output>,
}

/// Opens `path` with ONNX Runtime and reads its signature.
pub fn inspect(path: &Path, ort_lib: Option<&Path>) -> anyhow::Result<Signature> {
    if !path.is_file() {
        bail!(
            "`{}` does not exist; give the path of an ONNX file",
            path.display()
        );
    }
    let env = cocktail_onnx::environment(ort_lib)?;
    let session = Session::builder(env)
        .and_then(|mut b| b.commit_from_file(path))
        .map_err(|e| {
            anyhow!(
                "`{}` is not a model ONNX Runtime can load ({e}); check the file is complete (its download or export may have been cut short) and re-export it",
                path.display()
            )
        })?;
    let inputs = session
        .inputs()
        .iter()
        .map(|i| {
            let (dtype, shape) = tensor(i.dtype())
                .with_context(|| format!("`{}`: input `{}`", path.display(), i.name()))?;
            Ok(TensorSpec {
                name: i.name().to_owned(),
                dtype,
                shape,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let outputs = session
        .outputs()
        .iter()
        .map(|o| Output {
            name: o.name().to_owned(),
            shape: o.dtype().tensor_shape().map(|s| s.to_vec()),
        })
        .collect();
    Ok(Signature { inputs, outputs })
}

fn tensor(value: &ValueType) -> anyhow::Result<(DType, Vec<i64>)> {
    let (Some(ty), Some(shape)) = (value.tensor_type(), value.tensor_shape()) else {
        bail!("is not a tensor ({value:?}); only tensor inputs can be fed");
    };
    let dtype = match ty {
        TensorElementType::Float32 => DType::Float32,
        TensorElementType::Float64 => DType::Float64,
        TensorElementType::Int8 => DType::Int8,
        TensorElementType::Int16 => DType::Int16,
        TensorElementType::Int32 => DType::Int32,
        TensorElementType::Int64 => DType::Int64,
        TensorElementType::Uint8 => DType::Uint8,
        TensorElementType::Uint16 => DType::Uint16,
        TensorElementType::Uint32 => DType::Uint32,
        TensorElementType::Uint64 => DType::Uint64,
        TensorElementType::Bool => DType::Bool,
        other => bail!(
            "has element type {other:?}, which Cocktail-rs does not feed; export the model with float32 inputs"
        ),
    };
    Ok((dtype, shape.to_vec()))
}

/// The output holding the task's `classes` logits: `wanted` when given (and it fits),
/// else the only `[batch, classes]` output.
pub fn pick_output(
    file: &Path,
    outputs: &[Output],
    classes: usize,
    task: &str,
    wanted: Option<&str>,
) -> anyhow::Result<String> {
    let describe = || {
        outputs
            .iter()
            .map(|o| match &o.shape {
                Some(s) => format!("`{}` {s:?}", o.name),
                None => format!("`{}` (not a tensor)", o.name),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let classes = classes as i64;
    if let Some(name) = wanted {
        let Some(output) = outputs.iter().find(|o| o.name == name) else {
            bail!(
                "`{}` has no output `{name}`; its outputs are {}; pass one of them to --output",
                file.display(),
                describe()
            );
        };
        if output.width() != Some(classes) {
            bail!(
                "output `{name}` of `{}` is not [batch, {classes}] (task `{task}` has {classes} labels): its outputs are {}; pass the logits output to --output or fix the task's labels",
                file.display(),
                describe()
            );
        }
        return Ok(name.to_owned());
    }
    let fits: Vec<&Output> = outputs
        .iter()
        .filter(|o| o.width() == Some(classes))
        .collect();
    match fits.as_slice() {
        [one] => Ok(one.name.clone()),
        [] => bail!(
            "no output of `{}` is [batch, {classes}] for the {classes} labels of task `{task}`: its outputs are {}; check that the task's labels file matches the model (or that the model is this task's), or pass --output NAME",
            file.display(),
            describe()
        ),
        several => bail!(
            "{} outputs of `{}` are [batch, {classes}]: {}; pass the one holding the logits with --output NAME",
            several.len(),
            file.display(),
            several
                .iter()
                .map(|o| format!("`{}`", o.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
