//! The configuration file (docs/configuration.md), through the real binaries: a file
//! alone reproduces the master `cocktail up` starts; flags and `COCKTAIL_*` variables
//! override a file; an unknown key and a bad value are refused with a message naming
//! them; `--print-config` redacts credentials.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cocktail_tests::cluster::{Process, binary};
use cocktail_tests::zoo_manifest;

/// A folder of its own for one test's files.
fn folder(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cocktail-config-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `name` with `args` and only the `COCKTAIL_*` variables in `env`, so that the
/// environment the tests run in sets nothing.
fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(binary(name));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("COCKTAIL_") {
            command.env_remove(key);
        }
    }
    command.args(args).envs(env.iter().copied());
    command.output().unwrap()
}

/// The standard output of a run that must succeed.
fn printed(name: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let output = run(name, args, env);
    assert!(
        output.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The error message of a run that must fail.
fn refused(name: &str, args: &[&str]) -> String {
    let output = run(name, args, &[]);
    assert!(!output.status.success(), "{name} {args:?} was accepted");
    String::from_utf8(output.stderr).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn master_with(file: &str, extra: &[&str], env: &[(&str, &str)]) -> String {
    let mut args = vec!["--config", file, "--print-config"];
    args.extend(extra);
    printed("cocktail-master", &args, env)
}

#[test]
fn a_file_alone_reproduces_the_master_cocktail_up_starts() {
    let dir = folder("up");
    let zoo = zoo_manifest().display().to_string();
    // `cocktail up`'s master, as `up` would start it: its flags, printed as a file.
    let up = printed("cocktail", &["up", "--zoo", &zoo, "--print-config"], &[]);
    for line in [
        "provider = \"local\"\n",
        "port = 8080\n",
        "grpc-port = 8001\n",
        "max-threads = 1\n",
        "[testing]\nprovisioning-delay-ms = 0\n",
    ] {
        assert!(up.contains(line), "{line} in {up}");
    }
    let models = up.lines().find(|l| l.starts_with("models = [")).unwrap();
    assert!(
        models.contains("\"cnn\", ") && models.contains("\"minilm\""),
        "{models}"
    );
    let file = write(&dir, "cocktail.toml", &up);
    // A master started from that file alone has the same configuration, and so has
    // `cocktail up` given it.
    assert_eq!(master_with(&file, &[], &[]), up);
    assert_eq!(
        printed(
            "cocktail",
            &["up", "--config", &file, "--print-config"],
            &[]
        ),
        up
    );
    // `up`'s flags override the file it is given.
    let moved = printed(
        "cocktail",
        &["up", "--config", &file, "--port", "9090", "--print-config"],
        &[],
    );
    assert_eq!(moved.replace("port = 9090\n", "port = 8080\n"), up);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn variables_and_flags_override_the_file() {
    let dir = folder("override");
    let file = write(
        &dir,
        "cocktail.toml",
        "port = 9000\non-demand = true\nscheme = \"weighted\"\ninstance-types = [\"c5.xlarge\", \"t3.xlarge\"]\n[testing]\nseed = 7\n",
    );
    let from_file = master_with(&file, &[], &[]);
    for line in [
        "port = 9000\n",
        "scheme = \"weighted\"\n",
        "instance-types = [\"c5.xlarge\", \"t3.xlarge\"]\n",
        "seed = 7\n",
        "on-demand = true\n",
        "cache-ttl-s = 3600\n",
    ] {
        assert!(from_file.contains(line), "{line} in {from_file}");
    }
    let variable = [
        ("COCKTAIL_PORT", "9001"),
        ("COCKTAIL_SEED", "8"),
        ("COCKTAIL_ON_DEMAND", "false"),
    ];
    let from_env = master_with(&file, &[], &variable);
    assert!(from_env.contains("port = 9001\n") && from_env.contains("seed = 8\n"));
    assert!(from_env.contains("on-demand = false\n"), "{from_env}");
    assert!(from_env.contains("scheme = \"weighted\"\n"), "{from_env}");
    let from_flag = master_with(&file, &["--port", "9002", "--seed=9"], &variable);
    assert!(from_flag.contains("port = 9002\n") && from_flag.contains("seed = 9\n"));
    // COCKTAIL_CONFIG names the file as `--config` does.
    let named = printed(
        "cocktail-master",
        &["--print-config"],
        &[("COCKTAIL_CONFIG", &file)],
    );
    assert_eq!(named, from_file);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn unknown_keys_and_bad_values_are_refused_by_name() {
    let dir = folder("refused");
    for (text, message) in [
        (
            "cache-tl-s = 5",
            "unknown key `cache-tl-s`; the nearest valid key is `cache-ttl-s`",
        ),
        (
            "[testing]\nsed = 5",
            "unknown key `testing.sed`; the nearest valid key is `testing.seed`",
        ),
        (
            "seed = 5",
            "unknown key `seed`; it goes in the [testing] table",
        ),
        (
            "[resources]\nprovider = \"local\"",
            "unknown key `[resources]`",
        ),
        (
            "cache-ttl-s = 0",
            "`cache-ttl-s` = 0: 0 is not in 1..18446744073709551615; expected a whole number",
        ),
        (
            "scheme = \"clipper\"",
            "`scheme` = \"clipper\": not one of the choices; expected one of `weighted`, `majority`, `average`",
        ),
        (
            "on-demand = \"yes\"",
            "`on-demand` = \"yes\": not a boolean; expected true or false",
        ),
        ("interval-s = \"soon\"", "`interval-s` = \"soon\""),
    ] {
        let file = write(&dir, "bad.toml", text);
        let error = refused("cocktail-master", &["--config", &file, "--print-config"]);
        assert!(
            error.contains(&format!("error: {file}: {message}")),
            "{text}: {error}"
        );
    }
    // A checked value the clap parser cannot see is refused when the master starts:
    // TLS needs both halves.
    let file = write(
        &dir,
        "tls.toml",
        "port = 0\ntls-cert = \"/nonexistent.pem\"",
    );
    let error = refused("cocktail-master", &["--config", &file]);
    assert!(
        error.contains("`--tls-cert` and `--tls-key` go together"),
        "{error}"
    );
    // So is a tracking margin out of its range, flag or key.
    for bad in ["-1", "11", "NaN"] {
        let flag = format!("--tracking-margin={bad}");
        let error = refused("cocktail-master", &["--port", "0", &flag]);
        assert!(
            error.contains(&format!(
                "`--tracking-margin` must be 0 to 10 standard errors; given {bad}"
            )),
            "{bad}: {error}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn print_config_redacts_credentials() {
    let dir = folder("redacted");
    let file = write(
        &dir,
        "cocktail.toml",
        "redis-url = \"redis://:hunter2@cache:6379/0\"\nmongo-url = \"mongodb://dbuser:s3cret@h1:27017,h2:27017/?replicaSet=rs\"\n",
    );
    let printed = master_with(&file, &[], &[]);
    for secret in ["hunter2", "s3cret", "dbuser"] {
        assert!(!printed.contains(secret), "{secret} in {printed}");
    }
    assert!(printed.contains("redis-url = \"redis://<redacted>@cache:6379/0\"\n"));
    assert!(
        printed.contains("mongo-url = \"mongodb://<redacted>@h1:27017,h2:27017/?replicaSet=rs\"\n")
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_master_started_from_a_file_alone_serves_on_its_settings() {
    let dir = folder("serves");
    let file = write(
        &dir,
        "cocktail.toml",
        "port = 0\ngrpc-port = 0\nhttp-workers = 1\n[testing]\nseed = 3\n",
    );
    let master = Process::start("cocktail-master", &["--config".to_owned(), file]).await;
    // `port = 0`: a free port, not the default 8080.
    assert!(!master.url.ends_with(":8080"), "{}", master.url);
    let live = reqwest::get(format!("{}/v2/health/live", master.url))
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    drop(master);
    std::fs::remove_dir_all(dir).unwrap();
}
