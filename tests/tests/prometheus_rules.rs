//! deploy/prometheus/ loads in Prometheus: `promtool` (Debian's `prometheus` package,
//! which scripts/test.sh installs) checks the configuration, with the secret and the
//! targets folder it names moved into a temporary folder, checks the recording and
//! alerting rules, and runs their unit tests (rules.test.yml), which cover every alert.
//! Without promtool the test fails, naming the install step, unless COCKTAIL_ALLOW_SKIP=1.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::Path;
use std::process::Command;

use cocktail_tests::workspace_root;

/// Runs `promtool ARGS` in `dir`; its stdout, or `None` when promtool is not installed.
fn promtool(dir: &Path, args: &[&str]) -> Option<String> {
    let output = match Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("promtool {args:?}: {e}"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "promtool {args:?} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Some(stdout)
}

/// The names after `key:` in a rules file's lines (`record:` or `alert:`).
fn names(file: &str, key: &str) -> Vec<String> {
    file.lines()
        .filter_map(|line| line.trim().trim_start_matches("- ").strip_prefix(key))
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn the_prometheus_configuration_and_rules_load_and_pass_their_unit_tests() {
    let dir = workspace_root().join("deploy/prometheus");
    let Some(checked) = cocktail_tests::required(
        promtool(&dir, &["check", "rules", "rules.yml", "alerts.yml"]),
        "promtool",
        "scripts/test.sh (`apt_install prometheus`)",
    ) else {
        return;
    };
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let (rules, alerts) = (read("rules.yml"), read("alerts.yml"));
    let (records, alert_names) = (names(&rules, "record:"), names(&alerts, "alert:"));
    for (file, count) in [
        ("rules.yml", records.len()),
        ("alerts.yml", alert_names.len()),
    ] {
        assert!(
            checked.contains(&format!("Checking {file}\n  SUCCESS: {count} rules found")),
            "promtool found other rules than the {count} of {file}:\n{checked}"
        );
    }

    // The unit tests pass and exercise every alert and every recording rule.
    promtool(&dir, &["test", "rules", "rules.test.yml"]).unwrap();
    let tests = read("rules.test.yml");
    for alert in &alert_names {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "rules.test.yml does not test the alert {alert}"
        );
    }
    for record in &records {
        assert!(
            tests.contains(&format!("expr: {record}")),
            "rules.test.yml does not test the recording rule {record}"
        );
    }

    // The whole configuration, as Prometheus loads it in its container: the cluster
    // secret's file and the targets folder exist (here, in a temporary folder), and a
    // targets file as the master writes it parses.
    let config = read("prometheus.yml");
    let scratch = std::env::temp_dir().join(format!("cocktail-prometheus-{}", std::process::id()));
    let targets = scratch.join("targets");
    std::fs::create_dir_all(&targets).unwrap();
    for name in ["rules.yml", "alerts.yml"] {
        std::fs::copy(dir.join(name), scratch.join(name)).unwrap();
    }
    std::fs::write(
        scratch.join("cluster-secret"),
        "0123456789abcdef0123456789abcdef",
    )
    .unwrap();
    std::fs::write(
        targets.join("workers.json"),
        r#"[{"targets": ["cocktail-i-1:9000"], "labels": {"pool": "resnet", "instance_id": "i-1",
             "instance_type": "c5.large", "cluster": "cocktail"}}]"#,
    )
    .unwrap();
    for path in [
        "/var/lib/cocktail/cluster-secret",
        "/var/lib/cocktail-targets/",
    ] {
        assert!(config.contains(path), "prometheus.yml names no {path}");
    }
    let moved = config
        .replace(
            "/var/lib/cocktail/cluster-secret",
            &scratch.join("cluster-secret").display().to_string(),
        )
        .replace(
            "/var/lib/cocktail-targets/",
            &format!("{}/", targets.display()),
        );
    std::fs::write(scratch.join("prometheus.yml"), moved).unwrap();
    let full = promtool(&scratch, &["check", "config", "prometheus.yml"]).unwrap();
    std::fs::remove_dir_all(&scratch).unwrap();
    assert!(
        full.contains("SUCCESS: prometheus.yml is valid prometheus config file syntax"),
        "{full}"
    );
    assert!(
        full.contains(&format!("SUCCESS: {} rules found", records.len())),
        "{full}"
    );
}
