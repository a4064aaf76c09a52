"""Which EC2 instance families carry which accelerator, and how EC2 names devices.

Pure data and pure functions. The families follow AWS's accelerated-computing instance
pages and the accelerators guide (T4 on g4dn, A10G on g5, L4 on g6, L40S on g6e, A100 on
p4d/p4de, H100 on p5, H200 on p5e/p5en, Trainium on trn1/trn2, Inferentia on inf1/inf2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyward.errors import ConfigurationError
from skyward.providers import Accelerator, Catalog, CatalogEntry

# catalog model -> EC2 families that carry it, cheapest-generation first
ACCELERATOR_FAMILIES: Mapping[str, tuple[str, ...]] = {
    "T4": ("g4dn",),
    "T4G": ("g5g",),
    "A10G": ("g5",),
    "L4": ("g6", "gr6"),
    "L40S": ("g6e",),
    "A100": ("p4d", "p4de"),
    "H100": ("p5",),
    "H200": ("p5e", "p5en"),
    "B200": ("p6-b200",),
    "V100": ("p3", "p3dn"),
    "RadeonPro-V520": ("g4ad",),
    "Trainium1": ("trn1", "trn1n"),
    "Trainium2": ("trn2",),
    "Inferentia1": ("inf1",),
    "Inferentia2": ("inf2",),
}

# What a CPU-only pool picks from: current general-purpose, compute- and memory-optimised
# families (burstable t3 is left out: a long computation would run out of CPU credits).
CPU_FAMILIES: tuple[str, ...] = ("c7i", "m7i", "r7i", "c6i", "m6i", "r6i", "c5", "m5", "r5")

# A CPU-only pool that names no size gets at least this much: the node's environment,
# agent and a worker need a few GiB, and 2 vCPUs are the smallest non-burstable size.
DEFAULT_MIN_VCPUS = 2
DEFAULT_MIN_MEMORY = 4 * 2**30


def family_of(instance_type: str) -> str:
    """``"g4dn.xlarge"`` -> ``"g4dn"``; ``"p6-b200.48xlarge"`` -> ``"p6-b200"``."""
    return instance_type.split(".", 1)[0]


def families_for(accelerator: Accelerator) -> tuple[str, ...]:
    """The EC2 families that offer ``accelerator``'s model; a clear error when none does."""
    families = ACCELERATOR_FAMILIES.get(accelerator.name)
    if families is None:
        offered = ", ".join(sorted(ACCELERATOR_FAMILIES))
        raise ConfigurationError(
            f"accelerator {str(accelerator)!r}: AWS offers no instance with {accelerator.name}; "
            f"accelerators on AWS: {offered}"
        )
    return families


def type_patterns(families: tuple[str, ...]) -> list[str]:
    """``describe_instance_types`` filter values for whole families."""
    return [f"{family}.*" for family in families]


def devices_of(description: Mapping[str, Any]) -> tuple[str, str, int, int] | None:
    """(vendor, device name, count, memory MiB per device) from an instance description.

    GPUs come from ``GpuInfo``; Trainium and Inferentia from ``NeuronInfo`` (or, for
    older descriptions of inf1, ``InferenceAcceleratorInfo``). ``None`` for CPU-only.
    """
    gpus = (description.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        gpu = gpus[0]
        count = sum(int(g.get("Count", 0)) for g in gpus)
        return (
            str(gpu.get("Manufacturer", "")),
            str(gpu["Name"]),
            count,
            int(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)),
        )
    neuron = (description.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if neuron:
        device = neuron[0]
        count = sum(int(d.get("Count", 0)) for d in neuron)
        memory = int(device.get("MemoryInfo", {}).get("SizeInMiB", 0))
        return "AWS", str(device["Name"]), count, memory
    inference = (description.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if inference:
        device = inference[0]
        count = sum(int(d.get("Count", 0)) for d in inference)
        return "AWS", str(device["Name"]), count, int(device.get("MemoryInfo", {}).get("SizeInMiB", 0))
    return None


def catalog_entry_for(name: str, memory_mib: int, catalog: Catalog) -> CatalogEntry | None:
    """The catalog variant EC2's device name and memory stand for.

    EC2 reports usable memory (an L4 shows 22,888 MiB, an L40S 45,776 MiB), so the
    variant whose nominal memory is nearest wins; equal distances go to the model's
    default variant (an 80 GB H100 on p5 is the SXM part).
    """
    model = catalog.model_for(name)
    if model is None:
        return None
    variants = catalog.variants(model)
    if not variants:
        return None
    gb = memory_mib / 1024
    return min(variants, key=lambda e: (abs(e.memory_gb - gb), not e.default))
