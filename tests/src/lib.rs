//! Shared helpers for the black-box integration tests in `tests/tests/`.

use std::path::PathBuf;

/// The workspace root (the folder holding `models/` and `.deps/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The zoo manifest of this checkout.
pub fn zoo_manifest() -> PathBuf {
    workspace_root().join(cocktail_common::zoo::DEFAULT_MANIFEST)
}
