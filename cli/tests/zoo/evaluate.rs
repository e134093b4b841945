//! `evaluate` on each kind of labelled set.

use super::*;

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
        let mut args = vec!["zoo", "add", model.to_str().unwrap(), "--task", "fashion"];
        args.extend(FASHION_IMAGE_FLAGS);
        args.extend(["--accuracy", "0.5"]);
        zoo.ok(&args);
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

    // `record` on a committed corrupted copy gives the committed answers on it, and
    // leaves the manifest and the task's own answers alone.
    let corrupted = workspace().join("models/data/fashion-c");
    let images = corrupted.join("inverse-images-idx3-ubyte.gz");
    let out = zoo.dir.join("predictions/fashion-c/inverse.tsv.gz");
    let before = zoo.snapshot();
    let own = zoo.dir.join("predictions/fashion.tsv.gz");
    let own_before = std::fs::read(&own).unwrap();
    let mut args = vec![
        "zoo",
        "record",
        "--task",
        "fashion",
        "--images",
        images.to_str().unwrap(),
    ];
    // 5,000 images against the clean set's 10,000 labels: refused, naming both counts.
    let clean_labels = data.join("t10k-labels-idx1-ubyte.gz");
    let mismatched = [
        "--labels",
        clean_labels.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    zoo.refuses(
        &[args.as_slice(), &mismatched].concat(),
        &["5000 images", "10000 labels"],
    );
    assert!(!out.exists());
    let labels = corrupted.join("inverse-labels-idx1-ubyte.gz");
    args.extend([
        "--labels",
        labels.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    zoo.ok(&args);
    assert!(zoo.snapshot() == before, "the manifest is left alone");
    assert!(
        std::fs::read(&own).unwrap() == own_before,
        "and so are the task's answers"
    );
    let mine = cocktail_common::Predictions::load(&out).unwrap();
    let project = cocktail_common::Predictions::load(
        &workspace().join("models/predictions/fashion-c/inverse.tsv.gz"),
    )
    .unwrap();
    assert_eq!(mine.len(), 5_000);
    assert_eq!(mine.labels, project.labels);
    for name in ["linear", "lenet"] {
        let (m, p) = (
            mine.model_index(name).unwrap(),
            project.model_index(name).unwrap(),
        );
        // Classes only: the probabilities' fourth decimal can differ between CPUs.
        assert_eq!(mine.classes[m], project.classes[p], "{name}");
    }
    // The full vectors go next to the answers, within a digit of the committed ones.
    let names = ["linear".to_owned(), "lenet".to_owned()];
    let vectors =
        |path: &std::path::Path| cocktail_common::Probabilities::load(path, &names, 5_000).unwrap();
    let mine = vectors(
        &zoo.dir
            .join("predictions/fashion-c/inverse.probabilities.tsv.gz"),
    );
    let project =
        vectors(&workspace().join("models/predictions/fashion-c/inverse.probabilities.tsv.gz"));
    assert_eq!(mine.classes, 10);
    for (m, name) in names.iter().enumerate() {
        let far = mine.values[m]
            .iter()
            .zip(&project.values[m])
            .filter(|(a, b)| (*a - *b).abs() >= 1.5e-4)
            .count();
        assert_eq!(far, 0, "{name}: vectors off by more than a digit");
    }
}
