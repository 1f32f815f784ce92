"""Where a fleet's serving image comes from: a pre-built URI (public or private ECR) or a CDK asset."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from constructs import Construct

_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+)(:(?P<tag>[\w.-]+)|@(?P<digest>sha256:[0-9a-f]{64}))$"
)


@dataclass(frozen=True)
class ImageSource:
    """Either a pre-built image URI or a folder built as a CDK asset."""

    image_uri: str | None = None
    asset_directory: str | None = None
    asset_exclude: tuple[str, ...] = ()
    # Docker build arguments of the asset build: the base image pinned by digest (stacks/base_image.py).
    asset_build_args: tuple[tuple[str, str], ...] = ()

    @property
    def pulls_from_ecr(self) -> bool:
        """Assets and private ECR images need the execution role's ECR pull permissions."""
        return self.image_uri is None or _ECR_IMAGE.match(self.image_uri) is not None

    def container_image(self, scope: Construct) -> ecs.ContainerImage:
        if self.image_uri:
            ecr_image = _ECR_IMAGE.match(self.image_uri)
            if ecr_image is None:  # a public registry: nothing to grant
                return ecs.ContainerImage.from_registry(self.image_uri)
            # A private ECR image, possibly in another account or region: grant the pull on that repository.
            name = ecr_image["repository"]
            repository = ecr.Repository.from_repository_attributes(
                scope,
                "ImageRepository",
                repository_name=name,
                repository_arn=f"arn:{Aws.PARTITION}:ecr:{ecr_image['region']}:{ecr_image['account']}:"
                f"repository/{name}",
            )
            return ecs.ContainerImage.from_ecr_repository(repository, ecr_image["tag"] or ecr_image["digest"])
        if not self.asset_directory:
            raise ValueError("ImageSource needs image_uri or asset_directory")
        return ecs.ContainerImage.from_asset(
            self.asset_directory,
            exclude=list(self.asset_exclude),
            build_args=dict(self.asset_build_args) or None,
        )
