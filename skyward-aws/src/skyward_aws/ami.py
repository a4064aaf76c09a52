"""Which machine image a node boots.

All three are Ubuntu 22.04, because the bootstrap script installs system packages with
apt-get and checks them with dpkg-query (Amazon Linux has neither):

* NVIDIA GPUs: AWS's "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)": the
  NVIDIA driver, CUDA and NCCL/EFA preinstalled, nothing else, so the pool's own
  environment decides the framework versions.
* Trainium and Inferentia: AWS's Neuron Deep Learning AMI (Ubuntu 22.04), which carries
  the Neuron driver and runtime the torch-neuronx wheels need.
* everything else: Canonical's Ubuntu Server 22.04 LTS.

Each is found first through its public SSM parameter, which AWS (or Canonical) keeps
pointed at the current release in every region: one cheap, exact lookup. Where a
parameter is missing (a new region, or a role without ``ssm:GetParameter``), the newest
image of the owner whose name matches is taken from ``describe_images``.
``AWS(ami=...)`` overrides both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError

from skyward.errors import ProvisioningError


class ImageKind(Enum):
    NVIDIA = "nvidia"
    NEURON = "neuron"
    PLAIN = "plain"


@dataclass(frozen=True, slots=True)
class ImageSource:
    """Where to find an image: a public SSM parameter, then owner + name pattern."""

    ssm_parameter: str
    owner: str
    name_pattern: str
    description: str


AMAZON = "amazon"
CANONICAL = "099720109477"

_SOURCES: dict[tuple[ImageKind, str], ImageSource] = {
    (ImageKind.NVIDIA, "x86_64"): ImageSource(
        "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
        AMAZON,
        "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*",
        "AWS Deep Learning Base GPU AMI (Ubuntu 22.04)",
    ),
    (ImageKind.NVIDIA, "arm64"): ImageSource(
        "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
        AMAZON,
        "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*",
        "AWS Deep Learning Base GPU AMI for ARM64 (Ubuntu 22.04)",
    ),
    (ImageKind.NEURON, "x86_64"): ImageSource(
        "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id",
        AMAZON,
        "Deep Learning AMI Neuron (Ubuntu 22.04)*",
        "AWS Neuron Deep Learning AMI (Ubuntu 22.04)",
    ),
    (ImageKind.PLAIN, "x86_64"): ImageSource(
        "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
        CANONICAL,
        "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*",
        "Ubuntu Server 22.04 LTS (Canonical)",
    ),
    (ImageKind.PLAIN, "arm64"): ImageSource(
        "/aws/service/canonical/ubuntu/server/22.04/stable/current/arm64/hvm/ebs-gp2/ami-id",
        CANONICAL,
        "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-arm64-server-*",
        "Ubuntu Server 22.04 LTS for ARM64 (Canonical)",
    ),
}


def image_kind(device_vendor: str | None) -> ImageKind:
    """NVIDIA GPUs get the GPU image, Neuron devices the Neuron image, the rest plain
    Ubuntu (AMD's Radeon Pro on g4ad takes the plain image: the ROCm driver is the
    user's ``Image(apt=...)`` choice)."""
    if device_vendor == "NVIDIA":
        return ImageKind.NVIDIA
    if device_vendor == "AWS":
        return ImageKind.NEURON
    return ImageKind.PLAIN


def image_source(kind: ImageKind, architecture: str) -> ImageSource:
    source = _SOURCES.get((kind, architecture))
    if source is None:
        raise ProvisioningError(
            f"skyward-aws knows no {kind.value} machine image for {architecture} instances; pass AWS(ami='ami-...')"
        )
    return source


@dataclass(frozen=True, slots=True)
class ResolvedImage:
    image_id: str
    how: str  # "ssm:<parameter>", "describe-images:<name>" or "explicit"


def resolve_image(ec2: Any, ssm: Any, kind: ImageKind, architecture: str) -> ResolvedImage:
    """The current image of ``kind`` for ``architecture`` in the clients' region."""
    source = image_source(kind, architecture)
    try:
        value = ssm.get_parameter(Name=source.ssm_parameter)["Parameter"]["Value"]
        return ResolvedImage(str(value), f"ssm:{source.ssm_parameter}")
    except ClientError as error:
        code = error.response["Error"]["Code"]
        if code not in ("ParameterNotFound", "AccessDeniedException", "AccessDenied"):
            raise
    images = ec2.describe_images(
        Owners=[source.owner],
        Filters=[
            {"Name": "name", "Values": [source.name_pattern]},
            {"Name": "architecture", "Values": [architecture]},
            {"Name": "state", "Values": ["available"]},
        ],
    )["Images"]
    if not images:
        raise ProvisioningError(
            f"found no {source.description} in {ec2.meta.region_name}: neither the public SSM parameter "
            f"{source.ssm_parameter} nor an image named {source.name_pattern!r} owned by {source.owner}; "
            "pass AWS(ami='ami-...') to choose one"
        )
    newest = max(images, key=lambda image: str(image.get("CreationDate", "")))
    return ResolvedImage(str(newest["ImageId"]), f"describe-images:{newest.get('Name', '')}")
