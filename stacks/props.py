"""Settings -> the typed props each construct takes. Pure functions, so every derived value (timeouts,
names, environment) is decided once and testable without synthesizing anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cdk_constructs.cluster import ClusterProps
from cdk_constructs.fleet import (
    CapacityBlockProps,
    CapacityReservationProps,
    FleetProps,
    ImageSource,
    ScheduledBounds,
    ServingPorts,
    WarmPoolProps,
)
from cdk_constructs.fleet_dashboard import FleetDashboardProps, RegionFleets
from cdk_constructs.host_sessions import HostSessionsProps
from cdk_constructs.load_balancer import CertificateFromArn, CertificateFromDns, LoadBalancerProps
from cdk_constructs.log_encryption import LogProps
from cdk_constructs.model_store import ModelStoreProps
from cdk_constructs.network import NetworkProps
from cdk_constructs.observability import ObservabilityProps
from cdk_constructs.routing_endpoint import RoutingEndpointProps
from cdk_constructs.traffic_orchestrator import OrchestratorProps, RegionReads
from cdk_constructs.web_acl import WebAclProps
from orchestrator.routing import config_source
from settings.cells import Cell, split_hosts
from settings.schema import FleetConfig, Settings, s3_bucket, s3_prefix
from stacks import routing_names
from stacks.base_image import pinned_base_image

# Re-exported: the app and the tests name stacks through this module.
from stacks.routing_names import (
    POWERTOOLS_VERSION,
    degraded_alarm_name,
    neuron_ami_parameter,
    policy_params,
    unfit_alarm_name,
)
from stacks.routing_names import stack_name as stack_name

# The orchestrator Lambda's code: a plain folder, staged as it is.
ORCHESTRATOR_DIRECTORY = Path(__file__).resolve().parents[1] / "orchestrator"
# The serving image's build context, found from this file so synth works from any working directory.
CONTAINER_DIRECTORY = Path(__file__).resolve().parents[1] / "container"
# Kept out of the image build context: caches, build output and local-only state that would only change the
# asset hash and slow every synth's staging (container/.dockerignore adds local/).
CONTAINER_ASSET_EXCLUDE = (
    "build",
    "**/.venv*",
    "**/__pycache__",
    "**/*.pyc",
    "**/.pytest_cache",
    "**/.ruff_cache",
    "**/*.egg-info",
)
# The container's default generation length when a request names none (it must not exceed the limit).
DEFAULT_MAX_TOKENS = 256
# Share of a host's serving slots (engine replicas x max_num_seqs) in use at which the service adds a host.
# Below the latency knee, not at it: at 0.75 the game day's unplanned surge (scenarios/gameday) saw target
# tracking scale a region in until its p99 time to first token crossed the SLO, its Route 53 check drop it
# and its load overload the others in turn. Slots in use are requests a second times time in the system,
# which grows with load, so the share is convex in the load: 0.6 is 86% of a fleet's throughput bound, and a
# scale-in (sized linearly by target tracking, at least a task a fleet) from its threshold landed a cell at
# its everyday maximum at 96%, at the edge of the 97% it serves within the objective; its twin, given its
# weight, scaled in too and shed (the unplanned surge, minutes 124-131 and 165-175). At 0.5 (81%) the same
# step lands at 89% (tests/gameday/test_tracking_target.py), for 3% more host-minutes on that day.
TARGET_BATCH_UTILIZATION = 0.5


def ready_path(settings: Settings) -> str:
    return f"/v2/models/{settings.model.name}/ready"


def log_props(settings: Settings) -> LogProps:
    return LogProps(retention_days=settings.container.log_retention_days)


def network_props(settings: Settings, region: str) -> NetworkProps:
    operations = settings.operations
    return NetworkProps(
        cidr=settings.regions[region].vpc_cidr,
        zones=len(settings.availability_zones(region)),
        nat_gateways=settings.nat_gateways(region),
        interface_endpoints=settings.regions[region].interface_endpoints,
        operator_access=operations.session_manager or operations.ecs_exec,
    )


def cluster_props(settings: Settings) -> ClusterProps:
    return ClusterProps(ecs_exec=settings.operations.ecs_exec)


def host_sessions_props(settings: Settings, region: str, cell: int = 1) -> HostSessionsProps | None:
    """None while Session Manager is off: no session document, no agent permissions on the hosts."""
    if not settings.operations.session_manager:
        return None
    slug = settings.cell(region, cell).slug
    return HostSessionsProps(document_name=f"{settings.project}-{slug}-host-session")


def model_store_props(settings: Settings, region: str) -> ModelStoreProps:
    """The region's own copy of the artifacts where it names one (S3 replication), else the shared one."""
    uri = settings.artifacts_s3_uri(region)
    return ModelStoreProps(bucket=s3_bucket(uri), prefix=s3_prefix(uri))


def web_acl_props(settings: Settings, region: str, cell: int = 1) -> WebAclProps | None:
    waf = settings.load_balancer.waf
    if not waf.enabled:
        return None
    return WebAclProps(
        name=f"{settings.project}-{settings.cell(region, cell).slug}",
        rate_limit_per_ip=waf.rate_limit_per_ip,
        rate_limit_window_seconds=waf.rate_limit_window_seconds,
        rate_limit_key=waf.rate_limit_key,
        rate_limit_header=waf.rate_limit_header_name,
        source_ip_backstop_limit=waf.source_ip_backstop_limit,
    )


def load_balancer_props(
    settings: Settings, region: str, cell: int = 1, *, first_create: bool = False
) -> LoadBalancerProps:
    """`first_create`: the stack is being created; deletion protection waits for a second deploy."""
    arn = settings.regions[region].certificate_arn
    certificate: CertificateFromArn | CertificateFromDns = (
        CertificateFromArn(arn)
        if arn
        else CertificateFromDns(
            settings.tls.domain_name, settings.tls.hosted_zone_id, settings.tls.hosted_zone_name
        )
    )
    longest = settings.longest_stream_seconds
    return LoadBalancerProps(
        certificate=certificate,
        http_port=settings.serving.http_port,
        grpc_port=settings.serving.grpc_port,
        ready_path=ready_path(settings),
        served_models=(settings.model.name,),
        idle_timeout_seconds=longest,
        deregistration_delay_seconds=longest,
        deletion_protection=settings.load_balancer.deletion_protection and not first_create,
        web_acl=web_acl_props(settings, region, cell),
    )


def image_source(settings: Settings, region: str, fleet: FleetConfig) -> ImageSource:
    """The region's own image for the fleet's family (ECR replication), else the shared one, else an asset."""
    uri = settings.image_uri(region, fleet.instance.family)
    if uri:
        return ImageSource(image_uri=uri)
    pinned = pinned_base_image(CONTAINER_DIRECTORY)
    return ImageSource(
        asset_directory=str(CONTAINER_DIRECTORY),
        asset_exclude=CONTAINER_ASSET_EXCLUDE,
        asset_build_args=(("BASE_IMAGE", pinned),) if pinned else (),
    )


def engine_environment(settings: Settings, region: str) -> tuple[tuple[str, str], ...]:
    """What the container's entrypoint reads (container/entrypoint/start.py). Weights and compiled
    artifacts sit under the region's one S3 prefix the task role may read: `weights/` and `compiled/`
    (the entrypoint appends the compiled-artifact key). ENGINE_* override model.json engine arguments."""
    model = settings.model
    root = settings.artifacts_s3_uri(region).rstrip("/")
    return (
        ("MODEL_S3_URI", f"{root}/weights/"),
        ("COMPILED_ARTIFACTS_S3_URI", f"{root}/compiled/"),
        ("MODEL_ID", model.model_id),
        # Part of the compiled-artifact key (container/entrypoint/artifact_key.py GRAPH_VARIABLES).
        ("MODEL_REVISION", model.revision),
        ("ALLOW_COMPILE", "true" if model.allow_compile_on_start else "false"),
        ("ENGINE_MAX_MODEL_LEN", str(model.max_model_len)),
        ("ENGINE_MAX_NUM_SEQS", str(model.max_num_seqs)),
        ("ENGINE_DTYPE", model.dtype),
        # The container refuses longer generations, which is what bounds the longest stream.
        ("ASSISTANT_MAX_TOKENS_LIMIT", str(model.max_output_tokens)),
        ("ASSISTANT_DEFAULT_MAX_TOKENS", str(min(DEFAULT_MAX_TOKENS, model.max_output_tokens))),
        # SlowFirstToken is 1 for a stream whose first token took longer: its share is what routing judges.
        ("SLOW_FIRST_TOKEN_MS", str(settings.observability.ttft_p99_threshold_ms)),
        ("HTTP_PORT", str(settings.serving.http_port)),
        ("GRPC_PORT", str(settings.serving.grpc_port)),
        ("METRICS_PORT", str(settings.serving.metrics_port)),
        # The shop's own catalog index, downloaded and checked against its manifest at start.
        ("CATALOG_INDEX_S3_URI", model.catalog_index_uri(root)),
        # Each host follows the index's pointer this often and swaps in a new build between requests.
        ("CATALOG_FOLLOW_SECONDS", str(model.catalog_follow_seconds)),
        *sampling_environment(settings),
        *queue_environment(settings),
    )


def sampling_environment(settings: Settings) -> tuple[tuple[str, str], ...]:
    """Sampling defaults over the model's generation_config.json, only when config sets one: unset, the
    model's own file decides (container/assistant/sampling_defaults.py)."""
    defaults = settings.model.sampling_defaults.as_environment()
    return () if defaults == "{}" else (("ASSISTANT_SAMPLING_DEFAULTS", defaults),)


def queue_environment(settings: Settings) -> tuple[tuple[str, str], ...]:
    """The replica's waiting-request bound, only when config sets one: unset, the container's own default
    (one more batch of max_num_seqs) holds; and the queue-wait budget (Settings.queue_wait_budget_ms)."""
    bound = settings.serving.max_queued_per_replica
    queue = () if bound is None else (("MAX_QUEUED_PER_REPLICA", str(bound)),)
    # Always set: the container's own default is no budget (container/serving/streaming_model.py).
    return (*queue, ("QUEUE_WAIT_BUDGET_MS", str(settings.queue_wait_budget_ms)))


def fleet_environment(fleet: FleetConfig) -> tuple[tuple[str, str], ...]:
    """Per-fleet container settings: one engine replica per tensor_parallel NeuronCores of the host."""
    return (("REPLICAS_PER_HOST", str(fleet.engine_replicas)),)


@dataclass(frozen=True)
class FleetSchedule:
    """The scheduled bound changes after deploy time, in time order, and the bounds of an event already
    under way at deploy time (None: the fleet's own)."""

    changes: tuple[ScheduledBounds, ...]
    event_bounds_at_deploy: tuple[int, int] | None = None


def fleet_schedule(
    settings: Settings, region: str, fleet: FleetConfig, now: datetime, cell: int = 1
) -> FleetSchedule:
    """Each event on this fleet raises its bounds at the event's ramp start (start minus the cold-start
    budget and margin), restores the fleet's own minimum at its end, and lowers the maximum to the fleet's
    own `scale_in_after_minutes` later: Application Auto Scaling scales in to a lowered maximum at once, so
    a maximum lowered at the end would cut most tasks in one minute; meanwhile target tracking scales in at
    its own pace. No change lowers a maximum together with a minimum.

    An event whose maximums are already down is left out (a warning in the settings); one under way when the
    stack deploys holds the bounds in force at that moment from the start, so a redeploy mid-event never
    drops the raised floor, and only its remaining changes are scheduled. Every bound is the cell's share of
    the region's (the region's own for a one-cell region)."""
    budget = settings.serving.cold_start_budget_seconds
    under_way: tuple[int, int] | None = None
    changes: list[ScheduledBounds] = []
    events = [event for event in settings.events if fleet.instance_type in event.regions.get(region, {})]
    for event in sorted(events, key=lambda event: event.start):
        if event.scale_in_at <= now:
            continue
        hosts = settings.cell_bounds(settings.cell(region, cell), fleet, event)
        own = settings.cell_bounds(settings.cell(region, cell), fleet)
        ramp_start = event.ramp_start(budget)
        # Between the end and the scale-in: the fleet's own floor, the larger of the two ceilings (raising a
        # maximum at the end is never a cut).
        after_end = (own[0], max(hosts[1], own[1]))
        if event.end <= now:
            under_way = after_end
        else:
            if ramp_start <= now:
                under_way = hosts
            else:
                changes.append(ScheduledBounds(f"{event.name}-raise", ramp_start.astimezone(UTC), *hosts))
            changes.append(ScheduledBounds(f"{event.name}-restore", event.end.astimezone(UTC), *after_end))
        changes.append(ScheduledBounds(f"{event.name}-scale-in", event.scale_in_at.astimezone(UTC), *own))
    return FleetSchedule(tuple(changes), under_way)


def warm_pool_props(fleet: FleetConfig, cell: Cell | None = None) -> WarmPoolProps | None:
    """The fleet's pool, or a cell's share of it: the pool's sizes count the region's hosts, as its
    bounds do."""
    pool = fleet.warm_pool
    if pool is None:
        return None
    if cell is None or cell.count == 1:
        return WarmPoolProps(pool.min_size, pool.max_prepared)
    share = cell.index - 1
    prepared = None if pool.max_prepared is None else split_hosts(pool.max_prepared, cell.count)[share]
    return WarmPoolProps(split_hosts(pool.min_size, cell.count)[share], prepared or None)


def capacity_reservation_props(fleet: FleetConfig) -> CapacityReservationProps | None:
    reservation = fleet.capacity_reservation
    if reservation is None:
        return None
    return CapacityReservationProps(
        preference=reservation.preference,
        ids=tuple(reservation.ids or ()),
        resource_group_arn=reservation.resource_group_arn,
    )


def capacity_block_props(fleet: FleetConfig) -> CapacityBlockProps | None:
    block = fleet.capacity_block
    return CapacityBlockProps(block.id, block.availability_zone) if block else None


def target_requests_in_flight(settings: Settings, fleet: FleetConfig) -> float:
    """Streams in flight per host at which the fleet adds a host: a share of the host's serving slots."""
    return round(fleet.serving_slots(settings.model.max_num_seqs) * TARGET_BATCH_UTILIZATION, 2)


def fleet_props(
    settings: Settings,
    region: str,
    fleet: FleetConfig,
    now: datetime | None = None,
    cell: int = 1,
    *,
    bootstrap: bool = False,
) -> FleetProps:
    """`bootstrap`: the stack's first creation (ops/compile.py, ops/deploy_waves.py), its fleet at zero
    tasks and no scheduled changes, so the cluster exists for the compile task before any host needs the
    compiled artifacts; the deploy after it raises the bounds (Application Auto Scaling scales out to a
    raised minimum) and schedules the events."""
    serving = settings.serving
    schedule = fleet_schedule(settings, region, fleet, now or datetime.now(UTC), cell)
    min_hosts, max_hosts = settings.cell_bounds(settings.cell(region, cell), fleet)
    if bootstrap:
        min_hosts, schedule = 0, FleetSchedule(())
    return FleetProps(
        instance=fleet.instance,
        offered_in_region=fleet.instance.offered_in(region),
        availability_zones=tuple(settings.fleet_availability_zones(region, fleet)),
        tensor_parallel=fleet.tensor_parallel,
        min_hosts=min_hosts,
        max_hosts=max_hosts,
        max_surge_percent=serving.deployment.max_surge_percent,
        ami_parameter_name=neuron_ami_parameter(settings.container.neuron_ami_release),
        scheduled_bounds=schedule.changes,
        event_bounds_at_deploy=schedule.event_bounds_at_deploy,
        warm_pool=warm_pool_props(fleet, settings.cell(region, cell)),
        capacity_reservation=capacity_reservation_props(fleet),
        capacity_block=capacity_block_props(fleet),
        data_volume_gib=fleet.data_volume_gib,
        image=image_source(settings, region, fleet),
        ports=ServingPorts(http=serving.http_port, grpc=serving.grpc_port, metrics=serving.metrics_port),
        shared_memory_mib=serving.shared_memory_mib,
        cold_start_budget_seconds=serving.cold_start_budget_seconds,
        health_check_grace_seconds=serving.health_check_grace_seconds,
        instance_warmup_seconds=serving.instance_warmup_seconds,
        environment=engine_environment(settings, region) + fleet_environment(fleet),
        target_requests_in_flight=target_requests_in_flight(settings, fleet),
        metrics_namespace=settings.cell_metrics_namespace(settings.cell(region, cell)),
        model_name=settings.model.name,
        session_manager=settings.operations.session_manager,
        ecs_exec=settings.operations.ecs_exec,
        bootstrap=bootstrap,
    )


def observability_props(settings: Settings, region: str, cell: int = 1) -> ObservabilityProps:
    this = settings.cell(region, cell)
    return ObservabilityProps(
        dashboard_name=f"{settings.project}-{this.slug}",
        degraded_alarm_name=degraded_alarm_name(settings, region, cell),
        unfit_alarm_name=unfit_alarm_name(settings, region, cell),
        metrics_namespace=settings.cell_metrics_namespace(this),
        model_name=settings.model.name,
        ttft_p99_threshold_ms=settings.observability.ttft_p99_threshold_ms,
        # The orchestrator's own bar for failed requests, on its own M of N.
        target_error_share=settings.routing.error_share,
        unfit_minutes=policy_params(settings).bad_runs_in_window,
        unfit_window_minutes=policy_params(settings).window_runs,
        slow_first_token_share=settings.routing.slow_first_token_share,
        alarm_email=settings.observability.alarm_email,
        alarm_topic_arn=settings.observability.alarm_topic(region),
        catalog_follow_seconds=settings.model.catalog_follow_seconds,
    )


def global_stack_name(settings: Settings) -> str:
    return f"{settings.project}-global"


def orchestrator_config_parameter(settings: Settings, config_sha256: str) -> str:
    """The config's SSM parameter, named for its content: a deploy that changes the config creates the new
    parameter before the function moves to it and deletes the old one after, so no function ever reads a
    config it was not deployed with (orchestrator/routing/config_source.py)."""
    return f"/{settings.project}/routing/config-{config_sha256[:16]}"


def orchestrator_props(settings: Settings) -> OrchestratorProps:
    config_json = routing_names.orchestrator_config(settings).to_json()
    sha256 = config_source.digest(config_json)
    return OrchestratorProps(
        code_directory=str(ORCHESTRATOR_DIRECTORY),
        config_value=config_source.encode(config_json),
        config_parameter=orchestrator_config_parameter(settings, sha256),
        config_sha256=sha256,
        reserved_concurrency=settings.routing.reserved_concurrency,
        routing_metrics_namespace=routing_names.routing_metrics_namespace(settings),
        hosted_zone_id=settings.tls.hosted_zone_id,
        record_name=settings.tls.domain_name,
        reads=tuple(
            RegionReads(
                region=cell.region,
                parameters=(
                    routing_names.endpoint_parameter(settings, cell.region, cell.index),
                    routing_names.health_check_parameter(settings, cell.region, cell.index),
                ),
            )
            for cell in settings.all_cells
        ),
        state_parameter=routing_names.state_parameter(settings),
        override_parameter=routing_names.override_parameter(settings),
        powertools_version=POWERTOOLS_VERSION,
        log_retention_days=settings.container.log_retention_days,
        alarm_email=settings.observability.alarm_email,
        alarm_topic_arn=settings.observability.alarm_topic(settings.orchestrator_region),
    )


def fleet_dashboard_props(settings: Settings) -> FleetDashboardProps:
    return FleetDashboardProps(
        dashboard_name=f"{settings.project}-fleet",
        metrics_namespace=settings.observability.metrics_namespace,
        model_name=settings.model.name,
        routing_metrics_namespace=routing_names.routing_metrics_namespace(settings),
        ttft_p99_threshold_ms=settings.observability.ttft_p99_threshold_ms,
        # One line per cell: a one-cell region is drawn as the region, as before cells.
        regions=tuple(
            RegionFleets(
                cell.region,
                tuple(fleet.instance_type for fleet in settings.regions[cell.region].fleets),
                **(
                    {}
                    if cell.count == 1
                    else {"label": cell.name, "metrics_namespace": settings.cell_metrics_namespace(cell)}
                ),
            )
            for cell in settings.all_cells
        ),
    )


def routing_endpoint_props(settings: Settings, region: str, cell: int = 1) -> RoutingEndpointProps:
    """A cell's own alarms and health checks: its weighted record fails out alone."""
    routing = settings.routing
    this = settings.cell(region, cell)
    return RoutingEndpointProps(
        alarm_name_prefix=f"{settings.project}-{this.slug}-routing",
        endpoint_parameter=routing_names.endpoint_parameter(settings, region, cell),
        health_check_parameter=routing_names.health_check_parameter(settings, region, cell),
        metrics_namespace=settings.cell_metrics_namespace(this),
        model_name=settings.model.name,
        error_share=routing.dns_error_share,
        label="" if this.count == 1 else this.name,
        evaluation_minutes=routing.bad_runs_to_drain,
        alb_ready_path=ready_path(settings),
        error_bad_minutes=policy_params(settings).bad_runs_in_window,
        error_window_minutes=policy_params(settings).window_runs,
    )
