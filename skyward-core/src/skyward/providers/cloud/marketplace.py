"""What the container marketplaces (VastAI, RunPod) share (pure).

Both rent a GPU host's container, not a VM: an image plus a start-up command, ports the
host maps to others, no tags and no firewall API. This holds the rules both plugins
follow, once:

* :data:`DEFAULT_CUDA_IMAGE`: the image a node runs unless the config names another;
* the container's start command: ``skyward.providers.cloud.marketplace_start``;
* :func:`pool_label` / :func:`parse_pool_label`: the one name a container carries (its
  VastAI label, its RunPod pod name), holding the pool id, its expiry and the node;
* :func:`catalog_gpu`: the accelerator catalog's name for a marketplace's GPU name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from skyward.accelerators.catalog import Catalog, current_catalog
from skyward.errors import ConfigurationError
from skyward.providers.cloud.naming import PoolMark

DEFAULT_CUDA_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
"""Ubuntu 22.04 with CUDA 12.4, cuDNN 9 and Python 3.11: runs on every host whose driver
supports CUDA >= 12.4 (the offer search asks for that), and already holds the python
and CA certificates the bootstrap needs, so a node spends its first minute on skyward's
own packages rather than on apt."""

MIN_CUDA = 12.4
"""The CUDA version :data:`DEFAULT_CUDA_IMAGE` needs of the host's driver."""

_POOL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_LABEL = re.compile(r"^skyward-(?P<pool>[a-z0-9][a-z0-9-]{0,40}?)-(?P<expires>\d{9,11})-(?P<node>\d{1,4})$")


def check_container(owner: str, image: object, disk_gb: object) -> None:
    """The settings every marketplace container has: an image name and whole GB of disk
    (8 GB: the smallest disk the CUDA image and the bootstrap's packages fit on)."""
    if not isinstance(image, str) or not image.strip():
        raise ConfigurationError(f"{owner}(image={image!r}) must name a container image")
    if isinstance(disk_gb, bool) or not isinstance(disk_gb, int) or not 8 <= disk_gb <= 10_000:
        raise ConfigurationError(f"{owner}(disk_gb={disk_gb!r}) must be whole GB between 8 and 10000")


def check_number(owner: str, name: str, value: object, low: float, high: float) -> None:
    """``value`` is a real number (not a bool) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigurationError(f"{owner}({name}={value!r}) must be a number from {low:g} to {high:g}")


def pool_label(pool_id: str, expires: int, node: int) -> str:
    """``skyward-<pool id>-<expiry>-<node>``: what a container of the pool is called."""
    if not _POOL_ID.match(pool_id):
        raise ConfigurationError(f"pool id {pool_id!r} cannot name a container: use lowercase letters, digits, '-'")
    return f"skyward-{pool_id}-{expires}-{node}"


def parse_pool_label(label: str | None) -> PoolMark | None:
    match = _LABEL.match(label or "")
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


def pool_members(listing: Iterable[Mapping[str, Any]], label_key: str, pool_id: str) -> list[str]:
    """The ids of the containers in ``listing`` whose label (under ``label_key``: VastAI's
    ``label``, RunPod's ``name``) marks them as ``pool_id``'s: what a pool's teardown
    verifies is gone, found the same way on both marketplaces."""
    return [
        str(raw["id"])
        for raw in listing
        if (mark := parse_pool_label(str(raw.get(label_key) or ""))) is not None and mark.pool_id == pool_id
    ]


# The marketplaces' spellings of data-centre GPUs, upper-cased without spaces or dashes,
# -> the catalog's model (with the form factor the name implies). Any other name is looked
# up in the catalog itself: "RTX 4090", "RTX A5000", "RTX 4070S Ti" (VastAI) and "NVIDIA
# GeForce RTX 3090", "RTX 4080 SUPER" (RunPod) are spellings the catalog knows.
_MODELS = {
    "H100SXM": "H100-SXM",
    "H100SXM5": "H100-SXM",
    "H10080GBHBM3": "H100-SXM",
    "H100PCIE": "H100-PCIe",
    "H100NVL": "H100-NVL",
    "H200": "H200",
    "H200SXM": "H200",
    "H200NVL": "H200",
    "GH200": "GH200",
    "B200": "B200",
    "A100SXM4": "A100",
    "A100SXM": "A100",
    "A100PCIE": "A100",
    "A100X": "A100",
    "A10080GBPCIE": "A100",
    "A100": "A100",
    "RTXA6000": "A6000",
    "A6000": "A6000",
    "A40": "A40",
    "A10": "A10",
    "L40S": "L40S",
    "L40": "L40",
    "L4": "L4",
    "RTX6000ADA": "RTX6000-Ada",
    "RTX4000ADA": "RTX4000-Ada",
    "TESLAV100": "V100",
    "V100": "V100",
    "TESLAT4": "T4",
    "T4": "T4",
}


def catalog_gpu(name: str, memory_gb: float | None = None, *, catalog: Catalog | None = None) -> str | None:
    """The catalog's spelling of a marketplace GPU (``"A100 SXM4"`` with 80 GB ->
    ``"A100-80GB"``, ``"NVIDIA H100 80GB HBM3"`` -> ``"H100-SXM"``, ``"RTX A6000"`` ->
    ``"A6000"``, ``"NVIDIA GeForce RTX 4090"`` -> ``"RTX4090"``, ``"RTX 3060"`` with 12 GB
    -> ``"RTX3060-12GB"``), or None for one the catalog does not know. A model made in
    several memory sizes gets the one nearest ``memory_gb``."""
    cat = current_catalog() if catalog is None else catalog
    key = re.sub(r"[\s_-]", "", name.upper()).removeprefix("NVIDIA").removeprefix("GEFORCE").removesuffix("GENERATION")
    model = _MODELS.get(key) or cat.model_for(key)
    if model is None:
        return None
    sizes = cat.memories(model)  # none for "H100-SXM": its form factor fixes the memory
    if len(sizes) > 1 and memory_gb:
        nearest = min(sizes, key=lambda size: abs(size - memory_gb))
        return f"{model}-{nearest}GB"
    return model


def reap_reason(mark: PoolMark | None, stopped: bool, now: float, own_pool: str | None) -> str | None:
    """Why a container of another pool may be destroyed at a pool's start (None: keep
    it): stopped (skyward never starts one again; VastAI bills a stopped one's disk) or
    past its pool's expiry. Containers without a skyward label are never touched."""
    if mark is None or mark.pool_id == own_pool:
        return None
    if stopped:
        return "stopped (a stopped container still bills its disk)"
    if now > mark.expires:
        return f"its pool {mark.pool_id} expired at {mark.expires}"
    return None
