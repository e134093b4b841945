//! `master-policy.json` against the EC2 calls of the provider's source.

use super::*;

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
