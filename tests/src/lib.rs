//! Shared helpers for the black-box integration tests in `tests/tests/`.

pub mod cluster;
pub mod load;

use std::path::PathBuf;

/// Whether a test's external dependency is there to run it. A missing one fails the
/// test with the step that installs it: a green run must mean the test ran. Only with
/// `COCKTAIL_ALLOW_SKIP=1` (never in `.ci/run`) does it skip, saying so.
#[track_caller]
pub fn required<T>(found: Option<T>, what: &str, install: &str) -> Option<T> {
    if found.is_some() {
        return found;
    }
    let message = format!("{what} is not installed; install it with: {install}");
    assert!(
        std::env::var("COCKTAIL_ALLOW_SKIP").is_ok_and(|v| v == "1"),
        "{message} (or set COCKTAIL_ALLOW_SKIP=1 to skip this test)"
    );
    eprintln!("skipped (COCKTAIL_ALLOW_SKIP=1): {message}");
    None
}

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
