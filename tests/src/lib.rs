//! Shared helpers for the black-box integration tests in `tests/tests/`.

pub mod cluster;

use std::path::PathBuf;

/// The workspace root (the folder holding `models/` and `.deps/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The zoo manifest under test: `COCKTAIL_ZOO` when set (to check a retrained zoo before
/// it replaces the committed one), else this checkout's.
pub fn zoo_manifest() -> PathBuf {
    std::env::var_os("COCKTAIL_ZOO")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(cocktail_common::zoo::DEFAULT_MANIFEST))
}
