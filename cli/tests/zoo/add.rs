//! `init`, `add` and `remove`.

use super::*;

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
    let mut args = vec!["zoo", "add", lenet.to_str().unwrap(), "--task", "fashion"];
    args.extend(FASHION_IMAGE_FLAGS);
    args.extend(["--accuracy", "0.8469"]);
    zoo.ok(&args);
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
fn remove_takes_a_model_out_and_add_takes_it_back() {
    let zoo = TempZoo::new("remove");
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
    let mut flags = vec!["--task", "fashion", "--accuracy", "0.8"];
    flags.extend(FASHION_IMAGE_FLAGS);
    for name in ["lenet", "linear"] {
        let model = workspace().join(format!("models/fashion/{name}.onnx"));
        let mut args = vec!["zoo", "add", model.to_str().unwrap()];
        args.extend(&flags);
        zoo.ok(&args);
    }
    // An unknown name is refused, naming the models there are.
    zoo.refuses(
        &["zoo", "remove", "resnet"],
        &["no model `resnet`", "`lenet`, `linear`"],
    );
    let said = zoo.ok(&["zoo", "remove", "lenet"]);
    assert!(said.contains("removed `lenet`"), "{said}");
    assert!(said.contains("`lenet.onnx` stays"), "{said}");
    let left = manifest_table(&zoo.manifest());
    let names: Vec<&str> = left["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["linear"]);
    assert!(zoo.dir.join("lenet.onnx").is_file());
    zoo.ok(&["zoo", "check"]);
    // The file it left holds the same bytes: added again, it is used where it is.
    let lenet = workspace().join("models/fashion/lenet.onnx");
    let mut args = vec!["zoo", "add", lenet.to_str().unwrap()];
    args.extend(&flags);
    zoo.ok(&args);
    assert_same_block(
        &zoo.entry("lenet"),
        &entry(&workspace().join("models/zoo.toml"), "lenet"),
    );
    // Other bytes under that file name are refused.
    zoo.ok(&["zoo", "remove", "lenet"]);
    std::fs::write(zoo.dir.join("lenet.onnx"), b"not the model").unwrap();
    let mut args = vec!["zoo", "add", lenet.to_str().unwrap()];
    args.extend(&flags);
    zoo.refuses(
        &args,
        &[
            "lenet.onnx",
            "already exists in the zoo's folder with other contents",
        ],
    );
}
