//! The `cocktail` binary fails cleanly: one line naming the fix, a non-zero exit, no panic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::process::Command;

fn cocktail() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cocktail"));
    // Run outside the checkout so the setup location is not found by walking up.
    cmd.current_dir(std::env::temp_dir())
        .env_remove("ORT_DYLIB_PATH");
    cmd
}

fn zoo() -> String {
    format!("{}/../models/zoo.toml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn missing_onnx_runtime_is_one_helpful_line() {
    let out = cocktail()
        .args([
            "--zoo",
            &zoo(),
            "--ort-lib",
            "/nonexistent/libonnxruntime.so",
            "profile",
            "--dry-run",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("ONNX Runtime library not found"),
        "{stderr}"
    );
    assert!(
        stderr.contains("scripts/setup.sh") && stderr.contains("/nonexistent/libonnxruntime.so"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let out = cocktail()
        .args(["--zoo", &zoo(), "profile", "--dry-run"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ONNX Runtime library not found"),
        "{stderr}"
    );
}

#[test]
fn bad_flags_name_the_flag() {
    let out = cocktail()
        .args(["--zoo", &zoo(), "profile", "--batch-sizes", "4,2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("`--batch-sizes`") && stderr.contains("[4, 2]"),
        "{stderr}"
    );
}
