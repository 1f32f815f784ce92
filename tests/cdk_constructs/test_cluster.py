import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.cluster import ClusterProps, ServingCluster
from cdk_constructs.log_encryption import EncryptedLogs, LogProps


def _template(stack, vpc, ecs_exec):
    logs = EncryptedLogs(stack, "Logs", props=LogProps(retention_days=30))
    ServingCluster(stack, "Cluster", props=ClusterProps(ecs_exec=ecs_exec), vpc=vpc, logs=logs)
    return Template.from_stack(stack)


@pytest.mark.parametrize("ecs_exec", [False, True])
def test_cluster_has_enhanced_container_insights(stack, vpc, ecs_exec):
    _template(stack, vpc, ecs_exec).has_resource_properties(
        "AWS::ECS::Cluster", {"ClusterSettings": [{"Name": "containerInsights", "Value": "enhanced"}]}
    )


def test_exec_sessions_are_encrypted_and_logged_to_an_encrypted_group_when_on(stack, vpc):
    template = _template(stack, vpc, ecs_exec=True)
    key = next(iter(template.find_resources("AWS::KMS::Key")))
    template.has_resource_properties(
        "AWS::ECS::Cluster",
        {
            "Configuration": {
                "ExecuteCommandConfiguration": {
                    "KmsKeyId": {"Fn::GetAtt": [key, "Arn"]},
                    "Logging": "OVERRIDE",
                    "LogConfiguration": {
                        "CloudWatchEncryptionEnabled": True,
                        "CloudWatchLogGroupName": {"Ref": Match.string_like_regexp("ExecLogs")},
                    },
                }
            }
        },
    )
    group = next(v for k, v in template.find_resources("AWS::Logs::LogGroup").items() if "ExecLogs" in k)
    assert "KmsKeyId" in group["Properties"]


def test_no_exec_configuration_or_log_group_when_off(stack, vpc):
    template = _template(stack, vpc, ecs_exec=False)
    cluster = next(iter(template.find_resources("AWS::ECS::Cluster").values()))
    assert "Configuration" not in cluster["Properties"]
    template.resource_count_is("AWS::Logs::LogGroup", 0)
