"""Every AWS call the kit's tools (ops/) and the orchestrator (orchestrator/) make, and the tests that run it
against moto. tests/test_aws_calls_on_moto.py fails on a call found in the code without a row here, on a
row naming a test that does not exist, and on a "moto lacks it" row that moto now answers; tests/conftest.py
fails a named test that does not make its call against moto.

A call is "service:operation" as boto3 spells it: botocore's service name (`session.client("elbv2")`) and
the client's method name (`describe_target_health`; `get_paginator("list_services")` is `list_services`).
A test is its pytest node id; it must make the call itself (its body or its function-scoped fixtures), as
moto answers it (an AWS error counts; a refusal by moto's IAM enforcement does not)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RELEASE = (
    "tests/ops/test_release_capacity.py::test_release_scales_services_and_hosts_to_zero_and_lifts_protection"
)
WAVES = "tests/ops/test_deploy_waves.py::test_an_alarm_in_the_first_region_stops_the_wave_before_the_second"
HANDLER = (
    "tests/orchestrator/routing/test_handler.py::test_records_point_at_each_region_with_its_health_check"
)
PIN = "tests/ops/test_traffic.py::test_pin_writes_what_the_orchestrator_reads_and_clear_removes_it"
LOCK = "tests/orchestrator/routing/test_run_lock.py::test_a_late_release_does_not_free_another_runs_lease"
DAY_ZERO = "tests/ops/preflight/test_day_zero.py::test_elastic_ips_held_by_others_leave_too_few_for_the_cells"
PREFLIGHT = "tests/ops/preflight/test_aws_on_moto.py::"
TARGETS = "tests/ops/test_deploy_waves.py::test_a_cells_target_groups_are_read_from_its_own_load_balancer"
NETWORK = PREFLIGHT + "test_nat_gateways_are_counted_in_the_zone_of_their_subnet_leaving_the_projects_own_out"

ON_MOTO: dict[str, tuple[str, ...]] = {
    "application-autoscaling:describe_scalable_targets": (RELEASE,),
    "application-autoscaling:register_scalable_target": (RELEASE,),
    "autoscaling:describe_auto_scaling_groups": (RELEASE,),
    "autoscaling:set_instance_protection": (RELEASE,),
    "autoscaling:update_auto_scaling_group": (RELEASE,),
    "cloudformation:describe_stacks": (
        "tests/ops/test_deploy_waves.py::test_the_status_is_read_from_cloudformation",
    ),
    # The region's stack missing (moto's ValidationError): moto's CloudFormation cannot create the regional
    # template, so where the resources are found the stack is a stand-in (tests/ops/test_compile.py).
    "cloudformation:list_stack_resources": (
        "tests/ops/test_compile.py::test_without_the_regions_stack_it_asks_for_approval_to_bootstrap_it",
    ),
    "cloudwatch:describe_alarms": (
        WAVES,
        HANDLER,
        "tests/ops/test_stack_state_on_moto.py::test_stack_alarms_are_those_named_after_the_stack_on_every_page",
    ),
    "cloudwatch:get_metric_data": (HANDLER,),
    "dynamodb:delete_item": (LOCK,),
    "dynamodb:put_item": (LOCK,),
    "ec2:describe_account_attributes": (DAY_ZERO,),
    "ec2:describe_addresses": (DAY_ZERO, NETWORK),
    "ec2:describe_instance_type_offerings": (
        "tests/ops/preflight/test_aws.py::test_zone_offerings_by_availability_zone",
    ),
    "ec2:describe_internet_gateways": (DAY_ZERO, NETWORK),
    "ec2:describe_instances": (
        "tests/ops/preflight/test_ami_roll.py::test_fleet_groups_read_each_hosts_ami_and_the_launch_template_versions",
        "tests/ops/test_host_roll.py::test_hosts_already_on_the_templates_ami_start_no_refresh",
    ),
    "ec2:describe_nat_gateways": (DAY_ZERO, NETWORK),
    "ec2:describe_subnets": (NETWORK,),
    "ec2:describe_launch_template_versions": (
        "tests/ops/test_host_roll.py::test_a_fleet_with_no_host_yet_is_frozen_on_its_launch_templates_ami",
    ),
    "ec2:describe_vpcs": (DAY_ZERO, NETWORK),
    "ecs:describe_clusters": (RELEASE,),
    "ecs:describe_services": (RELEASE, WAVES),
    "ecs:list_clusters": (RELEASE,),
    "ecs:list_services": (RELEASE, WAVES),
    "ecs:run_task": (
        "tests/ops/test_compile.py::test_the_compile_task_starts_in_the_services_subnets_and_security_group",
        "tests/ops/test_compile.py::test_make_compile_starts_one_task_for_the_one_missing_key",
    ),
    "ecs:update_service": (RELEASE,),
    "elbv2:describe_account_limits": ("tests/ops/preflight/test_aws.py::test_elb_limits_against_moto",),
    "elbv2:describe_load_balancers": (TARGETS,),
    "elbv2:describe_tags": (TARGETS,),
    "elbv2:describe_target_groups": (TARGETS,),
    "elbv2:describe_target_health": (TARGETS,),
    "route53:change_resource_record_sets": (HANDLER,),
    "route53:list_resource_record_sets": (HANDLER, PIN),
    "s3:head_object": ("tests/ops/test_compile.py::test_dry_run_lists_every_key_and_what_exists",),
    "service-quotas:get_service_quota": (PREFLIGHT + "test_a_quota_never_raised_reads_as_the_default_given",),
    "service-quotas:list_aws_default_service_quotas": (
        PREFLIGHT + "test_quotas_by_name_read_the_defaults_where_none_is_applied",
    ),
    "ssm:get_parameter": (
        PIN,
        "tests/orchestrator/routing/test_config_source.py::test_read_once_per_cold_start",
        PREFLIGHT + "test_parameter_exists_against_moto",
    ),
    "ssm:get_parameters": (HANDLER,),
    "ssm:put_parameter": (PIN, HANDLER),
}


@dataclass(frozen=True)
class MotoLacks:
    """A call moto cannot answer as AWS does, run in its tests against botocore's Stubber (or a stand-in)
    instead. `probe` makes the call under mock_aws; while moto still lacks it, the probe raises an error whose
    text holds `answer`. Once moto answers, the guard fails: write the moto test, move the row to ON_MOTO."""

    reason: str
    tests: tuple[str, ...]
    probe: Callable[[], Any]
    answer: str


def _client(service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1")


def not_implemented(reason: str, tests: tuple[str, ...], call: str, **params: Any) -> MotoLacks:
    """A row for a call moto does not implement at all (it raises NotImplementedError): the probe makes the
    call with `params`."""
    service, operation = call.split(":")
    return MotoLacks(
        reason=reason,
        tests=tests,
        probe=lambda: getattr(_client(service), operation)(**params),
        answer="has not been implemented",
    )


HOST_ROLL = "tests/ops/test_host_roll.py::"
PREFLIGHT_STUBBED = "tests/ops/preflight/test_aws.py::"
STUBBED: dict[str, MotoLacks] = {
    # An instance refresh rolls a cell's hosts onto a new AMI (ops/host_roll.py); the tests answer these three
    # with a Stubber beside moto's other answers.
    "autoscaling:cancel_instance_refresh": not_implemented(
        "moto 5.2.5 does not implement CancelInstanceRefresh",
        (HOST_ROLL + "test_a_canary_that_trips_an_alarm_cancels_the_refresh_and_stops_the_wave",),
        "autoscaling:cancel_instance_refresh",
        AutoScalingGroupName="kit-group",
    ),
    "autoscaling:describe_instance_refreshes": not_implemented(
        "moto 5.2.5 does not implement DescribeInstanceRefreshes",
        (HOST_ROLL + "test_a_refresh_that_succeeds_lets_the_wave_go_on",),
        "autoscaling:describe_instance_refreshes",
        AutoScalingGroupName="kit-group",
    ),
    "autoscaling:start_instance_refresh": not_implemented(
        "moto 5.2.5 does not implement StartInstanceRefresh",
        (HOST_ROLL + "test_a_refresh_that_succeeds_lets_the_wave_go_on",),
        "autoscaling:start_instance_refresh",
        AutoScalingGroupName="kit-group",
    ),
    "ec2:describe_capacity_reservations": not_implemented(
        "moto 5.2.5 does not implement DescribeCapacityReservations",
        (PREFLIGHT_STUBBED + "test_capacity_reservations_one_call_per_id_and_none_for_an_unknown_id",),
        "ec2:describe_capacity_reservations",
        CapacityReservationIds=["cr-0123456789abcdef0"],
    ),
    "lambda:get_account_settings": MotoLacks(
        reason="moto 5.2.5 has no route for Lambda's GetAccountSettings (it answers 'Not yet implemented')",
        tests=(
            "tests/ops/preflight/test_main.py::test_a_config_that_fits_prints_a_table_per_region_and_exits_zero",
        ),
        probe=lambda: _client("lambda").get_account_settings(),
        answer="Not yet implemented",
    ),
    "service-quotas:get_aws_default_service_quota": not_implemented(
        "moto 5.2.5 does not implement GetAWSDefaultServiceQuota",
        (PREFLIGHT_STUBBED + "test_quota_values_fall_back_to_the_aws_default_where_none_is_applied",),
        "service-quotas:get_aws_default_service_quota",
        ServiceCode="ec2",
        QuotaCode="L-1945791B",
    ),
    "service-quotas:list_service_quotas": not_implemented(
        "moto 5.2.5 does not implement ListServiceQuotas",
        (PREFLIGHT_STUBBED + "test_ecs_quotas_by_name_fall_back_to_the_aws_default_where_none_is_applied",),
        "service-quotas:list_service_quotas",
        ServiceCode="vpc",
    ),
}


@functools.cache
def claims_by_test() -> dict[str, list[str]]:
    """Test node id -> the calls ("service:operation") this table says it runs against moto."""
    claims: dict[str, list[str]] = {}
    for call, tests in ON_MOTO.items():
        for test in tests:
            claims.setdefault(test, []).append(call)
    return claims
