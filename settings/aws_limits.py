"""Service limits the config is validated against and the constructs size things by: one place each."""

from dataclasses import dataclass

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


# ---- account quotas a first deploy meets (Service Quotas codes; defaults per region unless said) -------
# Each cell is its own VPC (docs/peak-events.md, "Cells"): one VPC, one internet gateway (the ALB's public
# subnets) and one NAT gateway, with its Elastic IP, per zone that holds a NAT gateway. Amazon VPC quotas
# ("Amazon VPC quotas" in the VPC user guide; codes as the Service Quotas console lists them under services
# `vpc` and `ec2`).
@dataclass(frozen=True)
class AccountQuota:
    """One adjustable account quota: where Service Quotas keeps it and the value a new account starts with."""

    service: str  # Service Quotas service code
    code: str
    name: str
    default: int


ELASTIC_IPS = AccountQuota("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs", 5)
VPCS_PER_REGION = AccountQuota("vpc", "L-F678F1CE", "VPCs per Region", 5)
NAT_GATEWAYS_PER_ZONE = AccountQuota("vpc", "L-FE5A380F", "NAT gateways per Availability Zone", 5)
INTERNET_GATEWAYS_PER_REGION = AccountQuota("vpc", "L-A4707A72", "Internet gateways per Region", 5)
# Lambda: concurrent executions per region (new accounts have been seen with 10 or 50). A function may
# reserve concurrency only while at least UNRESERVED_CONCURRENCY_MIN stays unreserved for all the others
# (Lambda developer guide, "Configuring reserved concurrency").
LAMBDA_CONCURRENCY = AccountQuota("lambda", "L-B99A9384", "Concurrent executions", 1000)
UNRESERVED_CONCURRENCY_MIN = 100
# Lambda: all of a function's environment variables together, keys and values, 4 KB (not adjustable).
LAMBDA_ENVIRONMENT_BYTES = 4096
# SSM Parameter Store: a standard parameter's value holds 4 KB, an advanced one's 8 KB (priced per
# parameter-month), so a larger value is refused at synth.
SSM_STANDARD_VALUE_BYTES = 4096
SSM_ADVANCED_VALUE_BYTES = 8192
ACCOUNT_QUOTAS = (
    ELASTIC_IPS,
    VPCS_PER_REGION,
    NAT_GATEWAYS_PER_ZONE,
    INTERNET_GATEWAYS_PER_REGION,
    LAMBDA_CONCURRENCY,
)
