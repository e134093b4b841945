//! `cocktail zoo init | add | remove | check | evaluate`, run as a user would: the real binary on a zoo built
//! in a temporary folder from the project's own ONNX files and label files. A command
//! that fails must name the file and the fix and leave the folder byte-identical.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

mod add;
mod build;
mod check;
mod evaluate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cocktail_common::Preprocess;
use cocktail_common::zoo::TensorSpec;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The ONNX Runtime library: ORT_DYLIB_PATH, else the setup script's `.deps/`.
fn ort_lib() -> PathBuf {
    let path = std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            workspace().join(".deps/onnxruntime/onnxruntime/capi/libonnxruntime.so.1.31.1")
        });
    assert!(
        path.is_file(),
        "ONNX Runtime not at {}: run scripts/setup.sh or set ORT_DYLIB_PATH",
        path.display()
    );
    path
}

struct TempZoo {
    dir: PathBuf,
}

impl TempZoo {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("cocktail-zoo-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    fn manifest(&self) -> PathBuf {
        self.dir.join("zoo.toml")
    }

    /// Runs `cocktail --zoo DIR/zoo.toml ARGS` from the temporary folder.
    fn run(&self, args: &[&str]) -> Output {
        let manifest = self.manifest();
        let ort = ort_lib();
        let mut all = vec![
            "--zoo",
            manifest.to_str().unwrap(),
            "--ort-lib",
            ort.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        Command::new(env!("CARGO_BIN_EXE_cocktail"))
            .current_dir(&self.dir)
            .args(all)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?} failed: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every file of the folder and its bytes.
    fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    }

    /// Runs a command that must fail, leave the folder as it was, and say all of `says`.
    fn refuses(&self, args: &[&str], says: &[&str]) -> String {
        let before = self.snapshot();
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        for s in says {
            assert!(stderr.contains(s), "{args:?}: `{s}` not in: {stderr}");
        }
        let after = self.snapshot();
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{args:?} changed the folder's files"
        );
        assert!(before == after, "{args:?} changed a file's bytes");
        stderr
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn entry(&self, name: &str) -> toml::Table {
        entry(&self.manifest(), name)
    }
}

impl Drop for TempZoo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn manifest_table(path: &Path) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

fn entry(manifest: &Path, name: &str) -> toml::Table {
    let doc = manifest_table(manifest);
    doc["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_table().unwrap())
        .find(|m| m["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no model `{name}` in {}", manifest.display()))
        .clone()
}

fn labels(manifest: &Path, task: &str) -> Vec<String> {
    manifest_table(manifest)["tasks"][task]["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .collect()
}

/// The fields `add` reads from the file and the config: they must equal the project's
/// hand-checked entry.
fn assert_same_block(got: &toml::Table, want: &toml::Table) {
    for key in ["sha256", "output"] {
        assert_eq!(got[key], want[key], "{key}");
    }
    let inputs = |t: &toml::Table| -> Vec<TensorSpec> { t["inputs"].clone().try_into().unwrap() };
    assert_eq!(inputs(got), inputs(want));
    let pre = |t: &toml::Table| -> Preprocess { t["preprocess"].clone().try_into().unwrap() };
    assert_eq!(pre(got), pre(want));
}

/// How the project's fashion models are fed, as `cocktail zoo add` flags.
const FASHION_IMAGE_FLAGS: [&str; 12] = [
    "--colour",
    "grey",
    "--interpolation",
    "bilinear",
    "--crop-pct",
    "1",
    "--crop-mode",
    "squash",
    "--mean",
    "0.286",
    "--std",
    "0.353",
];

const FASHION: &str =
    "T-shirt/top\nTrouser\nPullover\nDress\nCoat\nSandal\nShirt\nSneaker\nBag\nAnkle boot\n";
