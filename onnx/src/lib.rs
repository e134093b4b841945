//! Locating and loading the ONNX Runtime shared library (`ort` with `load-dynamic`), for
//! every process that runs a model: the worker, the master's learned load predictor and
//! `cocktail profile`.
//!
//! The library comes from the PyPI wheel `onnxruntime==1.31.1`, which `scripts/setup.sh`
//! unpacks into `.deps/`. ONNX Runtime allows one environment per process, so it is made
//! once and shared by every session.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

/// Why ONNX Runtime is not available.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error(
        "ONNX Runtime library not found at {tried}. Run `scripts/setup.sh` (it fetches onnxruntime=={version} from PyPI into .deps/), or set ORT_DYLIB_PATH / pass --ort-lib with the path of libonnxruntime.so.{version}"
    )]
    Missing {
        tried: String,
        version: &'static str,
    },
    #[error("cannot load ONNX Runtime from `{path}`: {message}")]
    Load { path: String, message: String },
}

/// The ONNX Runtime release `ort =2.0.0-rc.15` (API 31) is paired with.
pub const ORT_VERSION: &str = "1.31.1";

/// Where `scripts/setup.sh` puts the library, relative to the workspace root.
const SETUP_PATH: &str = ".deps/onnxruntime/onnxruntime/capi/libonnxruntime.so.1.31.1";

static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// Finds the library: `explicit` (the `--ort-lib` flag), else `ORT_DYLIB_PATH`, else the
/// setup script's location in the current folder or one of its parents. A path the user
/// named must exist: falling back silently would load a library they did not ask for.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, OnnxError> {
    let named = explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from));
    let missing = |tried: String| OnnxError::Missing {
        tried,
        version: ORT_VERSION,
    };
    if let Some(path) = named {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(missing(format!("`{}`", path.display())))
        };
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    cwd.ancestors()
        .map(|dir| dir.join(SETUP_PATH))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            missing(format!(
                "`{}` (nor in a parent folder)",
                cwd.join(SETUP_PATH).display()
            ))
        })
}

/// The process-wide ONNX Runtime environment, loading the library on first use.
pub fn environment(explicit: Option<&Path>) -> Result<&'static Environment, OnnxError> {
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
    let load_error = |message: String| OnnxError::Load {
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
