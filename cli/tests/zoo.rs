//! `cocktail zoo init | add | check`, run as a user would: the real binary on a zoo built
//! in a temporary folder from the project's own ONNX files and label files. A command
//! that fails must name the file and the fix and leave the folder byte-identical.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

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

const FASHION: &str =
    "T-shirt/top\nTrouser\nPullover\nDress\nCoat\nSandal\nShirt\nSneaker\nBag\nAnkle boot\n";

#[test]
fn init_reads_each_label_format_and_adds_tasks() {
    let zoo = TempZoo::new("init");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    // One class per line.
    let text = zoo.write("fashion.txt", FASHION);
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "fashion",
        "--labels",
        text.to_str().unwrap(),
    ]);
    assert_eq!(labels(&zoo.manifest(), "fashion")[9], "Ankle boot");
    // A user's comment survives later writes.
    let with_comment = format!(
        "# my zoo\n{}",
        std::fs::read_to_string(zoo.manifest()).unwrap()
    );
    std::fs::write(zoo.manifest(), with_comment).unwrap();
    // timm's config.json: WordNet ids in label_names, readable names in descriptions.
    let config = workspace().join("models/imagenet/efficientnet_lite0.config.json");
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "imagenet",
        "--labels",
        config.to_str().unwrap(),
    ]);
    let imagenet = labels(&zoo.manifest(), "imagenet");
    let hand = labels(&workspace().join("models/imagenet/zoo.toml"), "imagenet");
    assert_eq!(imagenet.len(), 1000);
    assert_eq!(&imagenet[..3], ["tench", "goldfish", "great white shark"]);
    // Two pairs of ImageNet classes share a name (crane, maillot): they get their
    // WordNet id, where the hand-written manifest says e.g. "crane bird" and "crane".
    let differ: Vec<(&String, &String)> =
        imagenet.iter().zip(&hand).filter(|(a, b)| a != b).collect();
    assert_eq!(differ.len(), 4, "{differ:?}");
    assert_eq!(imagenet[134], "crane (n02012849)");
    assert_eq!(imagenet[517], "crane (n03126707)");
    // TorchServe's index_to_name.json, both spellings.
    let ts = zoo.write(
        "index_to_name.json",
        r#"{"1": ["n01443537", "goldfish"], "0": ["n01440764", "tench"], "2": ["n01484850", "great white shark"]}"#,
    );
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "fish",
        "--labels",
        ts.to_str().unwrap(),
    ]);
    assert_eq!(
        labels(&zoo.manifest(), "fish"),
        ["tench", "goldfish", "great white shark"]
    );
    let ts2 = zoo.write("plain_index.json", r#"{"0": "cat", "1": "dog"}"#);
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "pets",
        "--labels",
        ts2.to_str().unwrap(),
    ]);
    assert_eq!(labels(&zoo.manifest(), "pets"), ["cat", "dog"]);
    let text = std::fs::read_to_string(zoo.manifest()).unwrap();
    assert!(text.starts_with("# my zoo\n"), "{text}");
    assert!(
        text.find("[tasks.fashion]") < text.find("[tasks.pets]"),
        "{text}"
    );

    // Refusals leave everything as it was.
    zoo.refuses(
        &[
            "zoo",
            "init",
            &dir,
            "--task",
            "pets",
            "--labels",
            ts2.to_str().unwrap(),
        ],
        &["already has task `pets`", "another --task"],
    );
    let gap = zoo.write("gap.json", r#"{"0": "cat", "2": "dog"}"#);
    zoo.refuses(
        &[
            "zoo",
            "init",
            &dir,
            "--task",
            "gap",
            "--labels",
            gap.to_str().unwrap(),
        ],
        &["gap.json", "1 is missing"],
    );
    let dup = zoo.write("dup.txt", "cat\ndog\ncat\n");
    zoo.refuses(
        &[
            "zoo",
            "init",
            &dir,
            "--task",
            "dup",
            "--labels",
            dup.to_str().unwrap(),
        ],
        &["dup.txt", "`cat` twice"],
    );
    let broken = zoo.write("broken.json", r#"{"label_names": ["a", "b""#);
    zoo.refuses(
        &[
            "zoo",
            "init",
            &dir,
            "--task",
            "broken",
            "--labels",
            broken.to_str().unwrap(),
        ],
        &["broken.json", "does not parse"],
    );
    zoo.refuses(
        &[
            "zoo",
            "init",
            &dir,
            "--task",
            "none",
            "--labels",
            "/nonexistent/labels.txt",
        ],
        &["/nonexistent/labels.txt"],
    );
}

#[test]
fn add_imagenet_model_from_its_timm_config_gives_the_hand_written_block() {
    let zoo = TempZoo::new("imagenet");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let imagenet = workspace().join("models/imagenet");
    for name in ["efficientnet_lite0", "efficientnet_lite1"] {
        let config = imagenet.join(format!("{name}.config.json"));
        let config = config.to_str().unwrap();
        if name == "efficientnet_lite0" {
            zoo.ok(&[
                "zoo", "init", &dir, "--task", "imagenet", "--labels", config,
            ]);
        }
        let model = imagenet.join(format!("{name}.onnx"));
        let said = zoo.ok(&[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "imagenet",
            "--preprocess-from",
            config,
            "--accuracy",
            "0.75",
        ]);
        assert!(said.contains(&format!("added `{name}`")), "{said}");
        assert_same_block(&zoo.entry(name), &entry(&imagenet.join("zoo.toml"), name));
        assert!(zoo.dir.join(format!("{name}.onnx")).is_file());
    }
    let said = zoo.ok(&["zoo", "check"]);
    assert!(said.contains("2 model(s), all files present"), "{said}");
    // A Hugging Face preprocessor_config.json (torchvision-style resize 256, crop 224).
    let hf = zoo.write(
        "preprocessor_config.json",
        r#"{"image_processor_type": "ConvNextImageProcessor", "do_resize": true,
            "size": {"shortest_edge": 256}, "do_center_crop": true,
            "crop_size": {"height": 224, "width": 224}, "resample": 3,
            "do_rescale": true, "rescale_factor": 0.00392156862745098,
            "do_normalize": true, "image_mean": [0.485, 0.456, 0.406],
            "image_std": [0.229, 0.224, 0.225]}"#,
    );
    let model = imagenet.join("efficientnet_lite0.onnx");
    zoo.ok(&[
        "zoo",
        "add",
        model.to_str().unwrap(),
        "--task",
        "imagenet",
        "--name",
        "hf",
        "--preprocess-from",
        hf.to_str().unwrap(),
        "--accuracy",
        "0.75",
    ]);
    let text = std::fs::read_to_string(zoo.manifest()).unwrap();
    assert!(
        text.contains(r#"preprocess = { kind = "image", colour = "rgb", input_size = [3, 224, 224], interpolation = "bicubic", crop_mode = "center", resize_size = 256, mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225], layout = "nchw", dtype = "float32" }"#),
        "{text}"
    );
    // A config whose size disagrees with the model's input is refused by the worker's check.
    let small = zoo.write(
        "small_preprocessor_config.json",
        r#"{"size": {"height": 160, "width": 160}, "do_center_crop": false,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}"#,
    );
    zoo.refuses(
        &[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "imagenet",
            "--name",
            "small",
            "--preprocess-from",
            small.to_str().unwrap(),
            "--accuracy",
            "0.75",
        ],
        &[
            "efficientnet_lite0.onnx",
            "[3, 160, 160]",
            "[-1, 3, 224, 224]",
        ],
    );
    // The same name again is refused.
    let model = imagenet.join("efficientnet_lite0.onnx");
    zoo.refuses(
        &[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "imagenet",
            "--kind",
            "tensor",
            "--accuracy",
            "0.5",
        ],
        &["already has a model `efficientnet_lite0`", "--name"],
    );
}

#[test]
fn add_fashion_model_from_flags_gives_the_projects_block() {
    let zoo = TempZoo::new("fashion");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let text = zoo.write("fashion.txt", FASHION);
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "fashion",
        "--labels",
        text.to_str().unwrap(),
    ]);
    let lenet = workspace().join("models/fashion/lenet.onnx");
    zoo.ok(&[
        "zoo",
        "add",
        lenet.to_str().unwrap(),
        "--task",
        "fashion",
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
        "--accuracy",
        "0.8469",
    ]);
    assert_same_block(
        &zoo.entry("lenet"),
        &entry(&workspace().join("models/zoo.toml"), "lenet"),
    );
    let got = zoo.entry("lenet");
    assert_eq!(got["class_accuracy"].as_array().unwrap().len(), 10);
    // The layout comes from the shape [-1, 1, 28, 28]; a wrong size is refused by the
    // worker's own check, naming the flag.
    zoo.refuses(
        &[
            "zoo",
            "add",
            lenet.to_str().unwrap(),
            "--task",
            "fashion",
            "--name",
            "lenet32",
            "--input-size",
            "1,32,32",
            "--mean",
            "0.286",
            "--std",
            "0.353",
            "--accuracy",
            "0.8",
        ],
        &["lenet.onnx", "[1, 32, 32]", "--input-size"],
    );
    // No preprocessing at all: say what to pass.
    zoo.refuses(
        &[
            "zoo",
            "add",
            lenet.to_str().unwrap(),
            "--task",
            "fashion",
            "--name",
            "bare",
            "--accuracy",
            "0.8",
        ],
        &["lenet.onnx", "--preprocess-from", "--kind tensor"],
    );
    zoo.ok(&["zoo", "check"]);
}

#[test]
fn bad_models_are_refused_naming_the_file_and_the_fix() {
    let zoo = TempZoo::new("bad");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let text = zoo.write("fashion.txt", FASHION);
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "fashion",
        "--labels",
        text.to_str().unwrap(),
    ]);
    let three = zoo.write("three.txt", "a\nb\nc\n");
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "three",
        "--labels",
        three.to_str().unwrap(),
    ]);
    let flags = ["--mean", "0.286", "--std", "0.353", "--accuracy", "0.8"];
    let add = |model: &Path, task: &str, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["zoo", "add", model.to_str().unwrap(), "--task", task]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let as_str = |v: &[String]| -> Vec<String> { v.to_vec() };

    // Two outputs of width 10: pass --output.
    let two = workspace().join("cli/tests/data/two_outputs.onnx");
    let args = add(&two, "fashion", &["--kind", "tensor", "--accuracy", "0.5"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    zoo.refuses(
        &args,
        &[
            "two_outputs.onnx",
            "`logits`",
            "`embedding`",
            "--output NAME",
        ],
    );
    let mut with_output = as_str(&add(
        &two,
        "fashion",
        &["--kind", "tensor", "--accuracy", "0.5"],
    ));
    with_output.extend(["--output".into(), "logits".into()]);
    let with_output: Vec<&str> = with_output.iter().map(String::as_str).collect();
    zoo.ok(&with_output);
    assert_eq!(zoo.entry("two_outputs")["output"].as_str(), Some("logits"));
    assert_eq!(
        zoo.entry("two_outputs")["preprocess"]["kind"].as_str(),
        Some("tensor")
    );

    // Labels that disagree with the output's width.
    let lenet = workspace().join("models/fashion/lenet.onnx");
    let args = add(&lenet, "three", &flags);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    zoo.refuses(
        &args,
        &["lenet.onnx", "[batch, 3]", "`logits` [-1, 10]", "labels"],
    );

    // A corrupt ONNX file: the first kilobyte of a real one.
    let cut = zoo.dir.join("cut.onnx");
    std::fs::write(&cut, &std::fs::read(&lenet).unwrap()[..1024]).unwrap();
    let args = add(&cut, "fashion", &flags);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    zoo.refuses(
        &args,
        &["cut.onnx", "not a model ONNX Runtime can load", "re-export"],
    );

    // A missing file.
    let missing = zoo.dir.join("nowhere.onnx");
    let args = add(&missing, "fashion", &flags);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    zoo.refuses(&args, &["nowhere.onnx", "does not exist"]);

    // An unknown task.
    let args = add(&lenet, "birds", &flags);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    zoo.refuses(&args, &["no task `birds`", "cocktail zoo init"]);
}

#[test]
fn check_names_what_to_fix_and_up_refuses_the_same() {
    let zoo = TempZoo::new("check");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let text = zoo.write("fashion.txt", FASHION);
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "fashion",
        "--labels",
        text.to_str().unwrap(),
    ]);
    for name in ["lenet", "linear"] {
        let model = workspace().join(format!("models/fashion/{name}.onnx"));
        zoo.ok(&[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "fashion",
            "--colour",
            "grey",
            "--mean",
            "0.286",
            "--std",
            "0.353",
            "--accuracy",
            "0.8",
        ]);
    }
    zoo.ok(&["zoo", "check"]);
    // Break it three ways: a file replaced, a file gone, an output renamed.
    std::fs::copy(zoo.dir.join("linear.onnx"), zoo.dir.join("lenet.onnx")).unwrap();
    std::fs::remove_file(zoo.dir.join("linear.onnx")).unwrap();
    let text = std::fs::read_to_string(zoo.manifest()).unwrap();
    std::fs::write(
        zoo.manifest(),
        text.replace("output = \"logits\"", "output = \"probs\""),
    )
    .unwrap();
    let out = zoo.run(&["zoo", "check"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    for says in [
        "model `lenet`: `",
        "lenet.onnx` has sha256",
        "re-add the model",
        "model `linear`: file `",
        "linear.onnx` is missing",
        "has no output `probs`",
        "set `output` to the logits output",
    ] {
        assert!(stdout.contains(says), "`{says}` not in: {stdout}");
    }
    assert!(stderr.contains("3 problem(s)"), "{stderr}");
    // `cocktail up` runs the same file check before starting anything.
    let out = zoo.run(&["up"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for says in [
        "1 problem(s)",
        "cocktail zoo check",
        "linear.onnx` is missing",
    ] {
        assert!(stderr.contains(says), "`{says}` not in: {stderr}");
    }
}

/// Reads a gzip'd TSV written by `evaluate`.
fn gunzip(path: &Path) -> String {
    use std::io::Read as _;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn evaluate_text_models_records_the_projects_answers() {
    let zoo = TempZoo::new("eval-text");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let names = zoo.write("sentiment.txt", "negative\npositive\n");
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "sentiment",
        "--labels",
        names.to_str().unwrap(),
    ]);
    let tokenizer = workspace().join("models/sentiment/tokenizer.json");
    for name in ["boe_tiny", "boe"] {
        let model = workspace().join(format!("models/sentiment/{name}.onnx"));
        zoo.ok(&[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "sentiment",
            "--tokenizer",
            tokenizer.to_str().unwrap(),
            "--max-tokens",
            "128",
            "--accuracy",
            "0.5",
        ]);
    }
    // The first 60 items of the project's test set, labels by name, as a TSV.
    let test = std::fs::read_to_string(workspace().join("models/data/sentiment/test.tsv")).unwrap();
    let mut tsv = String::from("label\ttext\n");
    let mut ids = Vec::new();
    for line in test.lines().skip(1).take(60) {
        let f: Vec<&str> = line.split('\t').collect();
        let id: usize = f[0].parse().unwrap();
        ids.push(id);
        tsv.push_str(&format!("{}\t{}\n", ["negative", "positive"][id], f[2]));
    }
    // A tokenizer file that does not parse is refused, naming it.
    let broken = zoo.write("broken_tokenizer.json", "{\"model\": ");
    let model = workspace().join("models/sentiment/boe.onnx");
    zoo.refuses(
        &[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "sentiment",
            "--name",
            "boe2",
            "--tokenizer",
            broken.to_str().unwrap(),
            "--accuracy",
            "0.5",
        ],
        &["broken_tokenizer.json", "tokenizer.json"],
    );
    let data = zoo.write("labelled.tsv", &tsv);
    let said = zoo.ok(&[
        "zoo",
        "evaluate",
        "--task",
        "sentiment",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert!(said.contains("boe_tiny: accuracy"), "{said}");
    // Selection's reader loads the recorded answers; they are the project's own.
    let mine =
        cocktail_common::Predictions::load(&zoo.dir.join("predictions/sentiment.tsv.gz")).unwrap();
    let project = cocktail_common::Predictions::load(
        &workspace().join("models/predictions/sentiment.tsv.gz"),
    )
    .unwrap();
    assert_eq!(mine.len(), 60);
    assert_eq!(
        mine.labels.iter().map(|&l| l as usize).collect::<Vec<_>>(),
        ids
    );
    for name in ["boe_tiny", "boe"] {
        let (m, p) = (
            mine.model_index(name).unwrap(),
            project.model_index(name).unwrap(),
        );
        assert_eq!(mine.classes[m], project.classes[p][..60], "{name}");
        for (a, b) in mine.probs[m].iter().zip(&project.probs[p]) {
            assert!((a - b).abs() < 2e-4, "{name}: {a} vs {b}");
        }
        let accuracy = zoo.entry(name)["accuracy"].as_float().unwrap();
        assert!(
            (accuracy - mine.accuracy(m)).abs() < 1e-4,
            "{name}: {accuracy}"
        );
    }
    let full = gunzip(&zoo.dir.join("predictions/sentiment.probabilities.tsv.gz"));
    assert_eq!(full.lines().next(), Some("model\titem\tp0\tp1"));
    assert_eq!(full.lines().count(), 1 + 2 * 60);
    zoo.ok(&["zoo", "check"]);
    // A label the task does not have is refused, naming the row.
    let bad = zoo.write("bad.csv", "text,label\ngreat,positive\nmeh,neutral\n");
    zoo.refuses(
        &[
            "zoo",
            "evaluate",
            "--task",
            "sentiment",
            "--data",
            bad.to_str().unwrap(),
        ],
        &["bad.csv", "row 3", "class `neutral`"],
    );
}

#[test]
fn evaluate_an_image_folder_and_refuse_bad_ones() {
    let zoo = TempZoo::new("eval-image");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let imagenet = workspace().join("models/imagenet");
    let config = imagenet.join("efficientnet_lite0.config.json");
    let config = config.to_str().unwrap();
    zoo.ok(&[
        "zoo", "init", &dir, "--task", "imagenet", "--labels", config,
    ]);
    let model = imagenet.join("efficientnet_lite0.onnx");
    zoo.ok(&[
        "zoo",
        "add",
        model.to_str().unwrap(),
        "--task",
        "imagenet",
        "--preprocess-from",
        config,
        "--accuracy",
        "0.751",
    ]);
    // ImageFolder of the three sample photos, folders named by class.
    let data = zoo.dir.join("images");
    for (class, file) in [
        ("tabby", "chelsea.jpg"),
        ("espresso", "coffee.jpg"),
        ("moped", "motorcycle.jpg"),
    ] {
        std::fs::create_dir_all(data.join(class)).unwrap();
        std::fs::copy(
            imagenet.join("samples").join(file),
            data.join(class).join(file),
        )
        .unwrap();
    }
    let data_arg = data.to_str().unwrap().to_owned();
    // A class the task lacks, then a truncated JPEG: refused, nothing written.
    std::fs::create_dir_all(data.join("unicorn")).unwrap();
    zoo.refuses(
        &["zoo", "evaluate", "--task", "imagenet", "--data", &data_arg],
        &["unicorn", "not one of the task's 1000 labels", "rename"],
    );
    std::fs::remove_dir(data.join("unicorn")).unwrap();
    let jpeg = std::fs::read(imagenet.join("samples/coffee.jpg")).unwrap();
    std::fs::write(data.join("espresso/cut.jpg"), &jpeg[..jpeg.len() / 2]).unwrap();
    zoo.refuses(
        &["zoo", "evaluate", "--task", "imagenet", "--data", &data_arg],
        &["cut.jpg", "replace or remove the file"],
    );
    assert!(!zoo.dir.join("predictions").exists());
    std::fs::remove_file(data.join("espresso/cut.jpg")).unwrap();

    zoo.ok(&["zoo", "evaluate", "--task", "imagenet", "--data", &data_arg]);
    let recorded =
        cocktail_common::Predictions::load(&zoo.dir.join("predictions/imagenet.tsv.gz")).unwrap();
    // Sorted by folder: espresso, moped, tabby; each answer is a right class (samples.tsv).
    assert_eq!(recorded.labels, [967, 665, 281]);
    let accepted: [&[u16]; 3] = [&[967, 968, 504], &[665, 670], &[281, 282, 283, 284, 285]];
    for (class, ok) in recorded.classes[0].iter().zip(accepted) {
        assert!(ok.contains(class), "{class} not in {ok:?}");
    }
    let accuracy = zoo.entry("efficientnet_lite0")["accuracy"]
        .as_float()
        .unwrap();
    assert!((accuracy - recorded.accuracy(0)).abs() < 1e-4);
    zoo.ok(&["zoo", "check"]);
}

#[test]
fn evaluate_on_the_committed_idx_test_set_records_the_projects_answers() {
    let zoo = TempZoo::new("eval-idx");
    let dir = zoo.dir.to_str().unwrap().to_owned();
    let names = zoo.write("fashion.txt", FASHION);
    zoo.ok(&[
        "zoo",
        "init",
        &dir,
        "--task",
        "fashion",
        "--labels",
        names.to_str().unwrap(),
    ]);
    // The task references the project's committed test set (10,000 IDX images).
    let data = workspace().join("models/data/fashion");
    let text = std::fs::read_to_string(zoo.manifest()).unwrap().replace(
        "[tasks.fashion]\n",
        &format!(
            "[tasks.fashion]\ntest_set = {{ format = \"idx\", images = \"{0}/t10k-images-idx3-ubyte.gz\", labels = \"{0}/t10k-labels-idx1-ubyte.gz\" }}\n",
            data.display()
        ),
    );
    std::fs::write(zoo.manifest(), text).unwrap();
    for name in ["linear", "lenet"] {
        let model = workspace().join(format!("models/fashion/{name}.onnx"));
        zoo.ok(&[
            "zoo",
            "add",
            model.to_str().unwrap(),
            "--task",
            "fashion",
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
            "--accuracy",
            "0.5",
        ]);
    }
    // --data with a committed test set would orphan it: refused.
    zoo.refuses(
        &[
            "zoo",
            "evaluate",
            "--task",
            "fashion",
            "--data",
            names.to_str().unwrap(),
        ],
        &["committed `test_set`", "remove `test_set`"],
    );
    zoo.ok(&["zoo", "evaluate", "--task", "fashion"]);
    let mine =
        cocktail_common::Predictions::load(&zoo.dir.join("predictions/fashion.tsv.gz")).unwrap();
    let project =
        cocktail_common::Predictions::load(&workspace().join("models/predictions/fashion.tsv.gz"))
            .unwrap();
    assert_eq!(mine.len(), 10_000);
    assert_eq!(mine.labels, project.labels);
    let reference = |name: &str| entry(&workspace().join("models/zoo.toml"), name);
    for name in ["linear", "lenet"] {
        let (m, p) = (
            mine.model_index(name).unwrap(),
            project.model_index(name).unwrap(),
        );
        assert_eq!(mine.classes[m], project.classes[p], "{name}");
        let got = zoo.entry(name);
        assert_eq!(got["accuracy"], reference(name)["accuracy"], "{name}");
        assert_eq!(
            got["class_accuracy"],
            reference(name)["class_accuracy"],
            "{name}"
        );
    }
    zoo.ok(&["zoo", "check"]);
}
