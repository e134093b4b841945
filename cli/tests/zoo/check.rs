//! `check`, and `cocktail up` refusing the same problems.

use super::*;

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
