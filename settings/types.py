"""Building blocks every config section shares: the strict base model, value types with their own
checks (S3 URIs, ISO 8601 times, region names), and a way to report problems at their own keys."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from settings.instances import NeuronFamily
from settings.regions import KNOWN_REGIONS

_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/(?P<prefix>.*))?$")
ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/[A-Za-z0-9-]+$")
PROJECT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,39}$")
_CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]+$")
ECR_IMAGE_REGION = re.compile(r"^\d{12}\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/")

PositiveInt = Annotated[int, Field(gt=0)]
KeyPath = tuple[str | int, ...]


def problems_at(problems: list[tuple[KeyPath, str]], title: str) -> ValidationError:
    """Several problems found by one cross-field rule, each at its own key path (so each gets its file and
    line), where a plain ValueError would place them all at the model's own key."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("config", "{message}", {"message": message}), loc=loc, input=None
            )
            for loc, message in problems
        ],
    )


def _capacity_reservation_id(value: str) -> str:
    if not _CAPACITY_RESERVATION_ID.match(value):
        raise ValueError(f"{value!r} is not a capacity reservation id (cr- and 17 hex digits)")
    return value


CapacityReservationId = Annotated[str, AfterValidator(_capacity_reservation_id)]


def _iso8601(value: Any) -> datetime:
    """Quoted ISO 8601 text, or the datetime YAML makes of an unquoted one; always with its UTC offset."""
    example = '"2027-07-08T00:00:00-07:00"'
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 time; write it like {example}") from None
    else:
        raise ValueError(f"must be an ISO 8601 time with an offset, like {example}, got {value!r}")
    if moment.utcoffset() is None:
        raise ValueError(
            f"{value!s} has no UTC offset; add one ({example}) or Z for UTC, so the event starts when meant"
        )
    return moment


EventTime = Annotated[datetime, BeforeValidator(_iso8601)]


def _s3_uri(value: str) -> str:
    if not _S3_URI.match(value):
        raise ValueError("must be an S3 URI like s3://bucket/prefix/")
    return value


S3Uri = Annotated[str, AfterValidator(_s3_uri)]


def _image_uris(image_uris: dict[str, str]) -> dict[str, str]:
    families = [family.value for family in NeuronFamily]
    for family, uri in image_uris.items():
        if family not in families:
            raise ValueError(f"unknown Neuron family {family!r}; use one of {families}")
        if not uri or any(c.isspace() for c in uri):
            raise ValueError(f"image_uris.{family} is not an image URI: {uri!r}")
    return image_uris


# Pre-built image per Neuron family; a family without one is built from container/ as a CDK asset.
ImageUris = Annotated[dict[str, str], AfterValidator(_image_uris)]


def s3_bucket(uri: str) -> str:
    match = _S3_URI.match(uri)
    assert match is not None  # validated on the way in
    return match.group("bucket")


def s3_prefix(uri: str) -> str:
    match = _S3_URI.match(uri)
    assert match is not None
    return (match.group("prefix") or "").strip("/")


def _known_region(name: str) -> str:
    if name not in KNOWN_REGIONS:
        raise ValueError(f"unknown region {name!r}")
    return name


RegionName = Annotated[str, AfterValidator(_known_region)]


class StrictModel(BaseModel):
    """Unknown keys are typos until proven otherwise; values never change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
