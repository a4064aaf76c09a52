"""``VastAI()``: what a user writes to run a pool on VastAI's GPU marketplace.

The API key is never a field: it comes from ``VAST_API_KEY`` or from the file the
official ``vastai`` CLI writes (``vastai set api-key``), so it never lands in a pickled
pool spec, a repr, or a node's start-up command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from skyward.errors import ConfigurationError
from skyward.providers.cloud import CloudSettings
from skyward.providers.cloud.marketplace import DEFAULT_CUDA_IMAGE, MIN_CUDA, check_container, check_number
from skyward.providers.cloud.settings import check_urls

KEY_ENV = "VAST_API_KEY"
"""The environment variable the API key is read from (else the vastai CLI's key file)."""
KEY_FILES = (".config/vastai/vast_api_key", ".vast_api_key")  # under $HOME: the CLI's new place, its old one
DEFAULT_API_URL = "https://console.vast.ai/api/v0"
IMAGE_LIMIT = 1024
"""The longest image name VastAI accepts (``x-input-validation: image: max_length: 1024`` in
``api-reference/openapi/yaml/create_instance.yaml``, github.com/vast-ai/docs c624622)."""


@dataclass(frozen=True, slots=True)
class VastAI(CloudSettings):
    """Run the pool's nodes as containers rented on VastAI.

    image:           the container image (default: a CUDA 12.4 image with Python,
                     ``skyward.providers.cloud.marketplace.DEFAULT_CUDA_IMAGE``).
    disk_gb:         container disk per node.
    min_reliability: the least host reliability (VastAI's ``reliability2``, 0-1) an offer may have.
    verified_only:   only hosts VastAI has verified.
    min_cuda:        the least CUDA version the host's driver must support (the image's).
    min_inet_down:   the least download bandwidth (Mbit/s) of the host.
    bid_margin:      a spot (interruptible) node bids the offer's minimum bid times
                     ``1 + bid_margin`` (never more than its on-demand price): a host's
                     minimum moves, and a bid at it is the first outbid.
    api_url:         the API endpoint, ending in ``/api/v0`` (plain http only on
                     loopback); the instance listing is the same server's ``/api/v1``.

    The rest is every cloud's (``CloudSettings``); ``poll_interval`` is also how often
    spot nodes are checked for having been outbid.
    """

    third_party_hosts: ClassVar[bool] = True  # the hosts are strangers' machines
    """True: the hosts are strangers' machines, so results are decoded with an allow-list unpickler."""
    stopped_node_note: ClassVar[str] = "a stopped instance bills its disk"
    """When a node's agent exits its container ends and the instance stops, still renting its disk
    (``skyward.providers.StoppedNodesBill``)."""

    image: str = DEFAULT_CUDA_IMAGE
    """The container image (default: a CUDA 12.4 image with Python)."""
    disk_gb: int = 32
    """Container disk per node, GB."""
    min_reliability: float = 0.98
    """The least host reliability (VastAI's ``reliability2``, 0-1) an offer may have."""
    verified_only: bool = True
    """Only hosts VastAI has verified."""
    min_cuda: float = MIN_CUDA
    """The least CUDA version the host's driver must support."""
    min_inet_down: float = 100.0
    """The least download bandwidth of the host, Mbit/s."""
    bid_margin: float = 0.2
    """A spot node bids the offer's minimum bid times ``1 + bid_margin`` (never above its on-demand price)."""
    api_url: str = DEFAULT_API_URL
    """The API endpoint, ending in ``/api/v0`` (plain http only on loopback)."""

    def __post_init__(self) -> None:
        CloudSettings.__post_init__(self)
        check_container("VastAI", self.image, self.disk_gb)
        if len(self.image) > IMAGE_LIMIT:
            raise ConfigurationError(
                f"VastAI(image={self.image[:60]!r}...) is {len(self.image)} characters; VastAI accepts at most "
                f"{IMAGE_LIMIT}"
            )
        for name, value, low, high in (
            ("min_reliability", self.min_reliability, 0.0, 1.0),
            ("min_cuda", self.min_cuda, 0.0, 100.0),
            ("min_inet_down", self.min_inet_down, 0.0, 1e6),
            ("bid_margin", self.bid_margin, 0.0, 10.0),
        ):
            check_number("VastAI", name, value, low, high)
        check_urls("VastAI", self, ("api_url",))
        if not self.api_url.rstrip("/").endswith("/api/v0"):
            raise ConfigurationError(
                f"VastAI(api_url={self.api_url!r}) must end in /api/v0 (as {DEFAULT_API_URL} does): the "
                "listing is read from the same server's /api/v1"
            )


def api_key(home: Path | None = None) -> str:
    """The key from ``VAST_API_KEY``, else the vastai CLI's key file; a ConfigurationError
    naming both when neither holds one."""
    key = os.environ.get(KEY_ENV, "").strip()
    if key:
        return key
    base = Path.home() if home is None else home
    for name in KEY_FILES:
        path = base / name
        if path.is_file():
            key = path.read_text().strip()
            if key:
                return key
    raise ConfigurationError(
        f"the VastAI provider needs an API key: export {KEY_ENV}, or run `vastai set api-key <key>` (it writes "
        f"~/{KEY_FILES[0]}); the key is under Account > Keys in the VastAI console"
    )
