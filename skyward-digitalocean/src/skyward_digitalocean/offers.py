"""DigitalOcean sizes as skyward instance types, and the image each one boots.

Pure functions over the JSON of ``GET /v2/sizes``: a size has ``slug``, ``vcpus``,
``memory`` (MiB), ``price_hourly`` (USD), ``regions`` where it can be created,
``available`` and, for GPU droplets, ``gpu_info`` (``count``, ``model``, ``vram``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skyward.providers import MIB, InstanceType

CPU_IMAGE = "ubuntu-24-04-x64"
NVIDIA_IMAGE = "gpu-h100x1-base"  # DO's AI/ML-ready NVIDIA image, for every single-GPU NVIDIA size
NVIDIA_MULTI_IMAGE = "gpu-h100x8-base"  # the same for 8-GPU sizes (NVLink/fabric manager set up)
AMD_IMAGE = "gpu-amd-base"  # DO's AI/ML-ready AMD image (ROCm)

# gpu_info.model as the API spells it -> catalog spelling. DigitalOcean's H100s are SXM.
_KNOWN_MODELS: Mapping[str, str] = {
    "nvidia_h100": "H100-80GB-SXM",
    "nvidia_h200": "H200",
    "nvidia_l40s": "L40S",
    "nvidia_rtx_4000_ada": "RTX4000-Ada",
    "nvidia_rtx_6000_ada": "RTX6000-Ada",
    "nvidia_a100": "A100",
    "nvidia_b300": "B300",
    "amd_mi300x": "MI300X",
    "amd_mi325x": "MI325X",
}
_VENDOR_PREFIX = re.compile(r"^(nvidia|amd)[_\s-]+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DropletSize:
    """One size as offered in the pool's region: the instance type plus what DO needs."""

    instance: InstanceType
    vendor: str | None  # "nvidia", "amd", None for CPU sizes
    regions: tuple[str, ...]
    disk_gb: int = 0  # its disk: a snapshot whose min_disk_size is larger cannot start it

    @property
    def slug(self) -> str:
        return self.instance.name


def accelerator_name(model: str) -> str:
    """A catalog spelling for DO's ``gpu_info.model`` (unknown models keep DO's text)."""
    key = model.strip().lower().replace(" ", "_").replace("-", "_")
    if key in _KNOWN_MODELS:
        return _KNOWN_MODELS[key]
    bare = _VENDOR_PREFIX.sub("", model.strip())
    return bare.replace("_", "-").upper() or model


def _vendor(model: str) -> str | None:
    match = _VENDOR_PREFIX.match(model.strip())
    return match.group(1).lower() if match else None


def parse_size(size: Mapping[str, Any], region: str) -> DropletSize | None:
    """The size as an InstanceType in ``region``, or None when it cannot be described."""
    try:
        slug = str(size["slug"])
        vcpus = int(size["vcpus"])
        memory = int(size["memory"]) * MIB
        price = float(size["price_hourly"])
    except (KeyError, TypeError, ValueError):
        return None
    if vcpus < 1 or memory < 1 or price < 0:
        return None
    regions = tuple(str(r) for r in size.get("regions") or ())
    gpu = size.get("gpu_info") or {}
    count = int(gpu.get("count") or 0)
    model = str(gpu.get("model") or "")
    accelerator = accelerator_name(model) if count > 0 and model else None
    instance = InstanceType(
        name=slug,
        vcpus=vcpus,
        memory=memory,
        on_demand_price=price,
        accelerator=accelerator,
        accelerator_count=count if accelerator else 0,
        spot_price=None,  # DigitalOcean has no spot market
        region=region,
        available=bool(size.get("available", True)) and region in regions,
    )
    disk = size.get("disk")
    return DropletSize(
        instance=instance,
        vendor=_vendor(model) if accelerator else None,
        regions=regions,
        disk_gb=int(disk) if isinstance(disk, int | float) else 0,
    )


def parse_sizes(sizes: Iterable[Mapping[str, Any]], region: str) -> list[DropletSize]:
    return [parsed for parsed in (parse_size(s, region) for s in sizes) if parsed is not None]


def image_for(size: DropletSize, override: str | None = None) -> str:
    """The image a droplet of ``size`` boots: GPU sizes need the vendor's GPU image
    (drivers and toolkit preinstalled), CPU sizes plain Ubuntu."""
    if override is not None:
        return override
    if size.instance.accelerator is None:
        return CPU_IMAGE
    if size.vendor == "amd":
        return AMD_IMAGE
    return NVIDIA_MULTI_IMAGE if size.instance.accelerator_count >= 8 else NVIDIA_IMAGE


def capacity_hint(size: DropletSize, region: str, known_regions: Iterable[str]) -> str:
    """What to try when ``size`` has no capacity in ``region``."""
    others = [r for r in size.regions if r != region and r in set(known_regions)]
    where = f"DigitalOcean(region=...) one of {', '.join(others)}" if others else "another region"
    return f"try {where}, another size or accelerator, fewer nodes, or again later"
