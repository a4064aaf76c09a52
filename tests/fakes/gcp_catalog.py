"""What the fake Google Cloud sells: zones and regions, Compute Engine machine types and GPU
accelerator types per zone, Cloud TPU accelerator types and runtime versions per zone, and
Google's error bodies (see tests/fakes/gcp.py for the rules and their sources).

The numbers are Google's published ones (cloud.google.com/compute/docs/machine-resource,
/compute/docs/gpus, /tpu/docs/regions-zones, /tpu/docs/v4, /tpu/docs/v5p, /tpu/docs/v5e,
/tpu/docs/v6e); the zones are a subset, each holding what Google offers there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fakes.http import Response

# -- Compute Engine ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineType:
    name: str
    cpus: int
    memory_mb: int
    gpus: tuple[str, int] | None = None  # (accelerator type, count) the machine type carries (A2/A3/G2)

    @property
    def family(self) -> str:
        return self.name.split("-", 1)[0]


@dataclass(frozen=True)
class AcceleratorType:
    name: str
    description: str
    max_cards: int
    counts: tuple[int, ...]  # the counts an N1 VM may attach (/compute/docs/gpus#n1-gpus)
    quota: str  # its regional quota metric (/compute/resource-usage#gpu_quota)


MACHINE_TYPES: Mapping[str, MachineType] = {
    m.name: m
    for m in (
        MachineType("n1-standard-1", 1, 3840),
        MachineType("n1-standard-2", 2, 7680),
        MachineType("n1-standard-4", 4, 15360),
        MachineType("n1-standard-8", 8, 30720),
        MachineType("n1-standard-16", 16, 61440),
        MachineType("n2-standard-2", 2, 8192),
        MachineType("n2-standard-4", 4, 16384),
        MachineType("n2-standard-8", 8, 32768),
        MachineType("n2-standard-16", 16, 65536),
        MachineType("g2-standard-4", 4, 16384, ("nvidia-l4", 1)),
        MachineType("g2-standard-8", 8, 32768, ("nvidia-l4", 1)),
        MachineType("g2-standard-24", 24, 98304, ("nvidia-l4", 2)),
        MachineType("a2-highgpu-1g", 12, 87040, ("nvidia-tesla-a100", 1)),
        MachineType("a2-highgpu-8g", 96, 696320, ("nvidia-tesla-a100", 8)),
        MachineType("a3-highgpu-8g", 208, 1916928, ("nvidia-h100-80gb", 8)),
    )
}

ACCELERATOR_TYPES: Mapping[str, AcceleratorType] = {
    a.name: a
    for a in (
        AcceleratorType("nvidia-tesla-t4", "NVIDIA T4", 4, (1, 2, 4), "NVIDIA_T4_GPUS"),
        AcceleratorType("nvidia-tesla-v100", "NVIDIA V100", 8, (1, 2, 4, 8), "NVIDIA_V100_GPUS"),
        AcceleratorType("nvidia-tesla-p100", "NVIDIA Tesla P100", 4, (1, 2, 4), "NVIDIA_P100_GPUS"),
        AcceleratorType("nvidia-l4", "NVIDIA L4", 8, (), "NVIDIA_L4_GPUS"),
        AcceleratorType("nvidia-tesla-a100", "NVIDIA A100 40GB", 16, (), "NVIDIA_A100_GPUS"),
        AcceleratorType("nvidia-h100-80gb", "NVIDIA H100 80GB", 8, (), "NVIDIA_H100_GPUS"),
    )
}
N1_ACCELERATORS = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100")  # /compute/docs/gpus#n1-gpus

_GENERAL = ("n1-standard-1", "n1-standard-2", "n1-standard-4", "n1-standard-8", "n1-standard-16")
_N2 = ("n2-standard-2", "n2-standard-4", "n2-standard-8", "n2-standard-16")
_G2 = ("g2-standard-4", "g2-standard-8", "g2-standard-24")
_A2 = ("a2-highgpu-1g", "a2-highgpu-8g")


@dataclass(frozen=True)
class Zone:
    name: str
    machine_types: tuple[str, ...]
    accelerators: tuple[str, ...]  # GPU accelerator types
    tpus: tuple[str, ...] = ()  # TPU accelerator types

    @property
    def region(self) -> str:
        return self.name.rsplit("-", 1)[0]


ZONES: Mapping[str, Zone] = {
    z.name: z
    for z in (
        Zone(
            "us-central1-a", (*_GENERAL, *_N2, *_G2, *_A2, "a3-highgpu-8g"),
            ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4", "nvidia-tesla-a100", "nvidia-h100-80gb"),
            ("v5litepod-4", "v5litepod-16"),
        ),
        Zone(
            "us-central1-b", (*_GENERAL, *_N2, *_G2, *_A2),
            ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4", "nvidia-tesla-a100"),
        ),
        Zone("us-central1-c", (*_GENERAL, *_N2, *_G2), ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4")),
        Zone("us-central2-b", (*_GENERAL, *_N2), (), ("v4-8", "v4-32")),
        Zone(
            "us-east1-c", (*_GENERAL, *_N2, *_G2),
            ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-l4"),
        ),
        Zone("us-east1-d", (*_GENERAL, *_N2, *_G2), ("nvidia-tesla-t4", "nvidia-l4"), ("v6e-8",)),
        Zone("us-east5-a", (*_GENERAL, *_N2), (), ("v5p-8", "v5p-32")),
        Zone(
            "europe-west4-a", (*_GENERAL, *_N2, *_G2, *_A2, "a3-highgpu-8g"),
            ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-l4", "nvidia-tesla-a100", "nvidia-h100-80gb"),
            ("v6e-8",),
        ),
        Zone("europe-west4-b", (*_GENERAL, *_N2), ("nvidia-tesla-t4",), ("v5litepod-4", "v5litepod-16")),
    )
}  # fmt: skip
REGIONS: tuple[str, ...] = tuple(dict.fromkeys(z.region for z in ZONES.values()))

# Regional quotas every project starts with here (Google's defaults vary per project; these
# are generous so that only ``set_quota`` makes a test hit one).
DEFAULT_QUOTAS: Mapping[str, float] = {
    "CPUS": 2400, "PREEMPTIBLE_CPUS": 2400, "INSTANCES": 6000, "IN_USE_ADDRESSES": 690,
    **{a.quota: 64 for a in ACCELERATOR_TYPES.values()},
    **{f"PREEMPTIBLE_{a.quota}": 64 for a in ACCELERATOR_TYPES.values()},
}  # fmt: skip

# Project-wide quotas (``projects.get``): GPUS_ALL_REGIONS is 0 in many new projects until raised
# (/compute/resource-usage#gpu_quota); generous here as well.
GLOBAL_QUOTAS: Mapping[str, float] = {"GPUS_ALL_REGIONS": 64, "FIREWALLS": 200, "NETWORKS": 15}

# Public images (project -> families); /compute/docs/images/os-details and the Deep Learning VM docs.
IMAGE_FAMILIES: Mapping[str, tuple[str, ...]] = {
    "debian-cloud": ("debian-12", "debian-11"),
    "ubuntu-os-cloud": ("ubuntu-2204-lts", "ubuntu-2404-lts-amd64", "ubuntu-2204-lts-amd64"),
    "ubuntu-os-accelerator-images": ("ubuntu-accelerator-2204-amd64-with-nvidia-550",),
    "deeplearning-platform-release": ("common-cu124-debian-11", "common-cu121-debian-11-py310", "common-cpu"),
    "cos-cloud": ("cos-stable",),
}

# -- Cloud TPU --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TpuType:
    """A TPU slice. ``v4-N``/``v5p-N`` count TensorCores (2 a chip), ``v5litepod-N``/``v6e-N``
    count chips (/tpu/docs/system-architecture-tpu-vm#versions)."""

    name: str

    @property
    def generation(self) -> str:
        return self.name.rsplit("-", 1)[0]

    @property
    def chips(self) -> int:
        n = int(self.name.rsplit("-", 1)[1])
        return n // 2 if self.generation in ("v4", "v5p") else n

    @property
    def hosts(self) -> int:
        """VMs in the slice: v4 and v5p hosts have 4 chips each (/tpu/docs/v4 "v4-32: 16 chips,
        4 VMs"; /tpu/docs/v5p "v5p-32: 4 VMs"); v5e and v6e slices of up to 8 chips are one VM,
        larger ones 4 chips a VM (/tpu/docs/v5e and /tpu/docs/v6e tables: v5litepod-8 1 VM,
        v5litepod-16 4 VMs; v6e-8 1 VM, v6e-16 4 VMs)."""
        if self.generation in ("v4", "v5p"):
            return max(1, self.chips // 4)
        return 1 if self.chips <= 8 else self.chips // 4

    @property
    def topology(self) -> str:
        shapes = {4: "2x2x1", 16: "2x2x4", 8: "2x4", 1: "1x1"}
        if self.generation in ("v5litepod", "v6e"):
            return {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4"}.get(self.chips, f"{self.chips}")
        return shapes.get(self.chips, f"{self.chips}")


# the runtime (software) version each generation boots (/tpu/docs/runtimes)
TPU_RUNTIMES: Mapping[str, tuple[str, ...]] = {
    "v4": ("tpu-ubuntu2204-base", "tpu-vm-v4-base"),
    "v5p": ("v2-alpha-tpuv5",),
    "v5litepod": ("v2-alpha-tpuv5-lite",),
    "v6e": ("v2-alpha-tpuv6e",),
}

# -- names, links, errors -------------------------------------------------------------------

RFC1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # /compute/docs/naming-resources


def rfc1035_problem(what: str, name: Any) -> str | None:
    if not isinstance(name, str) or not RFC1035.match(name):
        return (
            f"Invalid value for field '{what}': '{name}'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{{0,61}}"
            "[a-z0-9])?)'"
        )
    return None


_STATUS = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
    503: "UNAVAILABLE",
}  # fmt: skip
_REASON = {
    400: "invalid",
    401: "required",
    403: "forbidden",
    404: "notFound",
    409: "alreadyExists",
    412: "conditionNotMet",
}


def gcp_error(code: int, message: str, reason: str | None = None) -> Response:
    """Google's JSON error body (cloud.google.com/apis/design/errors#http_mapping): ``code``,
    ``message``, ``status`` and the legacy ``errors[]`` with ``reason`` that Compute sends."""
    errors = [{"message": message, "domain": "global", "reason": reason or _REASON.get(code, "backendError")}]
    return Response(
        code, {"error": {"code": code, "message": message, "errors": errors, "status": _STATUS.get(code, "UNKNOWN")}}
    )


def not_found(link: str) -> Response:
    return gcp_error(404, f"The resource '{link}' was not found")


def last_segment(value: str) -> str:
    """``zones/us-central1-a/machineTypes/n1-standard-1`` (a partial or full URL) -> ``n1-standard-1``."""
    return value.rstrip("/").rsplit("/", 1)[-1]
