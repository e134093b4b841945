//! Locating and loading the ONNX Runtime shared library (`ort` with `load-dynamic`).
//!
//! The library comes from the PyPI wheel `onnxruntime==1.31.1`, which `scripts/setup.sh`
//! unpacks into `.deps/`. ONNX Runtime allows one environment per process, so it is made
//! once and shared by every session.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

use crate::WorkerError;

/// The ONNX Runtime release `ort =2.0.0-rc.15` (API 31) is paired with.
pub const ORT_VERSION: &str = "1.31.1";

/// Where `scripts/setup.sh` puts the library, relative to the workspace root.
const SETUP_PATH: &str = ".deps/onnxruntime/onnxruntime/capi/libonnxruntime.so.1.31.1";

static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// Finds the library: `explicit` (the `--ort-lib` flag), else `ORT_DYLIB_PATH`, else the
/// setup script's location in the current folder or one of its parents.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, WorkerError> {
    let mut tried = Vec::new();
    let from_env = std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from);
    for candidate in explicit.map(Path::to_path_buf).into_iter().chain(from_env) {
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried.push(candidate.display().to_string());
    }
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            let candidate = dir.join(SETUP_PATH);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        tried.push(cwd.join(SETUP_PATH).display().to_string());
    }
    Err(WorkerError::RuntimeMissing {
        tried: tried.join(", "),
        version: ORT_VERSION,
    })
}

/// The process-wide ONNX Runtime environment, loading the library on first use.
pub fn environment(explicit: Option<&Path>) -> Result<&'static Environment, WorkerError> {
    if let Some(env) = ENVIRONMENT.get() {
        return Ok(env);
    }
    // Two threads must not both build an environment: ONNX Runtime refuses the second.
    let _guard = INIT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(env) = ENVIRONMENT.get() {
        return Ok(env);
    }
    let path = locate(explicit)?;
    // `ort` resolves relative paths against the executable's folder; make it absolute.
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let load_error = |message: String| WorkerError::RuntimeLoad {
        path: path.display().to_string(),
        message,
    };
    let builder = ort::init_from(&path).map_err(|e| load_error(e.to_string()))?;
    let env = builder
        .with_name("cocktail")
        .build()
        .map_err(|e| load_error(e.to_string()))?;
    tracing::debug!(path = %path.display(), "loaded ONNX Runtime");
    Ok(ENVIRONMENT.get_or_init(|| env))
}
