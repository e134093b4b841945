//! The error enum of the `common` crate.

use std::path::PathBuf;

/// Everything that can go wrong while reading the zoo's data files.
#[derive(Debug, thiserror::Error)]
pub enum CommonError {
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is not a valid zoo manifest: {source}")]
    ManifestSyntax {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("invalid zoo manifest: {0}")]
    ManifestInvalid(String),
    #[error("`{path}`: {message}")]
    DataFormat { path: PathBuf, message: String },
    #[error("`{path}` has sha256 {actual}, the manifest says {expected}")]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    #[error("unknown task `{0}`")]
    UnknownTask(String),
}

impl CommonError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::DataFormat {
            path: path.into(),
            message: message.into(),
        }
    }
}
