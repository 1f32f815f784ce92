import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.log_encryption import EncryptedLogs, LogProps
from cdk_constructs.network import NetworkProps, ServingNetwork


@pytest.fixture
def template(stack):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    ServingNetwork(
        stack, "Network", props=NetworkProps(cidr="10.4.0.0/16", zones=3, nat_gateways=3), logs=logs
    )
    return Template.from_stack(stack)


def test_vpc_uses_the_configured_cidr(template):
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.4.0.0/16"})


def test_subnets_span_the_seeded_zones_without_lookups(template):
    zones = {
        subnet["Properties"]["AvailabilityZone"]
        for subnet in template.find_resources("AWS::EC2::Subnet").values()
    }
    assert zones == {"us-east-1a", "us-east-1b", "us-east-1c"}


def test_one_nat_gateway_per_zone(template):
    template.resource_count_is("AWS::EC2::NatGateway", 3)


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
    endpoint = next(iter(template.find_resources("AWS::EC2::VPCEndpoint").values()))["Properties"]
    assert endpoint["VpcEndpointType"] == "Gateway"
    assert "s3" in str(endpoint["ServiceName"])
    private_tables = {
        key for key, table in template.find_resources("AWS::EC2::RouteTable").items() if "hosts" in key
    }
    assert {ref["Ref"] for ref in endpoint["RouteTableIds"]} == private_tables
