//! The AWS deployment (`deploy/aws/`, docs/deploy-aws.md):
//!
//! - `master-policy.json` allows every EC2 call the EC2 provider's source makes, and
//!   nothing beyond what the provider, AWS's launch path and the master's boot script need
//!   (listed here, each with its reason), with the provider's own tag as the condition of
//!   every launch, tag, stop, start and terminate;
//! - `cfn-lint` passes `cocktail.yaml` with no error and no warning (PyPI cfn-lint,
//!   `COCKTAIL_CFN_LINT`, installed by scripts/test.sh);
//! - the template as CloudFormation reads it: the master's role holds exactly the
//!   statements of `master-policy.json`, the workers' only the cluster secret, the secrets
//!   are generated, the security groups let in and out only what the cluster needs, and
//!   the master's boot script passes the provider's flags and calls only what its role
//!   allows;
//! - the stack creates against moto's CloudFormation (`moto_server` on loopback, the venv
//!   scripts/test.sh makes), with public and with private (NAT) workers, and the network,
//!   the security groups' inbound rules, the roles, the instance profiles and the master's
//!   instance with its resolved boot script are there.
//!
//! moto 5.2 does not implement `AWS::SecretsManager::Secret` nor
//! `AWS::EC2::SecurityGroupEgress` in CloudFormation, and ignores a security group's
//! outbound rules, an instance's `SecurityGroupIds` and `MetadataOptions` and a subnet's
//! `MapPublicIpOnLaunch`: the template checks cover those. The Python half
//! (`tests/deploy_aws.py`, run by the moto venv's Python) talks to the moto server only; no
//! traffic goes to the private addresses moto hands out.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "an integration test fails by panicking, with the value that was wrong"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use cocktail_tests::cluster::Moto;
use cocktail_tests::workspace_root;
use serde_json::{Value, json};
use tokio::process::Command;

mod policy;
mod stack;
mod template;

const MASTER_FLAGS: &str = "--host --port --provider --ec2-region --ec2-image-id --public-url \
    --ec2-subnets --ec2-security-groups --ec2-instance-profile --ec2-secret-id \
    --worker-networks --min-instances";

/// moto's account and region, the client network and one of the AMIs moto knows.
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const CLIENT_CIDR: &str = "203.0.113.7/32";
const IMAGE: &str = "ami-12c6146b";

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn policy_file() -> Value {
    serde_json::from_str(&read("deploy/aws/master-policy.json")).unwrap()
}

fn cli_calls(script: &str) -> BTreeSet<String> {
    let words: Vec<&str> = script
        .split(|c: char| c.is_whitespace() || "();$`'\"|&".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(3)
        .filter(|w| {
            w[0] == "aws"
                && w[1..]
                    .iter()
                    .all(|s| s.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        })
        .map(|w| {
            let operation: String = w[2].split('-').map(pascal).collect();
            format!("{}:{operation}", w[1])
        })
        .collect()
}

/// `value` as a list of strings (IAM takes a string or a list).
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect(),
        other => panic!("not a string or a list: {other}"),
    }
}

fn statements(policy: &Value) -> &Vec<Value> {
    policy["Statement"].as_array().unwrap()
}

/// The actions `policy` allows, with the statements allowing each.
fn allowed(policy: &Value) -> BTreeMap<String, Vec<&Value>> {
    let mut actions: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for statement in statements(policy) {
        assert_eq!(statement["Effect"], "Allow", "{statement}");
        for action in strings(&statement["Action"]) {
            actions.entry(action).or_default().push(statement);
        }
    }
    actions
}

/// `actual` is the policy `expected`, statement by statement (the first that differs is
/// shown whole).
fn assert_same_policy(actual: &Value, expected: &Value, what: &str) {
    assert_eq!(actual["Version"], expected["Version"], "{what}: Version");
    let sids = |p: &Value| -> Vec<String> {
        statements(p)
            .iter()
            .map(|s| s["Sid"].as_str().unwrap_or("(no Sid)").to_owned())
            .collect()
    };
    assert_eq!(sids(actual), sids(expected), "{what}: the statements");
    for (a, e) in statements(actual).iter().zip(statements(expected)) {
        assert!(
            a == e,
            "{what}: statement {} is\n{}\ninstead of\n{}",
            e["Sid"],
            serde_json::to_string_pretty(a).unwrap(),
            serde_json::to_string_pretty(e).unwrap()
        );
    }
    assert_eq!(actual, expected, "{what}");
}

/// The provider's `TAG_MANAGED`, read from its source.
fn managed_tag() -> String {
    for (_, source) in provider_sources() {
        if let Some(line) = source
            .lines()
            .find(|l| l.contains("const TAG_MANAGED: &str ="))
        {
            return line.split('"').nth(1).unwrap().to_owned();
        }
    }
    panic!("no TAG_MANAGED in the EC2 provider");
}

/// How the moto venv is installed.
const MOTO_INSTALL: &str = "scripts/test.sh (setup_moto: PyPI moto[server,ec2] in .deps/moto)";

/// The moto venv's `moto_server`, from `COCKTAIL_MOTO` or `.deps/moto/`; `None` when not
/// installed. Its Python (with boto3 and PyYAML) runs tests/deploy_aws.py.
fn moto_server() -> Option<PathBuf> {
    let path = Moto::binary();
    (path.is_file() && path.with_file_name("python").exists()).then_some(path)
}

/// Runs tests/deploy_aws.py with `args` and parses what it prints.
async fn helper(moto: &Path, args: &[&str]) -> Value {
    let output = Command::new(moto.with_file_name("python"))
        .arg(workspace_root().join("tests/deploy_aws.py"))
        .args(args)
        .current_dir(workspace_root())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "deploy_aws.py {args:?} ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// What the master's boot script must pass (the EC2 provider's flags, docs/deploy-aws.md).
/// The EC2 provider's sources: `ec2.rs`, or the files of an `ec2/` module.
fn provider_sources() -> Vec<(PathBuf, String)> {
    let base = workspace_root().join("master/src/resources/provider");
    let mut files = vec![base.join("ec2.rs")];
    if let Ok(dir) = std::fs::read_dir(base.join("ec2")) {
        files.extend(dir.map(|e| e.unwrap().path()));
    }
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && p.is_file())
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect();
    assert!(!sources.is_empty(), "no EC2 provider source under {base:?}");
    sources
}

/// `describe_spot_price_history` → `DescribeSpotPriceHistory`.
fn pascal(snake: &str) -> String {
    snake
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The value of `--flag` in a shell command line (quoted or not).
fn flag(script: &str, name: &str) -> Option<String> {
    let at = script.find(&format!("{name} "))? + name.len() + 1;
    let rest = &script[at..];
    let value = match rest.chars().next()? {
        quote @ ('\'' | '"') => rest[1..].split(quote).next()?,
        _ => rest.split_whitespace().next()?,
    };
    Some(value.to_owned())
}
