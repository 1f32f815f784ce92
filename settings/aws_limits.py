"""Service limits the config is validated against and the constructs size things by: one place each."""

# ECS caps a container health check's start period at 300 s and its retries at 10 at an interval of
# at most 300 s: past that no container health check can cover a cold start.
CONTAINER_START_PERIOD_MAX = 300
CONTAINER_HEALTH_RETRIES_MAX = 10
CONTAINER_HEALTH_INTERVAL_MAX = 300
COLD_START_BUDGET_MAX = (
    CONTAINER_START_PERIOD_MAX + CONTAINER_HEALTH_RETRIES_MAX * CONTAINER_HEALTH_INTERVAL_MAX
)
# An ALB deregistration delay is at most 3600 s and its idle timeout at most 4000 s.
DEREGISTRATION_DELAY_MAX = 3600

# EC2 Capacity Blocks for ML: one block holds at most 64 instances, and EC2 ends its instances 30 minutes
# before the block does.
CAPACITY_BLOCK_INSTANCES_MAX = 64
CAPACITY_BLOCK_END_LEAD_MINUTES = 30
# ECS registers at most 5,000 EC2 instances per cluster (ECS developer guide, "Amazon ECS service quotas":
# Container instances per cluster); each region runs one cluster for all its fleets.
ECS_INSTANCES_PER_CLUSTER = 5000
# Elastic Load Balancing defaults, adjustable on request (ALB user guide, "Quotas for your Application Load
# Balancers"): targets per ALB and per target group. Each serving task is a target of the region's HTTP and
# of its gRPC target group, so twice a target of the one ALB.
ALB_TARGETS_PER_LOAD_BALANCER = 1000
ALB_TARGETS_PER_TARGET_GROUP = 1000
ALB_TARGETS_PER_TASK = 2
# ECS managed scaling's instance warm-up is 0 to 10,000 s (ECS API reference, ManagedScaling).
INSTANCE_WARMUP_MAX = 10000
