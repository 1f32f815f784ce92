import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.network import OPERATOR_ENDPOINTS, SERVING_ENDPOINTS, NetworkProps, ServingNetwork

CIDR = "10.4.0.0/16"


def _build(stack, **overrides):
    values = dict(cidr=CIDR, zones=3, nat_gateways=3)
    values.update(overrides)
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    ServingNetwork(stack, "Network", props=NetworkProps(**values), logs=logs)
    return Template.from_stack(stack)


@pytest.fixture
def template(stack):
    return _build(stack)


def _endpoint_services(template):
    """Interface endpoints by the service name's last part (ecr.api, ecs-agent, ...)."""
    found = {}
    for endpoint in template.find_resources("AWS::EC2::VPCEndpoint").values():
        properties = endpoint["Properties"]
        if properties.get("VpcEndpointType") == "Interface":
            name = properties["ServiceName"]
            found[name if isinstance(name, str) else str(name)] = properties
    return found


def test_vpc_uses_the_configured_cidr(template):
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": CIDR})


def test_subnets_span_the_seeded_zones_without_lookups(template):
    zones = {
        subnet["Properties"]["AvailabilityZone"]
        for subnet in template.find_resources("AWS::EC2::Subnet").values()
    }
    assert zones == {"us-east-1a", "us-east-1b", "us-east-1c"}


def test_one_nat_gateway_per_zone_by_default(template):
    template.resource_count_is("AWS::EC2::NatGateway", 3)


def test_fewer_nat_gateways_route_every_zone_through_them(stack):
    template = _build(stack, nat_gateways=1)
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    default_routes = template.find_resources(
        "AWS::EC2::Route", {"Properties": {"NatGatewayId": Match.any_value()}}
    )
    assert len(default_routes) == 3  # each hosts subnet still has a way out


def test_without_nat_gateways_the_hosts_subnets_are_isolated(stack):
    template = _build(stack, nat_gateways=0)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::Route", 3)  # the public subnets' internet routes only
    for route in template.find_resources("AWS::EC2::Route").values():
        assert "GatewayId" in route["Properties"]
    subnets = template.find_resources("AWS::EC2::Subnet")
    hosts = [
        s
        for s in subnets.values()
        if {"Key": "aws-cdk:subnet-name", "Value": "hosts"} in s["Properties"]["Tags"]
    ]
    assert len(hosts) == 3
    assert {"Key": "aws-cdk:subnet-type", "Value": "Isolated"} in hosts[0]["Properties"]["Tags"]
    # S3 and the interface endpoints remain the hosts' way to AWS.
    assert len(_endpoint_services(template)) == len(SERVING_ENDPOINTS)
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})


def test_nat_gateway_count_is_bounded_by_the_zones():
    with pytest.raises(ValueError, match=r"0\.\.3"):
        NetworkProps(cidr=CIDR, zones=3, nat_gateways=4)
    with pytest.raises(ValueError, match="need the interface endpoints"):
        NetworkProps(cidr=CIDR, zones=3, nat_gateways=0, interface_endpoints=False)


def test_interface_endpoints_cover_ecr_ecs_logs_sts_and_ssm_with_private_dns(template):
    services = _endpoint_services(template)
    suffixes = sorted(name.rsplit(".", 1)[-1] if "." in name else name for name in services)
    assert len(services) == len(SERVING_ENDPOINTS) == 8
    joined = " ".join(services)
    for service in ("ecr.api", "ecr.dkr", ".ecs", "ecs-agent", "ecs-telemetry", ".logs", ".sts", ".ssm"):
        assert service in joined, (service, suffixes)
    for properties in services.values():
        assert properties["PrivateDnsEnabled"] is True
        assert len(properties["SubnetIds"]) == 3  # one interface per zone, in the hosts' subnets


def test_endpoints_accept_https_from_the_vpc_only(template):
    group = next(
        v
        for v in template.find_resources("AWS::EC2::SecurityGroup").values()
        if "endpoints" in v["Properties"]["GroupDescription"]
    )
    assert [
        (rule["CidrIp"], rule["FromPort"], rule["ToPort"])
        for rule in group["Properties"]["SecurityGroupIngress"]
    ] == [(CIDR, 443, 443)]


def test_session_endpoints_only_with_operator_access(stack, template):
    assert not any("ssmmessages" in name or "kms" in name for name in _endpoint_services(template))


def test_operator_access_adds_the_session_and_kms_endpoints(stack):
    services = " ".join(_endpoint_services(_build(stack, operator_access=True)))
    assert len(services.split()) == len(SERVING_ENDPOINTS) + len(OPERATOR_ENDPOINTS)
    for service in ("ssmmessages", "ec2messages", ".kms"):
        assert service in services


def test_interface_endpoints_can_be_left_to_the_nat_gateways(stack):
    template = _build(stack, interface_endpoints=False)
    assert _endpoint_services(template) == {}
    template.resource_count_is("AWS::EC2::VPCEndpoint", 1)  # S3 stays


def test_rejected_traffic_flows_to_an_encrypted_log_group(template):
    template.has_resource_properties(
        "AWS::EC2::FlowLog", {"LogDestinationType": "cloud-watch-logs", "TrafficType": "REJECT"}
    )
    for group in template.find_resources("AWS::Logs::LogGroup").values():
        assert "KmsKeyId" in group["Properties"]


def test_each_nat_gateway_has_a_port_allocation_alarm(template):
    alarms = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "ErrorPortAllocation"}}
    )
    watched = {alarm["Properties"]["Dimensions"][0]["Value"]["Ref"] for alarm in alarms.values()}
    assert watched == set(template.find_resources("AWS::EC2::NatGateway"))
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"Namespace": "AWS/NATGateway", "Threshold": 0, "Dimensions": Match.any_value()},
    )


def test_s3_traffic_bypasses_the_nat_gateways(template):
    endpoint = next(
        v["Properties"]
        for v in template.find_resources("AWS::EC2::VPCEndpoint").values()
        if v["Properties"]["VpcEndpointType"] == "Gateway"
    )
    assert "s3" in str(endpoint["ServiceName"])
    private_tables = {
        key for key, table in template.find_resources("AWS::EC2::RouteTable").items() if "hosts" in key
    }
    assert {ref["Ref"] for ref in endpoint["RouteTableIds"]} == private_tables
