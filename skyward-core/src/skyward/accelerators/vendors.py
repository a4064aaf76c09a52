"""The core's accelerator catalog: NVIDIA, AMD, AWS and Google devices.

This is data, contributed by the core's plugin (:mod:`skyward.plugins.builtin`) through
the same ``skyward_accelerators`` hook a third-party plugin would implement. Memory is per device, as vendors quote it.
"""

from __future__ import annotations

from skyward.accelerators.catalog import CatalogEntry
from skyward.accelerators.mig import PROFILES_80GB, PROFILES_A100_40GB, PROFILES_H100_NVL


def _nvidia(
    model: str,
    memory_gb: int,
    *aliases: str,
    form_factor: str | None = None,
    default: bool = False,
) -> CatalogEntry:
    return CatalogEntry(
        model=model,
        vendor="NVIDIA",
        memory_gb=memory_gb,
        form_factor=form_factor,
        aliases=aliases,
        default=default,
    )


NVIDIA_ENTRIES: tuple[CatalogEntry, ...] = (
    _nvidia("T4", 16),
    _nvidia("T4G", 16),
    _nvidia("L4", 24),
    _nvidia("L40", 48),
    _nvidia("L40S", 48),
    _nvidia("A10", 24),
    _nvidia("A10G", 24),
    _nvidia("A40", 48),
    _nvidia("A6000", 48, "RTX-A6000", "RTXA6000"),
    _nvidia("RTX4000-Ada", 20, "RTX4000Ada"),
    _nvidia("RTX6000-Ada", 48, "RTX6000Ada"),
    CatalogEntry("A100", "NVIDIA", 80, mig_profiles=PROFILES_80GB, default=True),
    CatalogEntry("A100", "NVIDIA", 40, mig_profiles=PROFILES_A100_40GB),
    CatalogEntry("H100", "NVIDIA", 80, form_factor="SXM", mig_profiles=PROFILES_80GB, default=True),
    CatalogEntry("H100", "NVIDIA", 80, form_factor="PCIe", mig_profiles=PROFILES_80GB),
    CatalogEntry("H100", "NVIDIA", 94, form_factor="NVL", mig_profiles=PROFILES_H100_NVL),
    _nvidia("H200", 141),
    _nvidia("GH200", 96),
    _nvidia("B100", 192),
    _nvidia("B200", 192),
    _nvidia("B300", 288),
    _nvidia("GB200", 384),
    _nvidia("V100", 16, default=True),
    _nvidia("V100", 32),
)


def _amd(model: str, memory_gb: int, *aliases: str) -> CatalogEntry:
    return CatalogEntry(model=model, vendor="AMD", memory_gb=memory_gb, aliases=aliases)


AMD_ENTRIES: tuple[CatalogEntry, ...] = (
    _amd("MI355X", 288),
    _amd("MI325X", 256),
    _amd("MI300X", 192),
    _amd("MI300A", 128),
    _amd("MI250X", 128),
    _amd("MI250", 128),
    _amd("MI210", 64),
    _amd("MI100", 32),
    _amd("RadeonPro-V710", 28, "V710", "Radeon-Pro-V710"),
    _amd("RadeonPro-V620", 32, "V620", "Radeon-Pro-V620"),
    _amd("RadeonPro-V520", 8, "V520", "Radeon-Pro-V520"),
)

AWS_ENTRIES: tuple[CatalogEntry, ...] = (
    CatalogEntry("Trainium1", "AWS", 32, aliases=("Trainium", "Trn1"), kind="trainium"),
    CatalogEntry("Trainium2", "AWS", 96, aliases=("Trn2",), kind="trainium"),
    CatalogEntry("Inferentia1", "AWS", 8, aliases=("Inferentia", "Inf1"), kind="inferentia"),
    CatalogEntry("Inferentia2", "AWS", 32, aliases=("Inf2",), kind="inferentia"),
)


def _tpu(version: str, memory_gb: int, cores_per_chip: int, *aliases: str) -> CatalogEntry:
    return CatalogEntry(
        model=f"TPU-{version}",
        vendor="Google",
        memory_gb=memory_gb,
        aliases=(version, *aliases),
        kind="tpu",
        cores_per_chip=cores_per_chip,
    )


GOOGLE_ENTRIES: tuple[CatalogEntry, ...] = (
    _tpu("v4", 32, 2),
    _tpu("v5e", 16, 1, "v5litepod", "v5lite"),
    _tpu("v5p", 95, 2),
    _tpu("v6e", 32, 1, "Trillium"),
)

CORE_ENTRIES: tuple[CatalogEntry, ...] = (
    *NVIDIA_ENTRIES,
    *AMD_ENTRIES,
    *AWS_ENTRIES,
    *GOOGLE_ENTRIES,
)
