//! The stack created against moto's CloudFormation.

use super::*;

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
            { "protocol": "tcp", "from": 8443, "to": 8443, "group": worker_sg },
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
    expect_flag("--cluster-port", "8443");
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
    let Some(binary) =
        cocktail_tests::required(moto_server(), "the moto EC2 emulator", MOTO_INSTALL)
    else {
        return;
    };
    let moto = Moto::start_at(&binary).await;
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
