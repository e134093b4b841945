"""The Python half of tests/tests/deploy_aws.rs, run with the moto venv's Python (boto3 and
PyYAML come with `moto[server]`). It prints JSON for the Rust test to check.

    deploy_aws.py template TEMPLATE
        the CloudFormation template as JSON, short-form functions (`!Sub x`) in their long
        form ({"Fn::Sub": "x"}), as CloudFormation reads them

    deploy_aws.py create ENDPOINT TEMPLATE STACK [KEY=VALUE...]
        creates the stack STACK from TEMPLATE with these parameters at ENDPOINT (a moto
        server on loopback), waits for CREATE_COMPLETE (or a failure), and prints what the
        stack made: its resources, the VPC's subnets, routes and gateways, the security
        groups and their rules, the roles with their policies, the instance profiles, the
        instances with their decoded user data, and the secrets

Only ENDPOINT is ever contacted.
"""

import ast
import base64
import json
import os
import sys
import time

import yaml


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form functions."""


def _function(loader, suffix, node):
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: _function(loader, suffix, node))


def load_template(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=CfnLoader)


def policy_document(document):
    """moto returns inline role policies as JSON, or as the repr of a dict."""
    if isinstance(document, dict):
        return document
    try:
        return json.loads(document)
    except ValueError:
        return ast.literal_eval(document)


def create(endpoint, template_path, stack, parameters):
    import boto3

    # Never the instance metadata service or a profile: only the moto server.
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    os.environ.pop("AWS_PROFILE", None)
    session = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )

    def client(service):
        return session.client(service, endpoint_url=endpoint)

    cloudformation = client("cloudformation")
    with open(template_path, encoding="utf-8") as f:
        body = f.read()
    cloudformation.create_stack(
        StackName=stack,
        TemplateBody=body,
        Parameters=[
            {"ParameterKey": k, "ParameterValue": v}
            for k, v in (p.split("=", 1) for p in parameters)
        ],
        Capabilities=["CAPABILITY_IAM"],
    )
    deadline = time.time() + 120
    while True:
        described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
        if not described["StackStatus"].endswith("_IN_PROGRESS") or time.time() > deadline:
            break
        time.sleep(0.5)
    resources = [
        {
            "logical": r["LogicalResourceId"],
            "type": r["ResourceType"],
            "physical": r.get("PhysicalResourceId", ""),
            "status": r["ResourceStatus"],
        }
        for r in cloudformation.list_stack_resources(StackName=stack)["StackResourceSummaries"]
    ]
    physical = {r["physical"] for r in resources if r["physical"]}
    of_type = lambda t: [r["physical"] for r in resources if r["type"] == t and r["physical"]]

    ec2 = client("ec2")
    vpcs = of_type("AWS::EC2::VPC")
    subnets = [
        {
            "id": s["SubnetId"],
            "cidr": s["CidrBlock"],
            "zone": s["AvailabilityZone"],
            "vpc": s["VpcId"],
            "public_ip_on_launch": s.get("MapPublicIpOnLaunch", False),
        }
        for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": vpcs}])["Subnets"]
    ] if vpcs else []
    route_tables = [
        {
            "id": t["RouteTableId"],
            "routes": [
                {
                    "destination": r.get("DestinationCidrBlock"),
                    "gateway": r.get("GatewayId"),
                    "nat_gateway": r.get("NatGatewayId"),
                }
                for r in t["Routes"]
            ],
            "subnets": [a["SubnetId"] for a in t["Associations"] if "SubnetId" in a],
        }
        for t in ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": vpcs}])[
            "RouteTables"
        ]
    ] if vpcs else []
    nat_gateways = [
        {"id": n["NatGatewayId"], "subnet": n["SubnetId"], "state": n["State"]}
        for n in ec2.describe_nat_gateways()["NatGateways"]
        if n["VpcId"] in vpcs
    ]
    groups = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": vpcs}])[
        "SecurityGroups"
    ] if vpcs else []

    def rules(permissions):
        out = []
        for p in permissions:
            base = {
                "protocol": p["IpProtocol"],
                "from": p.get("FromPort"),
                "to": p.get("ToPort"),
            }
            out += [dict(base, cidr=r["CidrIp"]) for r in p.get("IpRanges", [])]
            out += [dict(base, group=g["GroupId"]) for g in p.get("UserIdGroupPairs", [])]
        return out

    security_groups = [
        {
            "id": g["GroupId"],
            "name": g["GroupName"],
            "ingress": rules(g["IpPermissions"]),
            "egress": rules(g["IpPermissionsEgress"]),
        }
        for g in groups
        if g["GroupId"] in physical
    ]

    iam = client("iam")
    roles = []
    for name in of_type("AWS::IAM::Role"):
        role = iam.get_role(RoleName=name)["Role"]
        roles.append(
            {
                "name": name,
                "arn": role["Arn"],
                "assume": policy_document(role["AssumeRolePolicyDocument"]),
                "policies": {
                    p: policy_document(
                        iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"]
                    )
                    for p in iam.list_role_policies(RoleName=name)["PolicyNames"]
                },
            }
        )
    instance_profiles = []
    for name in of_type("AWS::IAM::InstanceProfile"):
        profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        instance_profiles.append(
            {
                "name": name,
                "arn": profile["Arn"],
                "roles": [r["RoleName"] for r in profile["Roles"]],
            }
        )

    instances = []
    ids = of_type("AWS::EC2::Instance")
    for reservation in ec2.describe_instances(InstanceIds=ids)["Reservations"] if ids else []:
        for i in reservation["Instances"]:
            data = ec2.describe_instance_attribute(InstanceId=i["InstanceId"], Attribute="userData")
            encoded = data.get("UserData", {}).get("Value", "")
            instances.append(
                {
                    "id": i["InstanceId"],
                    "type": i["InstanceType"],
                    "image": i["ImageId"],
                    "state": i["State"]["Name"],
                    "subnet": i.get("SubnetId"),
                    "security_groups": [g["GroupId"] for g in i.get("SecurityGroups", [])],
                    "instance_profile": i.get("IamInstanceProfile", {}).get("Arn"),
                    "tags": {t["Key"]: t["Value"] for t in i.get("Tags", [])},
                    "metadata_options": i.get("MetadataOptions", {}),
                    "user_data": base64.b64decode(encoded).decode() if encoded else "",
                }
            )

    secrets = [
        {"arn": s["ARN"], "name": s["Name"]}
        for s in client("secretsmanager").list_secrets()["SecretList"]
    ]

    return {
        "status": described["StackStatus"],
        "reason": described.get("StackStatusReason", ""),
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])},
        "resources": resources,
        "vpcs": vpcs,
        "subnets": subnets,
        "route_tables": route_tables,
        "internet_gateways": of_type("AWS::EC2::InternetGateway"),
        "nat_gateways": nat_gateways,
        "security_groups": security_groups,
        "roles": roles,
        "instance_profiles": instance_profiles,
        "instances": instances,
        "secrets": secrets,
    }


def main(argv):
    if len(argv) == 3 and argv[1] == "template":
        print(json.dumps(load_template(argv[2]), default=str))
    elif len(argv) >= 5 and argv[1] == "create":
        print(json.dumps(create(argv[2], argv[3], argv[4], argv[5:]), default=str))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
