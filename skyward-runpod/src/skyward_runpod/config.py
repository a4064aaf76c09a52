"""``RunPod()``: what a user writes to run a pool on RunPod's GPU pods.

The API key is never a field: it comes from ``RUNPOD_API_KEY`` (the variable RunPod's
own SDK and CLI read), so it never lands in a pickled pool spec, a repr, or a pod's
start-up command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from skyward.errors import ConfigurationError
from skyward.providers.cloud import CloudSettings
from skyward.providers.cloud.marketplace import DEFAULT_CUDA_IMAGE, check_container, check_number
from skyward.providers.cloud.settings import check_urls

KEY_ENV = "RUNPOD_API_KEY"
"""The environment variable the API key is read from."""
DEFAULT_API_URL = "https://api.runpod.io/graphql"
CLOUDS = ("secure", "community")


@dataclass(frozen=True, slots=True)
class RunPod(CloudSettings):
    """Run the pool's nodes as RunPod GPU pods.

    cloud:      ``"secure"`` (RunPod's data-centre hosts, the default) or ``"community"``
                (strangers' hosts, cheaper); prices and availability are that cloud's.
    image:      the container image (default: a CUDA 12.4 image with Python,
                ``skyward.providers.cloud.marketplace.DEFAULT_CUDA_IMAGE``).
    disk_gb:    container disk per pod.
    bid_margin: a spot pod bids the GPU type's spot price times ``1 + bid_margin`` per GPU.
    api_url:    the GraphQL endpoint (plain http only on loopback).

    The rest is every cloud's (``CloudSettings``); ``poll_interval`` is also how often
    spot pods are checked for having been preempted.
    """

    third_party_hosts: ClassVar[bool] = True  # community hosts are strangers' machines
    """True: community hosts are strangers' machines, so results are decoded with an allow-list unpickler."""
    stopped_node_note: ClassVar[str] = "an exited pod bills its disk"
    """When a node's agent exits the pod exits, still billing its disk (``skyward.providers.StoppedNodesBill``)."""

    cloud: str = "secure"
    """``"secure"`` (RunPod's data-centre hosts, the default) or ``"community"`` (strangers' hosts, cheaper)."""
    image: str = DEFAULT_CUDA_IMAGE
    """The container image (default: a CUDA 12.4 image with Python)."""
    disk_gb: int = 32
    """Container disk per pod, GB."""
    bid_margin: float = 0.0
    """A spot pod bids the GPU type's spot price times ``1 + bid_margin`` per GPU."""
    api_url: str = DEFAULT_API_URL
    """The GraphQL endpoint (plain http only on loopback)."""

    def __post_init__(self) -> None:
        CloudSettings.__post_init__(self)
        if self.cloud not in CLOUDS:
            raise ConfigurationError(f"RunPod(cloud={self.cloud!r}) must be one of {', '.join(map(repr, CLOUDS))}")
        check_container("RunPod", self.image, self.disk_gb)
        check_number("RunPod", "bid_margin", self.bid_margin, 0.0, 10.0)
        check_urls("RunPod", self, ("api_url",))


def api_key() -> str:
    """The key from ``RUNPOD_API_KEY``; a ConfigurationError saying where to get one."""
    key = os.environ.get(KEY_ENV, "").strip()
    if not key:
        raise ConfigurationError(
            f"the RunPod provider needs an API key in {KEY_ENV} (create one under Settings > API Keys in the "
            "RunPod console; the same variable runpodctl and the runpod SDK read)"
        )
    return key
