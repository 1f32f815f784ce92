from aws_cdk.assertions import Template

from cdk_constructs.cluster import ServingCluster


def test_cluster_has_enhanced_container_insights(stack, vpc):
    ServingCluster(stack, "Cluster", vpc=vpc)
    Template.from_stack(stack).has_resource_properties(
        "AWS::ECS::Cluster", {"ClusterSettings": [{"Name": "containerInsights", "Value": "enhanced"}]}
    )
