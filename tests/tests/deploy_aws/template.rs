//! The template as CloudFormation reads it, and cfn-lint.

use super::*;

/// cfn-lint, from `COCKTAIL_CFN_LINT` or `.deps/cfn-lint/`; `None` when not installed.
fn cfn_lint() -> Option<PathBuf> {
    let path = std::env::var_os("COCKTAIL_CFN_LINT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".deps/cfn-lint/bin/cfn-lint"));
    path.is_file().then_some(path)
}

#[tokio::test]
async fn cfn_lint_passes_the_template_without_an_error_or_a_warning() {
    let Some(lint) = cocktail_tests::required(
        cfn_lint(),
        "cfn-lint",
        "scripts/test.sh (setup_cfn_lint: PyPI cfn-lint in .deps/cfn-lint)",
    ) else {
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
    let Some(moto) = cocktail_tests::required(moto_server(), "the moto EC2 emulator", MOTO_INSTALL)
    else {
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
        "MasterSecurityGroup in 8443 WorkerSecurityGroup",
        "MasterSecurityGroup out 443 0.0.0.0/0",
        "MasterSecurityGroup out 9000 WorkerSecurityGroup",
        "WorkerSecurityGroup in 9000 MasterSecurityGroup",
        "WorkerSecurityGroup out 443 0.0.0.0/0",
        "WorkerSecurityGroup out 8443 MasterSecurityGroup",
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
    // The workers reach the master's cluster listener (HTTPS) on the port their security
    // group lets through.
    assert_eq!(flag(&script, "--cluster-port").as_deref(), Some("8443"));
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
