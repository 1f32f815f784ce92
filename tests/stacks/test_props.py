"""Settings -> construct props: every derived value, without synthesizing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from hypothesis import given
from hypothesis import settings as settings_profile
from hypothesis import strategies as st

from cdk_constructs.fleet import ScheduledBounds
from cdk_constructs.load_balancer import CertificateFromArn, CertificateFromDns
from settings import Settings, load_settings
from stacks import props

DEFAULT_DATA = yaml.safe_load((props.CONTAINER_DIRECTORY.parent / "config" / "default.yaml").read_text())

ARN = "arn:aws:acm:us-west-2:111111111111:certificate/abc-123"


@pytest.fixture
def overlay(tmp_path):
    def write(text: str):
        path = tmp_path / "overlay.yaml"
        path.write_text(f"base: {props.CONTAINER_DIRECTORY.parent / 'config' / 'default.yaml'}\n{text}")
        return load_settings(path)

    return write


def test_stream_timeouts_equal_the_longest_stream(settings):
    lb = props.load_balancer_props(settings, "us-east-1")
    assert lb.idle_timeout_seconds == lb.deregistration_delay_seconds == settings.longest_stream_seconds
    assert settings.longest_stream_seconds == 30 + 1024 // 5 + 1


def test_ready_path_names_the_configured_model(settings):
    assert props.load_balancer_props(settings, "us-east-1").ready_path == "/v2/models/assistant/ready"


def test_certificate_is_created_unless_the_region_names_one(overlay):
    settings = overlay(f"regions:\n  us-west-2:\n    certificate_arn: {ARN}\n")
    assert props.load_balancer_props(settings, "us-west-2").certificate == CertificateFromArn(ARN)
    assert isinstance(props.load_balancer_props(settings, "us-east-1").certificate, CertificateFromDns)


def test_image_comes_from_config_per_family_else_from_the_container_folder(overlay):
    settings = overlay("container:\n  image_uris:\n    trn1: registry.example.com/serving:trn1\n")
    inf2, trn1 = settings.regions["us-east-1"].fleets
    assert props.image_source(settings, "us-east-1", trn1).image_uri == "registry.example.com/serving:trn1"
    asset = props.image_source(settings, "us-east-1", inf2)
    assert asset.image_uri is None and asset.asset_directory.endswith("container")
    assert "**/__pycache__" in asset.asset_exclude


def test_fleet_props_carry_the_config(settings, overlay):
    fleet = settings.regions["us-east-1"].fleets[1]
    built = props.fleet_props(settings, "us-east-1", fleet)
    assert (built.instance.name, built.tensor_parallel, built.min_hosts, built.max_hosts) == (
        "trn1.32xlarge",
        8,
        2,
        14,
    )
    assert built.health_check_grace_seconds >= built.cold_start_budget_seconds
    # Boot and ECS registration, far below the cold start: managed scaling's warm-up holds scale-out.
    assert (built.instance_warmup_seconds, built.cold_start_budget_seconds) == (300, 1800)
    assert built.shared_memory_mib == 4096
    environment = dict(built.environment)
    assert environment["ENGINE_MAX_NUM_SEQS"] == "32"
    assert environment["ASSISTANT_MAX_TOKENS_LIMIT"] == "1024"
    assert built.target_requests_in_flight == 64.0  # 4 engine replicas x 32 sequences x 0.5
    assert built.offered_in_region
    elsewhere = overlay(
        "regions:\n  eu-west-1:\n    weight: 1\n    fleets:\n"
        "      - {instance_type: trn1.32xlarge, tensor_parallel: 8, min: 0, max: 2}\n"
    )
    no_trn1 = elsewhere.regions["eu-west-1"].fleets[0]
    assert not props.fleet_props(elsewhere, "eu-west-1", no_trn1).offered_in_region  # no Trn1 there
    assert fleet.engine_replicas == 4 and fleet.serving_slots(32) == 128


def test_zones_and_nat_gateways_follow_the_seeded_zones(overlay):
    settings = overlay("regions:\n  us-east-2:\n    availability_zones: [us-east-2a, us-east-2b]\n")
    assert props.network_props(settings, "us-east-2").zones == 2
    assert props.network_props(settings, "us-east-2").nat_gateways == 2
    assert props.network_props(settings, "us-east-1").cidr == "10.0.0.0/16"
    assert props.network_props(settings, "us-east-1").nat_gateways == 3  # default zones us-east-1b/c/f


def test_nat_gateways_and_endpoints_come_from_the_region(overlay):
    settings = overlay(
        "regions:\n  us-east-1:\n    nat_gateways: 0\n  us-west-2:\n    nat_gateways: 1\n"
        "    interface_endpoints: false\n"
    )
    no_nat = props.network_props(settings, "us-east-1")
    assert (no_nat.nat_gateways, no_nat.interface_endpoints, no_nat.operator_access) == (0, True, False)
    one_nat = props.network_props(settings, "us-west-2")
    assert (one_nat.nat_gateways, one_nat.interface_endpoints) == (1, False)


def test_operator_access_is_off_by_default_and_reaches_every_part_when_on(settings, overlay):
    assert props.host_sessions_props(settings, "us-east-1") is None
    assert not props.cluster_props(settings).ecs_exec
    assert not props.network_props(settings, "us-east-1").operator_access
    fleet = props.fleet_props(settings, "us-east-1", settings.regions["us-east-1"].fleets[0])
    assert not fleet.session_manager and not fleet.ecs_exec

    on = overlay("operations:\n  session_manager: true\n  ecs_exec: true\n")
    assert (
        props.host_sessions_props(on, "us-east-1").document_name
        == "shopping-assistant-us-east-1-host-session"
    )
    assert props.cluster_props(on).ecs_exec
    assert props.network_props(on, "us-east-1").operator_access
    fleet = props.fleet_props(on, "us-east-1", on.regions["us-east-1"].fleets[0])
    assert fleet.session_manager and fleet.ecs_exec


def test_waf_and_deletion_protection_follow_the_load_balancer_section(settings, overlay):
    default = props.load_balancer_props(settings, "us-east-2")
    assert default.deletion_protection is True
    assert default.web_acl == props.WebAclProps("shopping-assistant-us-east-2", 1000, 300)
    teardown = overlay("load_balancer:\n  deletion_protection: false\n  waf:\n    enabled: false\n")
    assert props.load_balancer_props(teardown, "us-east-2").deletion_protection is False
    assert props.load_balancer_props(teardown, "us-east-2").web_acl is None
    behind_cdn = overlay("load_balancer:\n  waf:\n    rate_limit_key: forwarded_ip\n")
    acl = props.load_balancer_props(behind_cdn, "us-east-2").web_acl
    assert (acl.rate_limit_key, acl.rate_limit_header, acl.source_ip_backstop_limit) == (
        "forwarded_ip",
        "X-Forwarded-For",
        None,
    )
    keyed = overlay(
        "load_balancer:\n  waf:\n    rate_limit_key: header\n    rate_limit_header: x-shopper-id\n"
        "    source_ip_backstop_limit: 20000\n"
    )
    acl = props.load_balancer_props(keyed, "us-east-2").web_acl
    assert (acl.rate_limit_key, acl.rate_limit_header, acl.source_ip_backstop_limit) == (
        "header",
        "x-shopper-id",
        20000,
    )


def test_fleets_launch_in_the_zones_that_offer_their_type(settings):
    inf2, trn1 = settings.regions["us-east-2"].fleets
    assert props.fleet_props(settings, "us-east-2", trn1).availability_zones == ("us-east-2c",)
    assert props.fleet_props(settings, "us-east-2", inf2).availability_zones == ("us-east-2a", "us-east-2c")


def test_a_region_reads_its_own_artifacts_and_images(overlay):
    settings = overlay(
        "regions:\n  us-west-2:\n    artifacts_s3_uri: s3://replica-us-west-2/llama/\n    image_uris:\n"
        "      trn1: 123456789012.dkr.ecr.us-west-2.amazonaws.com/serving:trn1\n"
    )
    store = props.model_store_props(settings, "us-west-2")
    assert (store.bucket, store.prefix) == ("replica-us-west-2", "llama")
    assert dict(props.engine_environment(settings, "us-west-2"))["MODEL_S3_URI"] == (
        "s3://replica-us-west-2/llama/weights/"
    )
    trn1 = settings.regions["us-west-2"].fleets[1]
    assert props.image_source(settings, "us-west-2", trn1).image_uri.startswith(
        "123456789012.dkr.ecr.us-west-2"
    )
    # Other regions keep the shared copy.
    assert props.model_store_props(settings, "us-east-1").bucket == "shopping-assistant-model-artifacts"
    assert props.image_source(settings, "us-east-1", trn1).image_uri is None


def test_names_are_known_from_config_alone(settings):
    assert props.stack_name(settings, "us-east-2") == "shopping-assistant-us-east-2"
    assert props.degraded_alarm_name(settings, "us-east-2") == "shopping-assistant-us-east-2-region-degraded"
    observability = props.observability_props(settings, "us-east-2")
    assert observability.model_name == "assistant"
    assert observability.metrics_namespace == "LLMServing"


def test_container_reads_weights_and_artifacts_under_the_one_readable_prefix(settings):
    environment = dict(props.engine_environment(settings, "us-east-1"))
    prefix = "s3://shopping-assistant-model-artifacts/llama-8b-instruct/"
    assert environment["MODEL_S3_URI"] == prefix + "weights/"
    assert environment["COMPILED_ARTIFACTS_S3_URI"] == prefix + "compiled/"
    assert environment["ALLOW_COMPILE"] == "false"
    assert environment["SLOW_FIRST_TOKEN_MS"] == str(settings.observability.ttft_p99_threshold_ms)
    # The compiled-artifact key names the model, not the place its files happen to live.
    assert environment["MODEL_ID"] == settings.model.model_id == "llama-3.1-8b-instruct"
    assert (environment["HTTP_PORT"], environment["GRPC_PORT"], environment["METRICS_PORT"]) == (
        "8000",
        "8001",
        "8002",
    )


def test_default_generation_length_never_exceeds_the_limit(overlay):
    settings = overlay("model:\n  max_output_tokens: 100\n")
    environment = dict(props.engine_environment(settings, "us-east-1"))
    assert environment["ASSISTANT_DEFAULT_MAX_TOKENS"] == "100"


EVENT = """\
events:
  - name: prime-day
    start: "2027-07-08T00:00:00-07:00"
    end: "2027-07-10T00:00:00-07:00"
    prewarm_margin_minutes: 30
    regions:
      us-east-1:
        inf2.48xlarge: {min: 12, max: 60}
"""
START = datetime(2027, 7, 8, 7, 0, tzinfo=UTC)
END = datetime(2027, 7, 10, 7, 0, tzinfo=UTC)
LEAD = timedelta(seconds=1800, minutes=30)  # the default cold-start budget plus the margin


def _inf2(settings, region="us-east-1"):
    return next(f for f in settings.regions[region].fleets if f.instance_type == "inf2.48xlarge")


SCALE_IN = timedelta(minutes=120)  # the default scale_in_after_minutes


def test_an_event_raises_the_bounds_ahead_restores_the_minimum_at_its_end_and_the_maximum_later(overlay):
    settings = overlay(EVENT)
    schedule = props.fleet_schedule(settings, "us-east-1", _inf2(settings), now=START - timedelta(days=30))
    assert schedule.event_bounds_at_deploy is None
    assert schedule.changes == (
        ScheduledBounds("prime-day-raise", START - LEAD, 12, 60),
        ScheduledBounds("prime-day-restore", END, 3, 60),
        ScheduledBounds("prime-day-scale-in", END + SCALE_IN, 3, 28),
    )
    later = overlay(EVENT.replace("    prewarm_margin_minutes: 30\n", "    scale_in_after_minutes: 45\n"))
    changes = props.fleet_schedule(later, "us-east-1", _inf2(later), now=START - timedelta(days=1)).changes
    assert changes[-1] == ScheduledBounds("prime-day-scale-in", END + timedelta(minutes=45), 3, 28)


def test_a_deploy_between_the_end_and_the_scale_in_keeps_the_events_maximum_and_schedules_the_scale_in(
    overlay,
):
    settings = overlay(EVENT)
    fleet_props = props.fleet_props(settings, "us-east-1", _inf2(settings), now=END + SCALE_IN / 2)
    assert fleet_props.deployed_bounds == (3, 60)
    assert fleet_props.scheduled_bounds == (ScheduledBounds("prime-day-scale-in", END + SCALE_IN, 3, 28),)


def test_a_deploy_during_the_ramp_keeps_the_event_bounds_and_schedules_only_the_restore(overlay):
    settings = overlay(EVENT)
    fleet_props = props.fleet_props(settings, "us-east-1", _inf2(settings), now=START - LEAD / 2)
    assert fleet_props.deployed_bounds == (12, 60)
    assert [change.name for change in fleet_props.scheduled_bounds] == [
        "prime-day-restore",
        "prime-day-scale-in",
    ]
    # The fleet's own bounds stay what the restore returns to (and what its alarms read).
    assert (fleet_props.min_hosts, fleet_props.max_hosts) == (3, 28)


def test_an_event_whose_maximums_are_down_schedules_nothing(overlay):
    settings = overlay(EVENT)
    schedule = props.fleet_schedule(settings, "us-east-1", _inf2(settings), now=END + SCALE_IN)
    assert (schedule.event_bounds_at_deploy, schedule.changes) == (None, ())


def test_fleets_and_regions_the_event_does_not_name_keep_their_own_bounds(overlay):
    settings = overlay(EVENT)
    for region in settings.regions:
        for fleet in settings.regions[region].fleets:
            if (region, fleet.instance_type) != ("us-east-1", "inf2.48xlarge"):
                fleet_props = props.fleet_props(settings, region, fleet, now=START - timedelta(days=1))
                assert fleet_props.deployed_bounds == (fleet.min, fleet.max)
                assert fleet_props.scheduled_bounds == ()


def _bounds_at(fleet_props, moment):
    bounds = fleet_props.deployed_bounds
    for change in fleet_props.scheduled_bounds:
        if change.at <= moment:
            bounds = (change.min_hosts, change.max_hosts)
    return bounds


@settings_profile(max_examples=30, deadline=None)
@given(
    windows=st.lists(
        st.tuples(st.integers(3, 72), st.integers(1, 96), st.integers(3, 40)), min_size=1, max_size=4
    ),
    now_offset=st.integers(-10, 400),
)
def test_at_every_moment_after_deploy_the_bounds_are_the_event_in_its_window_else_the_fleet(
    windows, now_offset
):
    """Events spaced by more than their lead and scale-in never overlap; whenever `now` falls, the scheduled
    changes applied on top of the deployed bounds give the event's bounds inside [ramp start, end), the
    fleet's minimum under the event's maximum until the scale-in, else the fleet's own; and no change
    lowers a maximum together with a minimum."""
    origin = datetime(2027, 1, 1, tzinfo=UTC)
    events, expected, cursor = [], [], origin
    for index, (gap_hours, hours, hosts) in enumerate(windows):
        start = cursor + timedelta(hours=gap_hours) + LEAD
        end = start + timedelta(hours=hours)
        events.append(
            {
                "name": f"event-{index}",
                "start": start.isoformat(),
                "end": end.isoformat(),
                "regions": {"us-east-1": {"inf2.48xlarge": {"min": hosts, "max": hosts + 10}}},
            }
        )
        expected.append((start - LEAD, end, (hosts, hosts + 10)))
        # The fleet's own floor; the larger ceiling (raising a maximum at the end is never a cut).
        expected.append((end, end + SCALE_IN, (3, max(hosts + 10, 28))))
        cursor = end + SCALE_IN
    settings = Settings.model_validate({**DEFAULT_DATA, "events": events})
    now = origin + timedelta(hours=now_offset)
    schedule = props.fleet_props(settings, "us-east-1", _inf2(settings), now=now)
    changes = schedule.scheduled_bounds
    assert [change.at for change in changes] == sorted(change.at for change in changes)
    assert all(change.at > now for change in changes)
    held = schedule.deployed_bounds
    for change in changes:
        assert not (change.min_hosts < held[0] and change.max_hosts < held[1]), change
        held = (change.min_hosts, change.max_hosts)
    probes = [now] + [
        moment for ramp, end, _ in expected for moment in (ramp, end - timedelta(seconds=1), end)
    ]
    for moment in probes:
        if moment < now:
            continue
        inside = [bounds for ramp, end, bounds in expected if ramp <= moment < end]
        assert _bounds_at(schedule, moment) == (inside[0] if inside else (3, 28)), moment


def test_scaling_target_is_a_share_of_each_fleets_serving_slots(settings):
    inf2, trn1 = settings.regions["us-east-1"].fleets
    share = props.TARGET_BATCH_UTILIZATION
    assert props.target_requests_in_flight(settings, inf2) == round(3 * 32 * share, 2)
    assert props.target_requests_in_flight(settings, trn1) == round(4 * 32 * share, 2)


def test_hosts_surge_above_the_service_maximum_by_the_configured_share(settings, overlay):
    inf2 = settings.regions["us-east-1"].fleets[0]
    built = props.fleet_props(settings, "us-east-1", inf2)
    hosts = built.host_bounds(*built.deployed_bounds)
    assert (built.max_hosts, hosts.max_hosts, hosts.min_hosts) == (28, 35, 3)
    bigger = props.fleet_props(
        overlay("serving:\n  deployment:\n    max_surge_percent: 50\n"), "us-east-1", inf2
    )
    assert bigger.host_bounds(2, 20).max_hosts == 30


def test_ami_is_a_named_release_unless_recommended_is_asked_for(settings, overlay):
    fleet = settings.regions["us-east-1"].fleets[0]
    pinned = props.fleet_props(settings, "us-east-1", fleet).ami_parameter_name
    assert pinned == (
        "/aws/service/ecs/optimized-ami/amazon-linux-2023/neuron/"
        "al2023-ami-ecs-neuron-hvm-2023.0.20261113-kernel-6.1-x86_64/image_id"
    )
    moved = overlay(
        "container:\n  neuron_ami_release: al2023-ami-ecs-neuron-hvm-2023.0.20261201-kernel-6.1-x86_64\n"
    )
    assert "2023.0.20261201" in props.fleet_props(moved, "us-east-1", fleet).ami_parameter_name
    latest = overlay("container:\n  neuron_ami_release: recommended\n")
    assert props.fleet_props(latest, "us-east-1", fleet).ami_parameter_name.endswith(
        "/neuron/recommended/image_id"
    )


def test_the_container_gets_its_catalog_objective_and_replicas_from_config(settings, overlay):
    environment = dict(
        props.fleet_props(settings, "us-east-1", settings.regions["us-east-1"].fleets[0]).environment
    )
    assert (
        environment["CATALOG_INDEX_S3_URI"] == settings.model.artifacts_s3_uri.rstrip("/") + "/catalog-index/"
    )
    assert environment["SLOW_FIRST_TOKEN_MS"] == str(settings.observability.ttft_p99_threshold_ms)
    fleets = {fleet.instance_type: fleet for fleet in settings.regions["us-east-1"].fleets}
    for instance_type, replicas in (("inf2.48xlarge", "3"), ("trn1.32xlarge", "4")):
        fleet_environment = dict(props.fleet_props(settings, "us-east-1", fleets[instance_type]).environment)
        assert fleet_environment["REPLICAS_PER_HOST"] == replicas
    uri = settings.model.artifacts_s3_uri.rstrip("/") + "/shops/acme/index/"
    custom = overlay(f"model:\n  catalog_index_s3_uri: {uri}\n")
    assert dict(props.engine_environment(custom, "us-east-1"))["CATALOG_INDEX_S3_URI"] == uri


def test_the_queue_bound_reaches_the_container_short_by_default(settings, overlay):
    """One request waits per replica beyond its slots unless config says otherwise (the container's own
    default, one more batch, serves nothing within the objective under overload: tests/gameday)."""
    fleet = settings.regions["us-east-1"].fleets[0]
    assert dict(props.fleet_props(settings, "us-east-1", fleet).environment)["MAX_QUEUED_PER_REPLICA"] == "1"
    bounded = overlay("serving:\n  max_queued_per_replica: 0\n")
    environment = dict(
        props.fleet_props(bounded, "us-east-1", bounded.regions["us-east-1"].fleets[0]).environment
    )
    assert environment["MAX_QUEUED_PER_REPLICA"] == "0"
    container = overlay("serving:\n  max_queued_per_replica: null\n")
    fleet = container.regions["us-east-1"].fleets[0]
    assert "MAX_QUEUED_PER_REPLICA" not in dict(props.fleet_props(container, "us-east-1", fleet).environment)


def test_the_queue_wait_budget_reaches_the_container_from_the_objective(settings, overlay):
    """Always set: 80% of the first-token objective unless config names it (the container has no budget of
    its own), and the same figure the game day's twin simulates (Settings.queue_wait_budget_ms)."""

    def budget(of) -> str:
        fleet = of.regions["us-east-1"].fleets[0]
        return dict(props.fleet_props(of, "us-east-1", fleet).environment)["QUEUE_WAIT_BUDGET_MS"]

    assert budget(settings) == "800" and settings.queue_wait_budget_ms == 800
    assert budget(overlay("observability:\n  ttft_p99_threshold_ms: 1500\n")) == "1200"
    assert budget(overlay("serving:\n  queue_wait_budget_ms: 600\n")) == "600"


def test_a_cell_takes_its_share_of_the_fleets_bounds_pool_and_names(overlay):
    cells = overlay(
        "regions:\n  us-east-1:\n    cells: 2\n    fleets:\n"
        "      - {instance_type: inf2.48xlarge, tensor_parallel: 8, min: 3, max: 21,"
        " warm_pool: {min_size: 3, max_prepared: 25}}\n"
    )
    fleet = cells.regions["us-east-1"].fleets[0]
    first = props.fleet_props(cells, "us-east-1", fleet, cell=1)
    second = props.fleet_props(cells, "us-east-1", fleet, cell=2)
    assert (first.min_hosts, first.max_hosts, second.min_hosts, second.max_hosts) == (2, 11, 1, 10)
    assert (first.warm_pool.min_size, first.warm_pool.max_prepared) == (2, 13)
    assert (second.warm_pool.min_size, second.warm_pool.max_prepared) == (1, 12)
    assert second.metrics_namespace == "LLMServing/cell2"
    endpoint = props.routing_endpoint_props(cells, "us-east-1", 2)
    assert endpoint.endpoint_parameter == "/shopping-assistant/us-east-1/cell2/serving-endpoint"
    assert endpoint.label == "us-east-1/2"
    assert (
        props.observability_props(cells, "us-east-1", 2).dashboard_name
        == "shopping-assistant-us-east-1-cell2"
    )
    # The other regions keep one cell and every name they had.
    assert props.routing_endpoint_props(cells, "us-west-2").label == ""


def test_the_catalog_follow_interval_reaches_the_container_and_its_alarm(settings, overlay):
    environment = dict(props.engine_environment(settings, "us-east-1"))
    assert environment["CATALOG_FOLLOW_SECONDS"] == str(settings.model.catalog_follow_seconds) == "60"
    hourly = overlay("model:\n  catalog_follow_seconds: 0\n")
    assert dict(props.engine_environment(hourly, "us-east-1"))["CATALOG_FOLLOW_SECONDS"] == "0"
    assert props.observability_props(hourly, "us-east-1").catalog_follow_seconds == 0


def test_sampling_defaults_reach_the_container_only_when_config_sets_them(settings, overlay):
    assert "ASSISTANT_SAMPLING_DEFAULTS" not in dict(props.engine_environment(settings, "us-east-1"))
    tuned = overlay("model:\n  sampling_defaults:\n    temperature: 0.3\n    top_k: 40\n")
    environment = dict(props.engine_environment(tuned, "us-east-1"))
    assert json.loads(environment["ASSISTANT_SAMPLING_DEFAULTS"]) == {"temperature": 0.3, "top_k": 40}
