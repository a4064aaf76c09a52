"""This machine's NVIDIA GPUs, and how the Local provider shares them among its nodes.

:func:`detect_gpus` asks NVML (``nvidia-ml-py``, optional: ``pip install
'skyward-core[nvidia]'``) which GPUs there are; without the package or a driver it
returns an empty list. :func:`assign_gpus` is pure: it gives each local node the
indices to put in ``CUDA_VISIBLE_DEVICES``. The indices are NVML's, which follow PCI bus
order, so set ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` next to them for CUDA to agree.
"""

from __future__ import annotations

import importlib
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skyward.accelerators.catalog import Catalog, CatalogEntry, current_catalog
from skyward.accelerators.parse import entry_for, parse_accelerator
from skyward.accelerators.spec import Accelerator
from skyward.errors import ConfigurationError
from skyward.units import GIB

_WORDS = re.compile(r"[\s\-_]+")


@dataclass(frozen=True, slots=True)
class LocalGPU:
    """One GPU as NVML reports it: its index, marketing name and memory in bytes."""

    index: int
    name: str
    memory: int
    uuid: str = ""


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def detect_gpus(*, respect_visible_devices: bool = True) -> list[LocalGPU]:
    """The NVIDIA GPUs of this machine; ``[]`` without nvidia-ml-py or a working driver.

    With ``respect_visible_devices`` (the default), a ``CUDA_VISIBLE_DEVICES`` set in
    this process limits the result to the GPUs it lists, as CUDA would.
    """
    try:
        nvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return []
    try:
        nvml.nvmlInit()
    except (nvml.NVMLError, OSError):
        return []
    try:
        gpus: list[LocalGPU] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                LocalGPU(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    memory=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                )
            )
    except nvml.NVMLError:
        return []
    finally:
        nvml.nvmlShutdown()
    if respect_visible_devices:
        return visible_gpus(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return gpus


def visible_gpus(gpus: Sequence[LocalGPU], visible: str | None) -> list[LocalGPU]:
    """The GPUs a ``CUDA_VISIBLE_DEVICES`` value lets through, in its order.

    Entries are indices or UUIDs (``GPU-...``, a unique prefix is enough); like CUDA,
    the list ends at the first entry that names no GPU. ``None`` lets all through.
    """
    if visible is None:
        return list(gpus)
    chosen: list[LocalGPU] = []
    for item in (part.strip() for part in visible.split(",")):
        if item.isdigit():
            found = [g for g in gpus if g.index == int(item)]
        elif item.startswith("GPU-"):
            found = [g for g in gpus if g.uuid.startswith(item)]
        else:
            found = []
        if len(found) != 1 or found[0] in chosen:
            break
        chosen.append(found[0])
    return chosen


def identify_gpu(gpu: LocalGPU, catalog: Catalog | None = None) -> CatalogEntry | None:
    """The catalog variant of an NVML GPU (``"NVIDIA A100-SXM4-40GB"`` -> A100 40GB).

    The model comes from the words of the name, the memory variant is the nearest to
    the reported memory, and a form-factor word (``PCIe``, ``NVL``, ``SXM5``) picks the
    form factor. ``None`` when the catalog has no such NVIDIA model.
    """
    cat = current_catalog() if catalog is None else catalog
    words = [w for w in _WORDS.split(gpu.name) if w]
    model: str | None = None
    end = 0
    for length in range(len(words), 0, -1):
        for start in range(len(words) - length + 1):
            found = cat.model_for("".join(words[start : start + length]))
            if found is not None and cat.variants(found)[0].vendor == "NVIDIA":
                model, end = found, start + length
                break
        if model is not None:
            break
    if model is None:
        return None
    gib = gpu.memory / GIB
    memory_gb = min(cat.memories(model), key=lambda m: abs(m - gib))
    form_factor = next((ff for w in words[end:] if (ff := cat.form_factor_for(model, w)) is not None), None)
    return cat.preferred(model, memory_gb, form_factor) or cat.preferred(model, memory_gb)


def _fits(entry: CatalogEntry | None, request: Accelerator) -> bool:
    return (
        entry is not None
        and entry.model == request.name
        and (request.memory_gb is None or entry.memory_gb == request.memory_gb)
        and (request.form_factor is None or entry.form_factor == request.form_factor)
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe_gpus(gpus: Sequence[LocalGPU]) -> str:
    """``"2x NVIDIA A100-SXM4-80GB (0, 1), 1x Tesla T4 (2)"``, or ``"none"``."""
    if not gpus:
        return "none"
    counts = Counter(g.name for g in gpus)
    return ", ".join(
        f"{n}x {name} ({', '.join(str(g.index) for g in gpus if g.name == name)})" for name, n in counts.items()
    )


def assign_gpus(
    nodes: int,
    accelerator: str | Accelerator | None,
    detected: Sequence[LocalGPU],
    *,
    catalog: Catalog | None = None,
) -> list[list[int]]:
    """The GPU indices (for ``CUDA_VISIBLE_DEVICES``) of each of ``nodes`` local nodes.

    No accelerator: every node gets ``[]`` (no GPU). Otherwise each node gets its own
    ``count`` GPUs of the requested model (and memory or form factor, if named), taken
    in index order. Raises :class:`ConfigurationError` when the machine has too few,
    for MIG (not supported locally) and for accelerators that are not NVIDIA GPUs.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigurationError(f"nodes must be a positive int; got {nodes!r}")
    if accelerator is None:
        return [[] for _ in range(nodes)]
    cat = current_catalog() if catalog is None else catalog
    request = parse_accelerator(accelerator, catalog=cat)
    if request.mig:
        raise ConfigurationError(
            f"MIG partitioning is not supported on the Local provider "
            f"(accelerator={str(request)!r}); drop mig= or use a cloud provider"
        )
    entry = entry_for(request, catalog=cat)
    if entry is None or entry.vendor != "NVIDIA":
        raise ConfigurationError(
            f"accelerator={str(request)!r} on the Local provider: only NVIDIA GPUs can be given to local nodes"
        )
    usable = [g for g in detected if _fits(identify_gpu(g, cat), request)]
    needed = request.count * nodes
    if len(usable) < needed:
        found = describe_gpus(detected)
        if not detected:
            found += " (GPUs are found through nvidia-ml-py and the NVIDIA driver)"
        raise ConfigurationError(
            f"accelerator={str(request)!r} on the Local provider needs "
            f"{needed} NVIDIA {request.variant} GPU{'s' if needed != 1 else ''} "
            f"({request.count} per node x {_plural(nodes, 'node')}); this machine has: {found}"
        )
    return [[g.index for g in usable[k * request.count : (k + 1) * request.count]] for k in range(nodes)]
