"""The real traffic orchestrator, run every simulated minute against moto (Route 53, CloudWatch, SSM).

The Lambda entry point `orchestrator.routing.handler.handler` is called as the schedule calls it: the
environment and ORCHESTRATOR_CONFIG of the synthesized global template (only the hosted zone id is
moto's), an EventBridge event whose `time` is the simulated minute, and the handler's clock set to the
simulated clock for the call (its module's `datetime`, swapped for the call only: production code is
unchanged). The twin puts its metrics with simulated timestamps, and mirrors each composite alarm's
state into a moto alarm of the same name (moto implements no composite alarms and evaluates no alarm).
Each routing target (a one-cell region, or a cell `us-east-1/2` of a region of several) gets its own
health check, endpoint and health-check parameters, composite alarms and metrics namespace, in its AWS
region, as its stack creates them. API faults raise from botocore's before-call hook of the default
session, which the handler's clients are made from, so the twin's own clients (a session of their own)
are never hit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore
import botocore.parsers
import botocore.session
import botocore.utils
from botocore.exceptions import ClientError
from moto import mock_aws

from orchestrator.routing import handler as lambda_handler
from orchestrator.routing.config import parse_config

NAMESPACE_KEEP_MINUTES = 15  # moto scans every datapoint per query: keep only what any reader looks at
ACCOUNT = "123456789012"


original_client = lambda_handler._boto3_client


class _NamespaceFilter:
    """moto 5.2.5's GetMetricData drops a query's namespace once it has dimensions (moto/cloudwatch/models.py,
    `get_metric_data`: the dimensions filter starts again from every datapoint of the period), so the cells
    of a region, which publish the same metric names and dimensions to `<namespace>/cell<k>`, would each read
    their region's sum. CloudWatch identifies a metric by namespace, name and dimensions ("Amazon CloudWatch
    concepts", CloudWatch User Guide). While the twin runs, a GetMetricData answers each namespace's queries
    from that namespace's datapoints alone (the handler asks for all the cells of an AWS region in one
    call), in the order asked; the filter is per thread, as the handler reads its regions in threads of
    their own."""

    def __init__(self) -> None:
        from moto.cloudwatch.models import CloudWatchBackend

        self._backend = CloudWatchBackend
        self._get_metric_data = CloudWatchBackend.get_metric_data
        self._get_all_metrics = CloudWatchBackend.get_all_metrics
        self._local = threading.local()
        local, get_metric_data, get_all_metrics = self._local, self._get_metric_data, self._get_all_metrics

        def metric_data(backend: Any, queries: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
            by_namespace: dict[str | None, list[dict[str, Any]]] = {}
            for query in queries:
                namespace = query["MetricStat"]["Metric"].get("Namespace") if "MetricStat" in query else None
                by_namespace.setdefault(namespace, []).append(query)
            answered: dict[str, Any] = {}
            for namespace, asked in by_namespace.items():
                local.namespace = namespace
                try:
                    answered.update((r["id"], r) for r in get_metric_data(backend, asked, *args, **kwargs))
                finally:
                    local.namespace = None
            return [answered[q["Id"]] for q in queries if q["Id"] in answered]

        def all_metrics(backend: Any) -> Any:
            found = get_all_metrics(backend)
            namespace = getattr(local, "namespace", None)
            return found if namespace is None else [d for d in found if d.namespace == namespace]

        CloudWatchBackend.get_metric_data = metric_data  # type: ignore[method-assign]
        CloudWatchBackend.get_all_metrics = all_metrics  # type: ignore[method-assign]

    def close(self) -> None:
        self._backend.get_metric_data = self._get_metric_data  # type: ignore[method-assign]
        self._backend.get_all_metrics = self._get_all_metrics  # type: ignore[method-assign]


class _MethodNames:
    """moto looks up every response class's method names with inspect.getmembers on each request
    (moto/core/responses.py, `call_action` -> `method_names_from_class`): a twentieth of a game day. The
    classes do not change while the twin runs, so their names are looked up once; restored on close."""

    def __init__(self) -> None:
        from moto.core import responses

        self._module = responses
        self._original = responses.method_names_from_class
        found: dict[type, list[str]] = {}
        original = self._original

        def method_names(clazz: Any) -> list[str]:
            if clazz not in found:
                found[clazz] = original(clazz)
            return found[clazz]

        responses.method_names_from_class = method_names  # type: ignore[assignment]

    def close(self) -> None:
        self._module.method_names_from_class = self._original  # type: ignore[assignment]


class _Routes:
    """moto's botocore stubber finds the handler of every request by trying each service's URL pattern in
    turn and then rebuilding the matching backend's URL table (moto/core/botocore_stubber.py,
    `process_request`): a tenth of each of the handler's calls. Which handler serves a URL does not change
    while the twin runs, so each URL's is found once, by the same search, and kept; the request itself is
    then handled exactly as moto handles it. A URL the search sends nowhere (passthrough, not whitelisted,
    not implemented) goes to moto's own method every time. Restored on close."""

    def __init__(self) -> None:
        import moto.backend_index as backend_index
        import moto.backends as backends
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.core.base_backend import BackendDict
        from moto.core.botocore_stubber import BotocoreStubber
        from moto.core.config import passthrough_service, passthrough_url, service_whitelisted
        from moto.core.exceptions import HTTPException
        from moto.core.request import normalize_request
        from moto.core.utils import get_equivalent_url_in_aws_domain
        from moto.moto_api import recorder

        self._stubber = BotocoreStubber
        self._original = BotocoreStubber.process_request
        original = self._original
        found: dict[str, Any] = {}

        def route(clean_url: str) -> Any:
            """The handler moto's search picks for `clean_url`, or None where it picks none."""
            if passthrough_url(clean_url):
                return None
            for service, pattern in backend_index.backend_url_patterns:
                if pattern.match(clean_url):
                    if passthrough_service(service) or not service_whitelisted(service):
                        return None
                    backend_dict = backends.get_backend(service)  # type: ignore[call-overload]
                    if isinstance(backend_dict, BackendDict):
                        regions = backend_dict[DEFAULT_ACCOUNT_ID]
                        backend = regions["us-east-1"] if "us-east-1" in regions else regions["aws"]
                    else:
                        backend = backend_dict["global"]
                    for url, method_to_execute in backend.urls.items():
                        if re.compile(url).match(clean_url):
                            return method_to_execute
            return None

        def process_request(stubber: Any, request: Any) -> Any:
            parsed_url, _ = get_equivalent_url_in_aws_domain(request.url)
            clean_url = f"{parsed_url.scheme}://{parsed_url.netloc}{parsed_url.path}"
            if clean_url not in found:
                method = route(clean_url)
                if method is None:
                    return original(stubber, request)
                found[clean_url] = method
            normalized_request = normalize_request(request)
            try:
                recorder._record_request(normalized_request)
                status, headers, body = found[clean_url](
                    normalized_request, normalized_request.raw_url, normalized_request.headers
                )
            except HTTPException as e:
                status, headers, body = e.code, e.get_headers(), e.get_body()
            return status, headers, body

        BotocoreStubber.process_request = process_request  # type: ignore[method-assign]

    def close(self) -> None:
        self._stubber.process_request = self._original  # type: ignore[method-assign]


class _AttributeValues:
    """moto's response serializer looks up each member of a response on the backend's object under every
    name an alias rule gives it (moto/core/serialize.py, `ResponseSerializer.get_value` and
    `XFormedAttributePicker`: a context and six rule objects made and asked per member, per list item): a
    tenth of a game day. The names depend only on the rules, the object's class and its `Meta`, the
    member's shape and its parent shape and the member's key, none of which change while the twin runs; so
    each combination's names are listed once, by moto's own rules, and each value is still looked up on its
    object and transformed as moto's picker does. Restored on close."""

    def __init__(self) -> None:
        from moto.core.serialize import AttributePickerContext, ResponseSerializer, XFormedAttributePicker
        from moto.core.utils import MISSING
        from moto.core.utils import get_value as value_of

        self._serializer = ResponseSerializer
        self._original = ResponseSerializer.get_value
        original = self._original
        found: dict[tuple[Any, ...], tuple[str, ...]] = {}
        kept: list[Any] = []  # what the ids in `found` name, kept alive so that no id is reused

        def names(serializer: Any, picker: Any, obj: Any, key: str, shape: Any) -> tuple[str, ...]:
            kind = obj.__class__
            # A dict has no attributes of its own: no Meta (most of what the backends answer with).
            meta = None if kind is dict else getattr(obj, "Meta", None)
            aliases = None if meta is None else getattr(meta, "serialization_aliases", None)
            parent = getattr(shape, "parent", None)
            ids = (id(picker.alias_providers), id(kind), id(meta), id(aliases), id(shape), id(parent), key)
            listed = found.get(ids)
            if listed is None:
                context = AttributePickerContext(
                    obj=obj,
                    key=key,
                    shape=shape,
                    operation_model=serializer.operation_model,
                    service_model=serializer.operation_model.service_model,
                    key_path=".".join(serializer.path),
                )
                listed = tuple(picker.get_possible_keys(context))
                found[ids] = listed
                kept.append((picker.alias_providers, kind, meta, aliases, shape, parent))
            return listed

        def get_value(serializer: Any, value: Any, key: str, shape: Any) -> Any:
            picker = serializer._value_picker
            if type(picker) is not XFormedAttributePicker:
                return original(serializer, value, key, shape)
            for name in names(serializer, picker, value, key, shape):
                member = value_of(value, name, MISSING)
                if member is not MISSING:
                    break
            else:
                member = None
            if picker.response_transformers:
                key_path = f"{'.'.join(serializer.path)}.{key}"
                for transform_path, transform in picker.response_transformers.items():
                    if key_path.endswith(transform_path):
                        return transform(member)
            return member

        ResponseSerializer.get_value = get_value  # type: ignore[method-assign]

    def close(self) -> None:
        self._serializer.get_value = self._original  # type: ignore[method-assign]


class _EpochSeconds:
    """moto keeps CloudWatch's timestamps as naive UTC datetimes, and its serializer turns each into epoch
    seconds for a JSON response by first making it aware with dateutil's tzutc
    (moto/core/serialize.py, `TimestampSerializer._convert_timestamp_to_str`), whose Python `dst` the
    conversion then calls: most of GetMetricData's serializing. A naive datetime's epoch seconds are the
    same numbers without it (`calendar.timegm` reads the fields, not the zone); anything else goes the
    way moto sends it. Restored on close."""

    def __init__(self) -> None:
        from moto.core.serialize import TimestampSerializer

        self._serializer = TimestampSerializer
        self._original = TimestampSerializer._convert_timestamp_to_str
        original = self._original
        unix = TimestampSerializer.TIMESTAMP_FORMAT_UNIX

        def convert(serializer: Any, value: Any, timestamp_format: str) -> Any:
            if type(value) is datetime and value.tzinfo is None and timestamp_format.lower() == unix:
                return serializer._timestamp_unixtimestamp(value)
            return original(serializer, value, timestamp_format)

        TimestampSerializer._convert_timestamp_to_str = convert  # type: ignore[method-assign]

    def close(self) -> None:
        self._serializer._convert_timestamp_to_str = self._original  # type: ignore[method-assign]


def _utc_timestamp(value: Any) -> Any:
    """botocore's timestamp parser (botocore.utils.parse_timestamp) with epoch seconds, as the JSON APIs
    send them, read straight to UTC: botocore reads them into the machine's local zone through dateutil's
    tzlocal, a twentieth of a game day (GetMetricData's timestamps), and Lambda's local zone is UTC. The
    same instant either way; the handler reads each in UTC. Anything else goes to botocore's parser."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    return botocore.utils.parse_timestamp(value)


def _unsigned(**_: Any) -> Any:
    """No signature: moto checks none (its IAM authentication is off unless asked for), and SigV4's
    canonical request and HMACs were a tenth of a game day's CPU (bench/gameday_speed.py)."""
    return botocore.UNSIGNED


class _InThread:
    """The handler's region reads in the calling thread, one after another (the executor's interface as the
    handler uses it). In Lambda the threads overlap waiting on the network; against moto there is no
    network to wait on, only the GIL to hand over and a thread to start per region per run. What each read
    calls, and in what order per region, is unchanged; a read that raises is held in its future, as a
    thread's would be."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def submit(self, function: Any, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(function(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future

    def shutdown(self, *_: Any, **__: Any) -> None:
        pass


_LOADER: Any = None


def _botocore_session() -> Any:
    """A new botocore session on the process's one data loader. Each twin run makes two sessions (the
    handler's default one, the twin's own) and a dozen clients from them; a session of its own reads and
    parses each service's model JSON again (botocore caches them per loader), a third of a short run's
    setup. The loader only reads botocore's data files, which do not change."""
    global _LOADER
    session = botocore.session.get_session()
    if _LOADER is None:
        _LOADER = session.get_component("data_loader")
    else:
        session.register_component("data_loader", _LOADER)
    return session


class _Context:
    function_name = "traffic-orchestrator"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:traffic-orchestrator"
    aws_request_id = "game-day"


def _clock(now: datetime) -> type[datetime]:
    class SimulatedClock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return now.astimezone(tz) if tz else now.replace(tzinfo=None)

    return SimulatedClock


class Orchestrator:
    def __init__(
        self, orchestrator_config: str, home_region: str, composite_names: dict[str, list[str]]
    ) -> None:
        self._environment = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": home_region,
            "AWS_REGION": home_region,
            "POWERTOOLS_METRICS_NAMESPACE": "game-day/Routing",
            "POWERTOOLS_SERVICE_NAME": "traffic-orchestrator",
        }
        self._saved = {key: os.environ.get(key) for key in [*self._environment, "ORCHESTRATOR_CONFIG"]}
        os.environ.update(self._environment)
        self._mock = mock_aws()
        self._mock.start()
        self._namespaces = _NamespaceFilter()
        self._method_names = _MethodNames()
        self._routes = _Routes()
        self._attribute_values = _AttributeValues()
        self._epoch_seconds = _EpochSeconds()
        self.failing: set[str] = set()
        self._hook = self._fail
        boto3.setup_default_session(botocore_session=_botocore_session())
        boto3.DEFAULT_SESSION.events.register("before-call", self._hook)  # type: ignore[union-attr]
        boto3.DEFAULT_SESSION.events.register_first("choose-signer", _unsigned)  # type: ignore[union-attr]
        self._parsers = boto3.DEFAULT_SESSION._session.get_component("response_parser_factory")  # type: ignore[union-attr]
        self._parsers.set_parser_defaults(timestamp_parser=_utc_timestamp)
        self._session = boto3.Session(botocore_session=_botocore_session(), region_name=home_region)
        self._clients: dict[tuple[str, str], Any] = {}
        self._handler_clients: dict[tuple[str, str], Any] = {}
        self.home = home_region
        self.config = self._deploy(json.loads(orchestrator_config), composite_names)
        os.environ["ORCHESTRATOR_CONFIG"] = self.config.to_json()
        # The handler's Powertools logger and EMF metrics print to stdout: the twin's output is elsewhere.
        self._sink = open(os.devnull, "w")  # noqa: SIM115 (closed in close())
        self._stream = lambda_handler.logger.registered_handler.setStream(self._sink)  # type: ignore[attr-defined]

    def client(self, service: str, region: str) -> Any:
        if (service, region) not in self._clients:
            self._clients[service, region] = self._session.client(service, region_name=region)
        return self._clients[service, region]

    def _handler_client(self, service: str, region: str) -> Any:
        """The handler's own factory (boto3's default session, so API faults reach it), its clients kept
        across runs as a warm Lambda environment could: making a botocore client costs more than the
        call it makes here, and a 24-hour day makes twenty thousand."""
        key = (service, region)
        if key not in self._handler_clients:
            # Past the handler's own cache (if it has one): clients of this run's default session only.
            make = getattr(original_client, "__wrapped__", original_client)
            self._handler_clients[key] = make(service, region)
        return self._handler_clients[key]

    def _fail(self, model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        if service in self.failing:
            raise ClientError(
                {"Error": {"Code": "ServiceUnavailable", "Message": "game day: injected API error"}},
                model.name,
            )

    def _deploy(self, data: dict[str, Any], composite_names: dict[str, list[str]]):
        """What the regional stacks create that the orchestrator reads: endpoints, health checks, alarms."""
        route53 = self.client("route53", self.home)
        zone = route53.create_hosted_zone(
            Name=data["domain_name"].split(".", 1)[1], CallerReference="game-day"
        )
        data["hosted_zone_id"] = zone["HostedZone"]["Id"].split("/")[-1]
        config = parse_config(json.dumps(data))
        self._targets = {target.name: target for target in config.regions}
        for region in config.regions:
            check = route53.create_health_check(
                CallerReference=region.name,
                HealthCheckConfig={"Type": "CALCULATED", "ChildHealthChecks": [], "HealthThreshold": 0},
            )["HealthCheck"]["Id"]
            aws_region = region.client_region
            ssm = self.client("ssm", aws_region)
            slug = region.name.replace("/", "-cell")
            endpoint = {
                "alb_dns_name": f"serving-{slug}.{aws_region}.elb.amazonaws.com",
                "alb_canonical_hosted_zone_id": "Z35SXDOTRQ7X7K",
                "region": aws_region,
            }
            ssm.put_parameter(Name=region.endpoint_parameter, Value=json.dumps(endpoint), Type="String")
            ssm.put_parameter(Name=region.health_check_parameter, Value=check, Type="String")
            cloudwatch = self.client("cloudwatch", aws_region)
            for name in composite_names.get(region.name, []):
                cloudwatch.put_metric_alarm(
                    AlarmName=name,
                    MetricName="CompositeStandIn",
                    Namespace="GameDay",
                    Statistic="Maximum",
                    Period=60,
                    EvaluationPeriods=1,
                    Threshold=1,
                    ComparisonOperator="GreaterThanOrEqualToThreshold",
                )
                cloudwatch.set_alarm_state(AlarmName=name, StateValue="OK", StateReason="game day start")
        return config

    def aws_region(self, target: str) -> str:
        """The AWS region of a routing target (a region, or a cell `us-east-1/2`)."""
        return self._targets[target].client_region

    def namespace(self, target: str) -> str:
        """Where a target's hosts publish: the config's namespace, or its cell's own."""
        return self.config.namespace_of(self._targets[target])

    def _cloudwatch(self, target: str) -> Any:
        """moto's CloudWatch of a target's AWS region. The twin writes its own metrics and alarm states
        there directly, as the containers and CloudWatch would: they are the world the handler reads, not
        calls under test, and going through botocore and moto's HTTP layer cost a third of a game day's
        time. The handler's own calls still go through boto3 and moto's API, as in AWS."""
        from moto.cloudwatch.models import cloudwatch_backends

        return cloudwatch_backends[ACCOUNT][self.aws_region(target)]

    def set_alarm(self, target: str, name: str, alarm: bool) -> None:
        self._cloudwatch(target).set_alarm_state(
            name, "game day: composite rule", None, "ALARM" if alarm else "OK"
        )

    def publish(self, target: str, namespace: str, data: list[dict[str, Any]]) -> None:
        """A target's datapoints in its AWS region, into the namespace its hosts publish to (a cell's own:
        the orchestrator reads the one its config names). moto keeps timestamps as naive UTC, as its API
        layer parses them."""
        if data:
            stored = [
                {**datum, "Timestamp": datum["Timestamp"].astimezone(UTC).replace(tzinfo=None)}
                for datum in data
            ]
            self._cloudwatch(target).put_metric_data(namespace, stored)

    def prune(self, before: datetime) -> None:
        """Drop datapoints older than any reader's window (moto keeps and scans them all)."""
        from moto.cloudwatch.models import cloudwatch_backends

        cutoff = (before - timedelta(minutes=NAMESPACE_KEEP_MINUTES)).astimezone(UTC).replace(tzinfo=None)
        for region in {target.client_region for target in self.config.regions}:
            backend = cloudwatch_backends[ACCOUNT][region]
            backend.metric_data = [d for d in backend.metric_data if d.timestamp >= cutoff]

    def run(self, now: datetime) -> dict[str, Any]:
        """One scheduled invocation at `now`: the handler's answer, or the error it raised."""
        event = {
            "version": "0",
            "id": f"game-day-{now.isoformat()}",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "time": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.home,
            "resources": [],
            "detail": {},
        }
        original = lambda_handler.datetime, lambda_handler._boto3_client, lambda_handler.ThreadPoolExecutor
        lambda_handler.datetime = _clock(now.astimezone(UTC))  # type: ignore[misc]
        lambda_handler._boto3_client = self._handler_client  # type: ignore[assignment]
        lambda_handler.ThreadPoolExecutor = _InThread  # type: ignore[misc,assignment]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                return lambda_handler.handler(event, _Context())
        except Exception as error:
            return {"error": f"{type(error).__name__}: {error}"}
        finally:
            (
                lambda_handler.datetime,
                lambda_handler._boto3_client,
                lambda_handler.ThreadPoolExecutor,
            ) = original  # type: ignore[misc]

    def weights(self) -> dict[str, int]:
        """Routing target (the record's set identifier) -> its weight in Route 53."""
        return {name: weight for name, (weight, _) in self.records().items()}

    def records(self) -> dict[str, tuple[int, bool]]:
        """Routing target (the record's set identifier) -> its weight and alias EvaluateTargetHealth, as
        the orchestrator wrote them to Route 53 (read from moto's zone directly: the world the twin
        serves from, not a call under test)."""
        from moto.route53.models import route53_backends

        zone = route53_backends[ACCOUNT]["aws"].get_hosted_zone(self.config.hosted_zone_id)
        name = self.config.domain_name.rstrip(".")
        found: dict[str, tuple[int, bool]] = {}
        for record in zone.rrsets:
            if record.name.rstrip(".") != name or record.type != "A" or not record.set_identifier:
                continue
            if record.weight is None or not record.alias_target:
                continue
            flag = str(record.alias_target.get("EvaluateTargetHealth", "false")).lower() == "true"
            found[record.set_identifier] = (int(record.weight), flag)
        return found

    def close(self) -> None:
        boto3.DEFAULT_SESSION.events.unregister("before-call", self._hook)  # type: ignore[union-attr]
        boto3.DEFAULT_SESSION.events.unregister("choose-signer", _unsigned)  # type: ignore[union-attr]
        self._parsers.set_parser_defaults(timestamp_parser=botocore.parsers.DEFAULT_TIMESTAMP_PARSER)
        self._namespaces.close()
        self._method_names.close()
        self._routes.close()
        self._attribute_values.close()
        self._epoch_seconds.close()
        self._mock.stop()
        lambda_handler.logger.registered_handler.setStream(self._stream)  # type: ignore[attr-defined]
        self._sink.close()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def __enter__(self) -> Orchestrator:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@contextlib.contextmanager
def orchestrator(config: str, home: str, composites: dict[str, list[str]]) -> Iterator[Orchestrator]:
    instance = Orchestrator(config, home, composites)
    try:
        yield instance
    finally:
        instance.close()
