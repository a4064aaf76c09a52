"""RunPod GPU types as instance types (pure).

RunPod sells GPUs by type (``"NVIDIA H100 80GB HBM3"``, shown as ``"H100 SXM"``), per GPU
and per hour, in two clouds: ``secure`` (RunPod's data centres) and ``community``
(strangers' hosts), each with an on-demand and a spot price. A pod gets as many vCPUs and
as much memory as it asks for (``minVcpuCount``, ``minMemoryInGb``) where a host has
them; so a type here is ``<n>x <display name>`` (what ``machine=`` names) sized as the
node asks, priced ``n`` times the GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skyward.providers import GIB, InstanceType
from skyward.providers.cloud.marketplace import catalog_gpu

MAX_GPUS = 8  # a pod holds at most one host's GPUs


@dataclass(frozen=True, slots=True)
class PodType:
    gpu_type_id: str
    gpus: int
    instance: InstanceType


def _price(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def pod_types(
    data: Iterable[Mapping[str, Any]], cloud: str, vcpus: int, memory: int, bid_margin: float
) -> list[PodType]:
    """Every GPU type ``cloud`` sells now, for 1..``maxGpuCount`` GPUs, sized ``vcpus``
    and ``memory`` (bytes)."""
    found = []
    for gpu in data:
        ident, name = gpu.get("id"), str(gpu.get("displayName") or "")
        price = _price(gpu.get(f"{cloud}Price"))
        if not isinstance(ident, str) or not name or not gpu.get(f"{cloud}Cloud") or price is None:
            continue
        spot = _price(gpu.get(f"{cloud}SpotPrice"))
        memory_gb = _price(gpu.get("memoryInGb"))
        accelerator = catalog_gpu(ident, memory_gb) or catalog_gpu(name, memory_gb)
        most = gpu.get("maxGpuCount")
        for count in range(1, min(MAX_GPUS, max(1, most if isinstance(most, int) else 1)) + 1):
            instance = InstanceType(
                name=f"{count}x {name}",
                vcpus=vcpus,
                memory=memory,
                on_demand_price=round(price * count, 4),
                accelerator=accelerator,
                accelerator_count=count if accelerator else 0,
                spot_price=round(spot * (1 + bid_margin) * count, 4) if spot else None,
                region=cloud,
            )
            found.append(PodType(ident, count, instance))
    return found


def default_size(cpu: int | None, memory: int | None) -> tuple[int, int]:
    """What a pod asks for when the node names no size: 8 vCPUs and 30 GiB, what RunPod's
    smallest GPU pods come with."""
    return (cpu or 8, memory or 30 * GIB)
