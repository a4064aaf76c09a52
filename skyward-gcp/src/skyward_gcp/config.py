"""``GCP(project=..., region=..., zone=...)``: what a user writes to run a pool on Google Cloud.

Credentials are never a field: they come from Google's own chain (``credentials_file``,
else ``GOOGLE_APPLICATION_CREDENTIALS``, else application default credentials), so a key
never lands in a pickled pool spec, a repr or a node's startup script. Only the *path* of
a service-account file may be given here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from skyward.errors import ConfigurationError
from skyward.providers.cloud import CloudSettings
from skyward.providers.cloud.settings import check_urls

DEFAULT_COMPUTE_URL = "https://compute.googleapis.com"
DEFAULT_TPU_URL = "https://tpu.googleapis.com"
DEFAULT_REGION = "us-central1"

_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")  # Google's project-id rule: 6-30 chars
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")  # us-central1, europe-west4, me-central2
_ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")  # us-central1-a
TERMINATION_ACTIONS = ("DELETE", "STOP")


def region_of(zone: str) -> str:
    """``us-central1`` for ``us-central1-a``."""
    match = _ZONE.match(zone)
    if match is None:
        raise ConfigurationError(f"GCP(zone={zone!r}) is not a zone name such as 'us-central1-a'")
    return match["region"]


@dataclass(frozen=True, slots=True)
class GCP(CloudSettings):
    """Run the pool's nodes as Compute Engine VMs (GPUs attached) or Cloud TPU VMs.

    project:           the Google Cloud project id; ``None`` takes the project of the
                       credentials (the service-account file's ``project_id``, or
                       ``gcloud config set project``'s for application default credentials).
    region:            e.g. ``"us-central1"``; ``None`` takes the zone's region, else us-central1.
    zone:              e.g. ``"us-central1-a"``; ``None`` tries the region's zones that
                       offer the machine, in turn, moving on when one is out of capacity.
    credentials_file:  a service-account key file; ``None`` uses GOOGLE_APPLICATION_CREDENTIALS
                       or application default credentials (``gcloud auth application-default login``).
    image:             a boot image for GPU/CPU VMs (``projects/P/global/images/family/F``);
                       ``None``: Google's Ubuntu accelerator image (NVIDIA driver preinstalled)
                       for GPUs, Ubuntu 24.04 for CPU machines.
    tpu_runtime:       the TPU software version; ``None``: the one Google recommends for the TPU version.
    network:           the VPC network the nodes and the pool's firewall rules use.
    spot_termination:  what a preempted spot VM becomes: ``"DELETE"`` (nothing left billing) or ``"STOP"``.
    compute_api_url / tpu_api_url: the API endpoints (plain http only on loopback).
    """

    stopped_node_note: ClassVar[str] = "a stopped VM bills its disks until it is deleted"
    """A node whose client is gone can only shut itself down (no credential reaches it)."""

    project: str | None = None
    """The project id; ``None``: the credentials' project."""
    region: str | None = None
    """A region (``"us-central1"``); ``None``: the zone's region, else us-central1."""
    zone: str | None = None
    """A zone (``"us-central1-a"``); ``None``: the region's zones that offer the machine, in turn."""
    credentials_file: str | None = None
    """Path of a service-account key file; ``None``: GOOGLE_APPLICATION_CREDENTIALS or application defaults."""
    image: str | None = None
    """Boot image of GPU/CPU VMs; ``None``: Ubuntu with the NVIDIA driver for GPUs, Ubuntu 24.04 otherwise."""
    tpu_runtime: str | None = None
    """TPU software version; ``None``: Google's recommended one for the TPU version."""
    network: str = "default"
    """The VPC network of the nodes and the pool's firewall rules."""
    spot_termination: str = "DELETE"
    """What a preempted spot VM becomes: ``"DELETE"`` or ``"STOP"``."""
    compute_api_url: str = DEFAULT_COMPUTE_URL
    """The Compute Engine API endpoint (plain http is refused except on loopback)."""
    tpu_api_url: str = DEFAULT_TPU_URL
    """The Cloud TPU API endpoint (plain http is refused except on loopback)."""

    def __post_init__(self) -> None:
        CloudSettings.__post_init__(self)
        if self.project is not None and (not isinstance(self.project, str) or not _PROJECT.match(self.project)):
            raise ConfigurationError(
                f"GCP(project={self.project!r}) is not a project id (6-30 lowercase letters, digits and '-', "
                "starting with a letter; `gcloud projects list` shows yours), or None for the credentials' project"
            )
        if self.region is not None and (not isinstance(self.region, str) or not _REGION.match(self.region)):
            raise ConfigurationError(f"GCP(region={self.region!r}) is not a region name such as 'us-central1'")
        if self.zone is not None:
            if not isinstance(self.zone, str):
                raise ConfigurationError(f"GCP(zone={self.zone!r}) is not a zone name such as 'us-central1-a'")
            zone_region = region_of(self.zone)
            if self.region is not None and zone_region != self.region:
                raise ConfigurationError(
                    f"GCP(zone={self.zone!r}) is not in region={self.region!r}; "
                    f"drop one, or pick a zone of {self.region}"
                )
        for name in ("credentials_file", "image", "tpu_runtime"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigurationError(f"GCP({name}={value!r}) must be a non-empty string or None")
        if not isinstance(self.network, str) or not re.match(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", self.network):
            raise ConfigurationError(f"GCP(network={self.network!r}) is not a VPC network name such as 'default'")
        if self.spot_termination not in TERMINATION_ACTIONS:
            raise ConfigurationError(
                f"GCP(spot_termination={self.spot_termination!r}) must be one of {', '.join(TERMINATION_ACTIONS)}"
            )
        check_urls("GCP", self, ("compute_api_url", "tpu_api_url"))

    @property
    def the_region(self) -> str:
        """The region the pool runs in."""
        if self.region is not None:
            return self.region
        return region_of(self.zone) if self.zone is not None else DEFAULT_REGION
