//! The project's own zoo is rebuilt by `models/build-zoo.sh`, which runs `cocktail zoo
//! init`, `add` and `evaluate` (the real binary) on the committed ONNX files, the training
//! scripts' exported metadata and the committed test sets: the manifest comes out as
//! committed, profiles included (kept by `add --profile-from` for unchanged files), and
//! the recorded answers as recorded.

use cocktail_common::{Predictions, Probabilities};

use super::*;

/// A fresh temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("cocktail-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cocktail(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cocktail"))
        .arg("--ort-lib")
        .arg(ort_lib())
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn table(path: &Path) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

/// The keys whose values differ between two manifests, per model, for a readable failure.
fn differences(got: &toml::Table, want: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["schema", "tasks"] {
        if got.get(key) != want.get(key) {
            out.push(format!(
                "`{key}`: {:?} vs {:?}",
                got.get(key),
                want.get(key)
            ));
        }
    }
    let models = |t: &toml::Table| t["models"].as_array().unwrap().clone();
    let (got, want) = (models(got), models(want));
    if got.len() != want.len() {
        out.push(format!("{} models vs {}", got.len(), want.len()));
    }
    for (g, w) in got.iter().zip(&want) {
        let (g, w) = (g.as_table().unwrap(), w.as_table().unwrap());
        for key in g.keys().chain(w.keys()) {
            if g.get(key) != w.get(key) {
                out.push(format!(
                    "model {}: `{key}` = {:?} vs {:?}",
                    w["name"],
                    g.get(key),
                    w.get(key)
                ));
            }
        }
    }
    out
}

#[test]
fn the_projects_zoo_is_rebuilt_by_the_commands() {
    let dir = TempDir::new("build-zoo");
    let out = Command::new("bash")
        .arg(workspace().join("models/build-zoo.sh"))
        .arg(&dir.0)
        .env("COCKTAIL_BIN", env!("CARGO_BIN_EXE_cocktail"))
        .env("ORT_DYLIB_PATH", ort_lib())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build-zoo.sh failed: {}",
        stderr(&out)
    );

    // The manifest: the same tables, profiles included, and the same bytes.
    let committed = workspace().join("models/zoo.toml");
    let rebuilt = dir.0.join("zoo.toml");
    let differ = differences(&table(&rebuilt), &table(&committed));
    assert!(
        differ.is_empty(),
        "rebuilt vs committed:\n{}",
        differ.join("\n")
    );
    assert!(
        std::fs::read(&rebuilt).unwrap() == std::fs::read(&committed).unwrap(),
        "the rebuilt manifest has the committed tables but not its bytes (a comment or layout differs); run models/build-zoo.sh"
    );

    // The recorded answers: the same models, labels and classes on every item. The
    // probabilities may differ by one in their 4th decimal: ONNX Runtime's CPU kernels
    // depend on the processor's instruction set, so logits differ in their last bits
    // from machine to machine (where this test was written, 27 of 182,962 differ).
    for task in ["fashion", "sentiment"] {
        let path = format!("predictions/{task}.tsv.gz");
        let got = Predictions::load(&dir.0.join(&path)).unwrap();
        let want = Predictions::load(&workspace().join("models").join(&path)).unwrap();
        assert_eq!(got.models, want.models, "{task}: models");
        assert_eq!(got.labels, want.labels, "{task}: labels");
        let mut off = 0;
        for (m, name) in want.models.iter().enumerate() {
            assert!(
                got.classes[m] == want.classes[m],
                "{task}: {name}'s classes"
            );
            for (item, (a, b)) in got.probs[m].iter().zip(&want.probs[m]).enumerate() {
                assert!(
                    (a - b).abs() < 1.5e-4,
                    "{task}: {name} on item {item}: probability {a} vs {b}"
                );
                off += usize::from(a != b);
            }
        }
        println!("{task}: {off} probabilities differ in their last digit");
        // And the full vectors next to them, to the same digit.
        let path = cocktail_common::predictions::probabilities_path(&path);
        let got = Probabilities::load(&dir.0.join(&path), &want.models, want.len()).unwrap();
        let want = Probabilities::load(
            &workspace().join("models").join(&path),
            &want.models,
            want.len(),
        )
        .unwrap();
        assert_eq!(got.classes, want.classes, "{task}: classes");
        for (m, (a, b)) in got.values.iter().zip(&want.values).enumerate() {
            let far = a
                .iter()
                .zip(b)
                .filter(|(a, b)| (*a - *b).abs() >= 1.5e-4)
                .count();
            assert_eq!(
                far, 0,
                "{task}: model {m}'s vectors off by more than a digit"
            );
        }
    }

    // The rebuilt folder is a complete zoo.
    let manifest = rebuilt.to_str().unwrap();
    let out = cocktail(&["--zoo", manifest, "zoo", "check"]);
    assert!(out.status.success(), "zoo check: {}", stderr(&out));
}

#[test]
fn init_refuses_a_test_set_that_does_not_fit_and_changes_nothing() {
    let dir = TempDir::new("init-test-set");
    std::fs::create_dir_all(&dir.0).unwrap();
    let labels = dir.0.join("labels.txt");
    std::fs::write(&labels, "negative\npositive\n").unwrap();
    let zoo = dir.0.join("zoo");
    let init = |extra: &[&str]| {
        let mut args = vec![
            "zoo",
            "init",
            zoo.to_str().unwrap(),
            "--task",
            "sentiment",
            "--labels",
            labels.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        cocktail(&args)
    };
    let refused = |extra: &[&str], says: &[&str]| {
        let out = init(extra);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {text}");
        for s in says {
            assert!(text.contains(s), "`{s}` not in: {text}");
        }
        assert!(
            !zoo.join("zoo.toml").exists(),
            "{extra:?} wrote the manifest"
        );
        assert!(!zoo.join("data").exists(), "{extra:?} left data/");
    };
    // Class ids beyond the task's two classes.
    let bad = dir.0.join("bad.tsv");
    std::fs::write(&bad, "label\tsource\ttext\n1\tx\tgood\n7\tx\tbad\n").unwrap();
    refused(
        &["--test-tsv", bad.to_str().unwrap()],
        &["label 7", "2 classes"],
    );
    // A file that is not there.
    refused(
        &["--test-tsv", "nowhere.tsv"],
        &["nowhere.tsv", "does not exist"],
    );
    // Fashion's IDX files: 10 classes' ids for a 2-class task.
    let data = workspace().join("models/data/fashion");
    let images = data.join("t10k-images-idx3-ubyte.gz");
    let ids = data.join("t10k-labels-idx1-ubyte.gz");
    refused(
        &[
            "--test-idx",
            images.to_str().unwrap(),
            ids.to_str().unwrap(),
        ],
        &["is not below its 2 classes"],
    );
    // A good set is copied into data/TASK/ and named relative to the manifest.
    let good = dir.0.join("test.tsv");
    std::fs::write(&good, "label\tsource\ttext\n1\tx\tgood\n0\tx\tbad\n").unwrap();
    let out = init(&["--test-tsv", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("a test set of 2 items"));
    let manifest = table(&zoo.join("zoo.toml"));
    assert_eq!(
        manifest["tasks"]["sentiment"]["test_set"]["path"].as_str(),
        Some("data/sentiment/test.tsv")
    );
    assert_eq!(
        std::fs::read(zoo.join("data/sentiment/test.tsv")).unwrap(),
        std::fs::read(&good).unwrap()
    );
}

#[test]
fn add_keeps_a_profile_only_for_the_same_file() {
    let dir = TempDir::new("profile-from");
    let zoo = &dir.0;
    let committed = workspace().join("models/zoo.toml");
    let config = workspace().join("models/fashion/config.json");
    let out = cocktail(&[
        "zoo",
        "init",
        zoo.to_str().unwrap(),
        "--task",
        "fashion",
        "--labels",
        config.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = zoo.join("zoo.toml");
    let add = |file: &str, name: &str| {
        let model = workspace().join("models/fashion").join(file);
        let out = cocktail(&[
            "--zoo",
            manifest.to_str().unwrap(),
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "fashion",
            "--name",
            name,
            "--preprocess-from",
            config.to_str().unwrap(),
            "--accuracy",
            "0.5",
            "--profile-from",
            committed.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The same bytes under the same name: the committed profile.
    assert!(add("linear.onnx", "linear").contains("kept its profile"));
    // Another file under that model's name: its profile would be another model's.
    assert!(add("lenet.onnx", "mlp_tiny").contains("cocktail profile --models mlp_tiny"));
    let doc = table(&manifest);
    let models = doc["models"].as_array().unwrap();
    let committed = table(&committed);
    let linear = committed["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"].as_str() == Some("linear"))
        .unwrap();
    assert_eq!(models[0]["profile"], linear["profile"]);
    assert!(models[1].get("profile").is_none());
    // Files from outside the folder are copied in under the model's name.
    assert_eq!(models[0]["file"].as_str(), Some("linear.onnx"));
    assert!(zoo.join("mlp_tiny.onnx").is_file());
}
