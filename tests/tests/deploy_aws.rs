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

use cocktail_tests::cluster::{free_port, start_server};
use cocktail_tests::workspace_root;
use serde_json::{Value, json};
use tokio::process::Command;

/// Everything the master's role may do, one action and its reason a line. Nothing else is
/// allowed.
const NEEDED: &str = "
    ec2:DescribeSpotPriceHistory   spot prices (refresh_prices)
    ec2:DescribeInstances          the provider's instances (describe)
    ec2:CreateLaunchTemplate       a launch template per pool, for CreateFleet
    ec2:CreateLaunchTemplateVersion  a pool's template again after a master restart
    ec2:CreateFleet                launches: instant fleets
    ec2:RunInstances               what an instant fleet launches
    ec2:CreateTags                 tags at launch (instances, templates), a managed instance's corrected price tag
    ec2:TerminateInstances         terminate
    ec2:StopInstances              stop (standbys)
    ec2:StartInstances             start (standbys)
    iam:PassRole                   the workers' instance profile in the launch templates
    secretsmanager:GetSecretValue  the master's boot script reads its two secrets
";

/// The actions of [`NEEDED`].
fn needed() -> BTreeSet<String> {
    NEEDED
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// EC2 calls that support no resource-level permission: the only ones on `*`.
const UNSCOPED: &[&str] = &["ec2:DescribeInstances", "ec2:DescribeSpotPriceHistory"];

/// What the master's boot script must pass (the EC2 provider's flags, docs/deploy-aws.md).
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

/// Every `.client` followed by `.some_call(` in `source`, as `ec2:SomeCall`.
fn client_calls(source: &str) -> BTreeSet<String> {
    let mut calls = BTreeSet::new();
    let mut rest = source;
    while let Some(at) = rest.find(".client") {
        rest = &rest[at + ".client".len()..];
        let after = rest.trim_start();
        let Some(call) = after.strip_prefix('.') else {
            continue;
        };
        let name: String = call
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
            .collect();
        if !name.is_empty() && call[name.len()..].trim_start().starts_with('(') {
            calls.insert(format!("ec2:{}", pascal(&name)));
        }
    }
    calls
}

/// Every `aws SERVICE OPERATION` the AWS CLI runs in `script`, as `service:Operation`.
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

#[test]
fn the_master_policy_allows_every_ec2_call_of_the_provider_and_nothing_else() {
    let policy = policy_file();
    assert_eq!(policy["Version"], "2012-10-17");
    let allowed = allowed(&policy);

    // Every call the provider makes, found in its source.
    let mut calls = BTreeSet::new();
    for (path, source) in provider_sources() {
        let found = client_calls(&source);
        eprintln!("{}: {found:?}", path.display());
        calls.extend(found);
    }
    assert!(calls.len() >= 5, "too few EC2 calls found: {calls:?}");
    let missing: Vec<&String> = calls.iter().filter(|c| !allowed.contains_key(*c)).collect();
    assert!(
        missing.is_empty(),
        "the provider calls {missing:?}, which deploy/aws/master-policy.json does not allow"
    );
    let needed = needed();
    let unexplained: Vec<&String> = calls.iter().filter(|c| !needed.contains(*c)).collect();
    assert!(
        unexplained.is_empty(),
        "the provider calls {unexplained:?}: add them to NEEDED with their reason"
    );

    // Nothing beyond what is needed, no wildcard, no negation.
    let granted: BTreeSet<String> = allowed.keys().cloned().collect();
    assert_eq!(granted, needed, "the policy's actions");
    for statement in statements(&policy) {
        for key in ["NotAction", "NotResource", "NotPrincipal"] {
            assert!(statement.get(key).is_none(), "{key} in {statement}");
        }
        for action in strings(&statement["Action"]) {
            assert!(!action.contains('*'), "wildcard action {action}");
        }
        let resources = strings(&statement["Resource"]);
        if resources.iter().any(|r| r == "*") {
            for action in strings(&statement["Action"]) {
                assert!(
                    UNSCOPED.contains(&action.as_str()),
                    "{action} on every resource: {statement}"
                );
            }
        } else {
            for resource in &resources {
                assert!(
                    !resource.ends_with(":*") && !resource.contains("::*"),
                    "a resource of any type: {resource}"
                );
            }
        }
    }

    // Every launch, tag, stop, start and terminate of an instance needs the provider's tag.
    let tag = managed_tag();
    let request_tag = json!({ "StringEquals": { format!("aws:RequestTag/{tag}"): "true" } });
    let resource_tag = format!("aws:ResourceTag/{tag}");
    let on_instances = |s: &Value| {
        strings(&s["Resource"])
            .iter()
            .any(|r| r.ends_with(":instance/*"))
    };
    for action in ["ec2:RunInstances", "ec2:CreateFleet"] {
        let on: Vec<&Value> = allowed[action]
            .iter()
            .copied()
            .filter(|s| on_instances(s))
            .collect();
        assert!(!on.is_empty(), "{action} launches no instance");
        for statement in on {
            assert_eq!(statement["Condition"], request_tag, "{action}: {statement}");
        }
    }
    for action in [
        "ec2:TerminateInstances",
        "ec2:StopInstances",
        "ec2:StartInstances",
    ] {
        for statement in &allowed[action] {
            assert_eq!(
                statement["Condition"]["StringEquals"][&resource_tag], "true",
                "{action} on instances that are not the provider's: {statement}"
            );
            assert!(on_instances(statement), "{statement}");
        }
    }
    for statement in &allowed["ec2:CreateTags"] {
        let condition = &statement["Condition"];
        let at_launch = match &condition["StringEquals"]["ec2:CreateAction"] {
            Value::Null => Vec::new(),
            actions => strings(actions),
        };
        let own_price = condition["StringEquals"][&resource_tag] == "true"
            && condition["ForAllValues:StringEquals"]["aws:TagKeys"] == json!(["cocktail:price"]);
        let on_templates = statement["Resource"]
            .as_str()
            .is_some_and(|r| r.ends_with(":launch-template/*"));
        assert!(
            at_launch.iter().all(|a| {
                a == "RunInstances"
                    || a == "CreateFleet"
                    || (on_templates && a == "CreateLaunchTemplate")
            }) && (!at_launch.is_empty() || own_price),
            "ec2:CreateTags beyond tags at launch and the own price tag: {statement}"
        );
    }

    // The role it may pass, to EC2 only; the two secrets it may read.
    let [pass] = allowed["iam:PassRole"].as_slice() else {
        panic!("one PassRole statement")
    };
    assert_eq!(pass["Resource"], "${WorkerRole.Arn}");
    assert_eq!(
        pass["Condition"],
        json!({ "StringEquals": { "iam:PassedToService": "ec2.amazonaws.com" } })
    );
    let [read] = allowed["secretsmanager:GetSecretValue"].as_slice() else {
        panic!("one GetSecretValue statement")
    };
    assert_eq!(
        read["Resource"],
        json!(["${ClusterSecret}", "${AdminToken}"])
    );
}

/// cfn-lint, from `COCKTAIL_CFN_LINT` or `.deps/cfn-lint/`; `None` when not installed.
fn cfn_lint() -> Option<PathBuf> {
    let path = std::env::var_os("COCKTAIL_CFN_LINT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/cfn-lint/bin/cfn-lint"));
    path.is_file().then_some(path)
}

#[tokio::test]
async fn cfn_lint_passes_the_template_without_an_error_or_a_warning() {
    let Some(lint) = cfn_lint() else {
        eprintln!(
            "skipped: cfn-lint is not installed (scripts/test.sh installs it: setup_cfn_lint)"
        );
        return;
    };
    let output = Command::new(&lint)
        .arg("--format")
        .arg("parseable")
        .arg("--")
        .arg(workspace_root().join("deploy/aws/cocktail.yaml"))
        .output()
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && report.trim().is_empty(),
        "cfn-lint ({}):\n{report}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The moto venv's `moto_server`, from `COCKTAIL_MOTO` or `.deps/moto/`; `None` when not
/// installed. Its Python (with boto3 and PyYAML) runs tests/deploy_aws.py.
fn moto_server() -> Option<PathBuf> {
    let path = std::env::var_os("COCKTAIL_MOTO")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/moto/bin/moto_server"));
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

/// A string of the template: itself, or the text of its `Fn::Sub`.
fn sub_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Object(o) if o.contains_key("Fn::Sub") => match &o["Fn::Sub"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts[0].as_str().unwrap().to_owned(),
            other => panic!("Fn::Sub of {other}"),
        },
        other => panic!("not a string or an Fn::Sub: {other}"),
    }
}

/// `document` with every `Fn::Sub` replaced by its text.
fn unwrap_subs(document: &Value) -> Value {
    match document {
        Value::Object(o) if o.len() == 1 && o.contains_key("Fn::Sub") => {
            Value::String(sub_text(document))
        }
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), unwrap_subs(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(unwrap_subs).collect()),
        other => other.clone(),
    }
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

/// The `--flags` of the `cocktail-master` command line in `script`.
fn master_flags(script: &str) -> BTreeSet<String> {
    let start = script
        .find("exec cocktail-master")
        .expect("the boot script starts cocktail-master");
    let command: String = script[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("START"))
        .collect::<Vec<_>>()
        .join(" ");
    command
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.split(['$', '{', '\'']).next().unwrap().to_owned())
        .collect()
}

/// A rule of `group` as `GROUP in|out PORT PEER`; the peer is a CIDR, a parameter or a
/// security group's logical id.
fn rule(group: &str, direction: &str, rule: &Value) -> String {
    assert_eq!(rule["IpProtocol"], "tcp", "{rule}");
    assert_eq!(
        rule["FromPort"], rule["ToPort"],
        "one port per rule: {rule}"
    );
    let peer = [
        "CidrIp",
        "SourceSecurityGroupId",
        "DestinationSecurityGroupId",
    ]
    .iter()
    .find_map(|k| rule.get(*k))
    .unwrap_or_else(|| panic!("no peer in {rule}"));
    let peer = match peer {
        Value::String(cidr) => cidr.clone(),
        Value::Object(o) if o.contains_key("Ref") => o["Ref"].as_str().unwrap().to_owned(),
        Value::Object(o) if o.contains_key("Fn::GetAtt") => {
            o["Fn::GetAtt"][0].as_str().unwrap().to_owned()
        }
        other => panic!("peer {other}"),
    };
    format!("{group} {direction} {} {peer}", rule["FromPort"])
}

#[tokio::test]
async fn the_template_grants_holds_and_starts_what_the_cluster_needs_and_nothing_more() {
    let Some(moto) = moto_server() else {
        eprintln!(
            "skipped: the moto venv is not installed (scripts/test.sh installs it: setup_moto)"
        );
        return;
    };
    let template = helper(&moto, &["template", "deploy/aws/cocktail.yaml"]).await;
    let resources = template["Resources"].as_object().unwrap();
    let of_type = |ty: &str| -> BTreeMap<String, Value> {
        resources
            .iter()
            .filter(|(_, r)| r["Type"] == ty)
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect()
    };

    // The master's role: the statements of master-policy.json, with the same ${...}.
    let master_role = &resources["MasterRole"]["Properties"];
    let [policy] = master_role["Policies"].as_array().unwrap().as_slice() else {
        panic!("one inline policy on the master's role")
    };
    assert_same_policy(
        &unwrap_subs(&policy["PolicyDocument"]),
        &policy_file(),
        "MasterRole's policy in deploy/aws/cocktail.yaml against deploy/aws/master-policy.json",
    );
    for role in ["MasterRole", "WorkerRole"] {
        let properties = &resources[role]["Properties"];
        assert!(properties.get("ManagedPolicyArns").is_none(), "{role}");
        assert_eq!(
            properties["AssumeRolePolicyDocument"]["Statement"],
            json!([{ "Effect": "Allow", "Principal": { "Service": "ec2.amazonaws.com" }, "Action": "sts:AssumeRole" }]),
            "{role}"
        );
    }
    assert_eq!(
        of_type("AWS::IAM::Role").len() + of_type("AWS::IAM::Policy").len(),
        2,
        "two roles and no other policy"
    );

    // The workers' role: the cluster secret, nothing else.
    let [worker_policy] = resources["WorkerRole"]["Properties"]["Policies"]
        .as_array()
        .unwrap()
        .as_slice()
    else {
        panic!("one inline policy on the workers' role")
    };
    let worker_statements = &worker_policy["PolicyDocument"]["Statement"];
    assert_eq!(
        worker_statements,
        &json!([{ "Sid": "ReadTheClusterSecret", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": { "Ref": "ClusterSecret" } }])
    );
    let worker_allows: BTreeSet<String> = worker_statements
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| strings(&s["Action"]))
        .collect();
    for (name, profile) in [
        ("MasterInstanceProfile", "MasterRole"),
        ("WorkerInstanceProfile", "WorkerRole"),
    ] {
        assert_eq!(
            resources[name]["Properties"]["Roles"],
            json!([{ "Ref": profile }])
        );
    }

    // The secrets: generated by Secrets Manager, never written in the template.
    let secrets = of_type("AWS::SecretsManager::Secret");
    assert_eq!(
        secrets.keys().collect::<Vec<_>>(),
        ["AdminToken", "ClusterSecret"]
    );
    for (name, secret) in &secrets {
        let properties = &secret["Properties"];
        assert!(properties.get("SecretString").is_none(), "{name}");
        let generate = &properties["GenerateSecretString"];
        assert_eq!(generate["PasswordLength"], 64, "{name}");
        assert_eq!(generate["ExcludePunctuation"], true, "{name}");
    }

    // The security groups: every rule, inline or standalone, in and out.
    let mut rules = BTreeSet::new();
    for (name, group) in of_type("AWS::EC2::SecurityGroup") {
        let properties = &group["Properties"];
        for r in properties["SecurityGroupIngress"].as_array().unwrap() {
            rules.insert(rule(&name, "in", r));
        }
        for r in properties["SecurityGroupEgress"].as_array().unwrap() {
            rules.insert(rule(&name, "out", r));
        }
    }
    for (ty, direction) in [
        ("AWS::EC2::SecurityGroupIngress", "in"),
        ("AWS::EC2::SecurityGroupEgress", "out"),
    ] {
        for (_, r) in of_type(ty) {
            let properties = &r["Properties"];
            let group = properties["GroupId"]["Fn::GetAtt"][0].as_str().unwrap();
            rules.insert(rule(group, direction, properties));
        }
    }
    let expected: BTreeSet<String> = [
        "MasterSecurityGroup in 8080 ClientCidr",
        "MasterSecurityGroup in 8080 WorkerSecurityGroup",
        "MasterSecurityGroup out 443 0.0.0.0/0",
        "MasterSecurityGroup out 9000 WorkerSecurityGroup",
        "WorkerSecurityGroup in 9000 MasterSecurityGroup",
        "WorkerSecurityGroup out 443 0.0.0.0/0",
        "WorkerSecurityGroup out 8080 MasterSecurityGroup",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(rules, expected, "the security groups' rules");

    // The master: IMDSv2 only, not one of the instances its role may end, and a boot
    // script that starts cocktail-master with the provider's flags and calls only what
    // its role allows.
    let instances = of_type("AWS::EC2::Instance");
    assert_eq!(instances.keys().collect::<Vec<_>>(), ["Master"]);
    let master = &instances["Master"]["Properties"];
    assert_eq!(master["MetadataOptions"]["HttpTokens"], "required");
    let tag = managed_tag();
    assert!(
        master["Tags"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["Key"] != tag.as_str()),
        "the master carries {tag}"
    );
    let script = sub_text(&master["UserData"]["Fn::Base64"]);
    let flags = master_flags(&script);
    let expected: BTreeSet<String> = MASTER_FLAGS.split_whitespace().map(str::to_owned).collect();
    assert!(
        flags.is_superset(&expected),
        "the master's flags {flags:?} lack {:?}",
        expected.difference(&flags).collect::<Vec<_>>()
    );
    assert_eq!(flag(&script, "--provider").as_deref(), Some("ec2"));
    assert_eq!(flag(&script, "--port").as_deref(), Some("8080"));
    assert_eq!(
        flag(&script, "--ec2-secret-id").as_deref(),
        Some("${ClusterSecret}")
    );
    assert_eq!(
        flag(&script, "--ec2-security-groups").as_deref(),
        Some("${WorkerSecurityGroup.GroupId}")
    );
    assert_eq!(
        flag(&script, "--ec2-instance-profile").as_deref(),
        Some("${WorkerInstanceProfile}")
    );
    assert_eq!(
        flag(&script, "--public-url").as_deref(),
        Some("http://$IP:8080")
    );
    assert!(
        script.contains("export COCKTAIL_CLUSTER_SECRET COCKTAIL_ADMIN_TOKEN"),
        "the secrets reach the master in its environment:\n{script}"
    );
    assert!(
        script.contains("secret '${ClusterSecret}'") && script.contains("secret '${AdminToken}'"),
        "the boot script reads both secrets:\n{script}"
    );
    assert!(
        script.contains("X-aws-ec2-metadata-token"),
        "its address through IMDSv2"
    );
    let master_allows: BTreeSet<String> = allowed(&policy_file()).into_keys().collect();
    let calls = cli_calls(&script);
    assert_eq!(
        calls,
        BTreeSet::from(["secretsmanager:GetSecretValue".to_owned()]),
        "the master's boot script's AWS calls"
    );
    assert!(calls.is_subset(&master_allows));

    // What the workers' boot script (the provider's user data) calls, their role allows.
    for (path, source) in provider_sources() {
        let calls = cli_calls(&source);
        assert!(
            calls.is_subset(&worker_allows),
            "{} runs {calls:?}; the workers' role allows {worker_allows:?}",
            path.display()
        );
    }
}

/// A moto server on a free loopback port, stopped when dropped.
struct Moto {
    _child: tokio::process::Child,
    url: String,
}

async fn start_moto(binary: &Path) -> Moto {
    let port = free_port();
    let args = [
        "-H".to_owned(),
        "127.0.0.1".to_owned(),
        "-p".to_owned(),
        port.to_string(),
    ];
    let child = start_server(binary, &args, port).await;
    Moto {
        _child: child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// The physical id of the stack's resource `logical`, if the stack made it.
fn physical<'a>(stack: &'a Value, logical: &str) -> Option<&'a str> {
    stack["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["logical"] == logical)
        .and_then(|r| r["physical"].as_str())
        .filter(|id| !id.is_empty())
}

/// Checks one created stack; `private`: the workers' subnets are the private ones.
fn check_stack(stack: &Value, private: bool) {
    assert_eq!(stack["status"], "CREATE_COMPLETE", "{}", stack["reason"]);
    let id = |logical: &str| {
        physical(stack, logical)
            .unwrap_or_else(|| panic!("the stack made no {logical}: {}", stack["resources"]))
            .to_owned()
    };
    for r in stack["resources"].as_array().unwrap() {
        assert_eq!(r["status"], "CREATE_COMPLETE", "{r}");
    }

    // The network: the VPC, two public subnets in two zones behind the internet gateway,
    // and with private workers two private subnets behind one NAT gateway.
    let vpc = id("Vpc");
    assert_eq!(stack["vpcs"], json!([vpc]));
    let subnets: BTreeMap<String, (String, String)> = stack["subnets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_owned(),
                (
                    s["cidr"].as_str().unwrap().to_owned(),
                    s["zone"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    let (public_a, public_b) = (id("PublicSubnetA"), id("PublicSubnetB"));
    assert_eq!(subnets[&public_a].0, "10.42.0.0/20");
    assert_eq!(subnets[&public_b].0, "10.42.16.0/20");
    assert_ne!(subnets[&public_a].1, subnets[&public_b].1, "two zones");
    assert_eq!(subnets.len(), if private { 4 } else { 2 }, "{subnets:?}");
    let igw = id("InternetGateway");
    assert_eq!(stack["internet_gateways"], json!([igw]));
    let route_to = |table: &str| -> Value {
        let table = stack["route_tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == table)
            .unwrap_or_else(|| panic!("no route table {table}"));
        table["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["destination"] == "0.0.0.0/0")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let public_table = id("PublicRouteTable");
    assert_eq!(route_to(&public_table)["gateway"], igw.as_str());
    for association in ["PublicSubnetARoutes", "PublicSubnetBRoutes"] {
        assert_eq!(id(association), public_table, "{association}");
    }
    let workers_subnets = if private {
        let nat = id("NatGateway");
        let [gateway] = stack["nat_gateways"].as_array().unwrap().as_slice() else {
            panic!("one NAT gateway: {}", stack["nat_gateways"])
        };
        assert_eq!(
            (&gateway["id"], &gateway["subnet"]),
            (&json!(nat), &json!(public_a))
        );
        let private_table = id("PrivateRouteTable");
        assert_eq!(route_to(&private_table)["nat_gateway"], nat.as_str());
        for association in ["PrivateSubnetARoutes", "PrivateSubnetBRoutes"] {
            assert_eq!(id(association), private_table, "{association}");
        }
        let (a, b) = (id("PrivateSubnetA"), id("PrivateSubnetB"));
        assert_eq!(subnets[&a].0, "10.42.32.0/20");
        assert_eq!(subnets[&b].0, "10.42.48.0/20");
        format!("{a},{b}")
    } else {
        assert_eq!(stack["nat_gateways"], json!([]));
        format!("{public_a},{public_b}")
    };
    assert_eq!(
        stack["outputs"]["WorkerSubnetIds"],
        workers_subnets.as_str()
    );

    // The security groups' inbound rules (moto keeps no outbound ones).
    let (master_sg, worker_sg) = (id("MasterSecurityGroup"), id("WorkerSecurityGroup"));
    let groups: BTreeMap<String, Value> = stack["security_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["id"].as_str().unwrap().to_owned(), g["ingress"].clone()))
        .collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
    let sorted = |v: &Value| {
        let mut items: Vec<String> = v.as_array().unwrap().iter().map(Value::to_string).collect();
        items.sort();
        items
    };
    assert_eq!(
        sorted(&groups[&master_sg]),
        sorted(&json!([
            { "protocol": "tcp", "from": 8080, "to": 8080, "cidr": CLIENT_CIDR },
            { "protocol": "tcp", "from": 8080, "to": 8080, "group": worker_sg },
        ])),
        "the master's inbound rules"
    );
    assert_eq!(
        sorted(&groups[&worker_sg]),
        sorted(&json!([{ "protocol": "tcp", "from": 9000, "to": 9000, "group": master_sg }])),
        "the workers' inbound rules"
    );
    assert_eq!(
        stack["outputs"]["WorkerSecurityGroupId"],
        worker_sg.as_str()
    );

    // The roles with their policies as created, and their instance profiles.
    let roles: BTreeMap<String, Value> = stack["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_owned(), r.clone()))
        .collect();
    assert_eq!(roles.len(), 2);
    let (master_role, worker_role) = (&roles[&id("MasterRole")], &roles[&id("WorkerRole")]);
    let worker_role_arn = worker_role["arn"].as_str().unwrap();
    // master-policy.json with what the stack resolved; the secrets' ARNs where the stack
    // made them (moto 5.2 does not, and leaves their ${...} as written).
    let mut expected = serde_json::to_string(&policy_file()).unwrap();
    let mut values = vec![
        ("${AWS::Partition}", "aws".to_owned()),
        ("${AWS::Region}", REGION.to_owned()),
        ("${AWS::AccountId}", ACCOUNT.to_owned()),
        ("${ImageId}", IMAGE.to_owned()),
        ("${Vpc}", vpc.clone()),
        ("${WorkerRole.Arn}", worker_role_arn.to_owned()),
    ];
    for (secret, placeholder) in [
        ("ClusterSecret", "${ClusterSecret}"),
        ("AdminToken", "${AdminToken}"),
    ] {
        if let Some(arn) = physical(stack, secret) {
            values.push((placeholder, arn.to_owned()));
        }
    }
    for (placeholder, value) in values {
        expected = expected.replace(placeholder, &value);
    }
    let expected: Value = serde_json::from_str(&expected).unwrap();
    let policies = master_role["policies"].as_object().unwrap();
    assert_eq!(
        policies.keys().collect::<Vec<_>>(),
        ["cocktail-master"],
        "the master's role's policies"
    );
    assert_same_policy(
        &policies["cocktail-master"],
        &expected,
        "the master's role as created",
    );
    let worker_statements = &worker_role["policies"]["cocktail-worker"]["Statement"];
    let [statement] = worker_statements.as_array().unwrap().as_slice() else {
        panic!("one statement for the workers: {worker_statements}")
    };
    assert_eq!(statement["Action"], "secretsmanager:GetSecretValue");
    let profiles: BTreeMap<String, Value> = stack["instance_profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p.clone()))
        .collect();
    let master_profile = &profiles[&id("MasterInstanceProfile")];
    let worker_profile_name = id("WorkerInstanceProfile");
    assert_eq!(master_profile["roles"], json!([id("MasterRole")]));
    assert_eq!(
        profiles[&worker_profile_name]["roles"],
        json!([id("WorkerRole")])
    );

    // The master's instance, and its boot script with the stack's values.
    let [master] = stack["instances"].as_array().unwrap().as_slice() else {
        panic!("one instance: {}", stack["instances"])
    };
    assert_eq!(master["id"], id("Master").as_str());
    assert_eq!(stack["outputs"]["MasterInstanceId"], id("Master").as_str());
    assert_eq!(master["type"], "c5a.xlarge");
    assert_eq!(master["image"], IMAGE);
    assert_eq!(master["state"], "running");
    assert_eq!(master["subnet"], public_a.as_str());
    assert_eq!(master["instance_profile"], master_profile["arn"]);
    assert!(
        master["tags"].get(managed_tag()).is_none(),
        "{}",
        master["tags"]
    );
    let script = master["user_data"].as_str().unwrap();
    let expect_flag = |name: &str, value: &str| {
        assert_eq!(
            flag(script, name).as_deref(),
            Some(value),
            "{name} in\n{script}"
        );
    };
    expect_flag("--provider", "ec2");
    expect_flag("--ec2-region", REGION);
    expect_flag("--ec2-image-id", IMAGE);
    expect_flag("--ec2-subnets", &workers_subnets);
    expect_flag("--ec2-security-groups", &worker_sg);
    expect_flag("--ec2-instance-profile", &worker_profile_name);
    expect_flag("--worker-networks", "10.42.0.0/16");
    expect_flag("--public-url", "http://$IP:8080");
    if private {
        expect_flag("--min-instances", "2");
        expect_flag("--models", "linear,boe_tiny");
        expect_flag("--instance-types", "c5a.xlarge,r5n.large");
    } else {
        expect_flag("--min-instances", "1");
        assert!(flag(script, "--models").is_none() && flag(script, "--instance-types").is_none());
    }
    if let Some(secret) = physical(stack, "ClusterSecret") {
        expect_flag("--ec2-secret-id", secret);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_creates_against_moto_with_public_and_with_private_workers() {
    let Some(binary) = moto_server() else {
        eprintln!(
            "skipped: the moto venv is not installed (scripts/test.sh installs it: setup_moto)"
        );
        return;
    };
    let moto = start_moto(&binary).await;
    let template = workspace_root().join("deploy/aws/cocktail.yaml");
    let template = template.to_str().unwrap();
    let image = format!("ImageId={IMAGE}");
    let client = format!("ClientCidr={CLIENT_CIDR}");
    for (stack, private, extra) in [
        ("cocktail-public", false, vec![]),
        (
            "cocktail-private",
            true,
            vec![
                "WorkerSubnets=private",
                "Models=linear,boe_tiny",
                "MinInstances=2",
                "WorkerInstanceTypes=c5a.xlarge,r5n.large",
            ],
        ),
    ] {
        let mut args = vec![
            "create",
            moto.url.as_str(),
            template,
            stack,
            image.as_str(),
            client.as_str(),
        ];
        args.extend(extra);
        let created = helper(&binary, &args).await;
        let counts = created["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["logical"] != "")
            .fold(BTreeMap::<String, usize>::new(), |mut m, r| {
                *m.entry(r["type"].as_str().unwrap().to_owned()).or_default() += 1;
                m
            });
        eprintln!("{stack}: {counts:?}");
        check_stack(&created, private);
    }
}
