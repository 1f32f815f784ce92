"""The front door and the operators' side: TLS, WAF, load balancer, operator shells, observability."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from settings.types import StrictModel, problems_at


class TlsConfig(StrictModel):
    # Used when a region has no certificate_arn: a certificate for domain_name, validated in this zone.
    domain_name: str = "assistant.example.com"
    # The Route 53 hosted zone that holds domain_name's weighted records and validates its certificate.
    hosted_zone_id: str = "Z0000000000000EXAMPLE"
    # That zone's name; domain_name must be it or a name under it.
    hosted_zone_name: str = "example.com"

    @model_validator(mode="after")
    def _domain_in_zone(self) -> Self:
        if not (
            self.domain_name == self.hosted_zone_name
            or self.domain_name.endswith("." + self.hosted_zone_name)
        ):
            raise ValueError(
                f"domain_name {self.domain_name!r} is not inside hosted_zone_name {self.hosted_zone_name!r}"
            )
        return self


_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")


class WafConfig(StrictModel):
    # AWS WAF in front of each ALB: a rate-based rule, IP reputation, known bad inputs and the core rule set.
    enabled: bool = True
    # Requests one client may send per window before WAF blocks it for the rest of the window. A stream
    # is one request, so this counts questions, not tokens. Who "one client" is, is rate_limit_key's choice.
    rate_limit_per_ip: Annotated[int, Field(ge=10, le=2_000_000_000)] = 1000
    # The window rate_limit_per_ip counts requests over (the values AWS WAF offers).
    rate_limit_window_seconds: Literal[60, 120, 300, 600] = 300
    # What the rate limit counts per (WAF rate-based aggregation keys):
    # - ip (default): the connecting address. Right when shoppers reach the ALB directly; a shop backend,
    #   NAT or CDN calling from a few addresses shares one budget among all its users, so pick another key.
    # - forwarded_ip: the first address in rate_limit_header (default X-Forwarded-For), for a CDN or proxy
    #   that sets it. A client reaching the ALB directly can write that header, so only where the ALB is
    #   reachable through the proxy alone. Requests whose header holds no valid address are counted
    #   together as one client.
    # - header: the value of rate_limit_header (e.g. a shopper or tenant id the shop backend sets).
    # WAF leaves requests without the key's header out of a keyed rule: source_ip_backstop_limit adds a
    # per-address rule beside it that catches them (and sizes the backend's own addresses' ceiling).
    rate_limit_key: Literal["ip", "forwarded_ip", "header"] = "ip"
    # The header rate_limit_key reads: default X-Forwarded-For for forwarded_ip; required for header.
    rate_limit_header: str | None = None
    # With forwarded_ip or header only: a per-address rate rule after the keyed one, which catches requests
    # without the key's header and caps any one address (set it above what the backend's own addresses send at
    # the peak).
    source_ip_backstop_limit: Annotated[int, Field(ge=10, le=2_000_000_000)] | None = None

    @field_validator("rate_limit_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER_NAME.match(value):
            raise ValueError(f"{value!r} is not an HTTP header name (letters, digits, '-', at most 64)")
        return value

    @model_validator(mode="after")
    def _key_takes_its_header(self) -> Self:
        if self.rate_limit_key == "header" and self.rate_limit_header is None:
            raise problems_at(
                [(("rate_limit_header",), "rate_limit_key header needs the header's name here")],
                type(self).__name__,
            )
        if self.rate_limit_key == "ip":
            where = [
                (key, f"{key} applies to rate_limit_key forwarded_ip or header only; the key here is ip")
                for key in ("rate_limit_header", "source_ip_backstop_limit")
                if getattr(self, key) is not None
            ]
            if where:
                raise problems_at([((key,), message) for key, message in where], type(self).__name__)
        return self

    @property
    def rate_limit_header_name(self) -> str | None:
        """The header the key reads: the configured one, X-Forwarded-For for forwarded_ip by default."""
        if self.rate_limit_key == "forwarded_ip":
            return self.rate_limit_header or "X-Forwarded-For"
        return self.rate_limit_header


class LoadBalancerConfig(StrictModel):
    # On by default so a stack update or a stray delete cannot take the public endpoint away; set false and
    # deploy once before `make destroy`.
    deletion_protection: bool = True
    waf: WafConfig = WafConfig()


class OperationsConfig(StrictModel):
    # Operator shells without SSH, audited; both off unless an operator needs them.
    session_manager: bool = False  # SSM Session Manager on the Neuron hosts
    ecs_exec: bool = False  # ECS Exec into the serving containers, logged to the encrypted log group


class ObservabilityConfig(StrictModel):
    # The CloudWatch namespace of the container's EMF metrics (a cell of a region of several:
    # <namespace>/cell<k>).
    metrics_namespace: str = "LLMServing"
    # The time-to-first-token objective: the TtftP99 alarm's threshold and what the container's SlowFirstToken
    # counts against.
    ttft_p99_threshold_ms: Annotated[int, Field(ge=50)] = 1000
    # An address subscribed to the alarm topics (each region's and the orchestrator's); it must confirm the
    # subscription.
    alarm_email: str | None = None
