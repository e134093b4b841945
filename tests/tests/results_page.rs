//! The results page regenerates bit for bit: `cocktail results` (what
//! `scripts/results.sh` runs, here on the debug build, whose simulator crates are
//! optimised: see the workspace `Cargo.toml`) writes into a scratch folder, and every
//! page, table and plot it writes must equal the committed one under `docs/`, and the
//! zoo's ensemble-gain table in `models/README.md` must stay as committed. A commit that
//! changes a simulated figure has to change the page too. The live-measured fragments
//! (`docs/measured/`) are copied in, as `cocktail results` includes them as they are.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use cocktail_tests::cluster::binary;
use cocktail_tests::workspace_root;

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    found
}

fn copy_dir(from: &Path, to: &Path) {
    for file in files(from) {
        let target = to.join(&file);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&file), target).unwrap();
    }
}

#[test]
fn the_committed_results_page_is_what_cocktail_results_writes() {
    let root = workspace_root();
    let docs = root.join("docs");
    let readme = root.join("models/README.md");
    let readme_before = std::fs::read_to_string(&readme).unwrap();
    let out = std::env::temp_dir().join(format!("cocktail-results-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    copy_dir(&docs.join("measured"), &out.join("measured"));

    let status = Command::new(binary("cocktail"))
        .args(["results", "--out"])
        .arg(&out)
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(status.success(), "cocktail results failed: {status}");

    let written: Vec<PathBuf> = files(&out)
        .into_iter()
        .filter(|f| !f.starts_with("measured"))
        .collect();
    assert!(
        written.iter().any(|f| f == Path::new("results.md")),
        "cocktail results wrote no results.md: {written:?}"
    );
    let differ: Vec<&PathBuf> = written
        .iter()
        .filter(|f| std::fs::read(out.join(f)).ok() != std::fs::read(docs.join(f)).ok())
        .collect();
    // Committed files the generator no longer writes are stale.
    let stale: Vec<PathBuf> = ["results", "plots"]
        .iter()
        .flat_map(|d| {
            files(&docs.join(d))
                .into_iter()
                .map(move |f| Path::new(d).join(f))
        })
        .filter(|f| !written.contains(f))
        .filter(|f| !is_live(f))
        .collect();
    let readme_after = std::fs::read_to_string(&readme).unwrap();
    assert!(
        differ.is_empty() && stale.is_empty() && readme_after == readme_before,
        "docs/ is not what `scripts/results.sh` writes: differing {differ:?}, committed but \
         no longer written {stale:?}, models/README.md changed: {}; run scripts/results.sh \
         and commit the result (the regenerated files are in {})",
        readme_after != readme_before,
        out.display()
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// The committed files that live tools write rather than the simulator: the dashboard's
/// screenshot (tests/tests/dashboard.rs) and the live measurements' tables.
fn is_live(file: &Path) -> bool {
    file == Path::new("plots/dashboard.png")
}
