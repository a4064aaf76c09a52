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
    _nvidia("A30", 24),
)


def _geforce(model: str, memory_gb: int, *aliases: str, default: bool = False) -> CatalogEntry:
    """A GeForce card: ``"RTX4090"`` (``"RTX 4090"``, ``"GeForce RTX 4090"``) and the
    bare number (``"4090"``), which no other model shares; ``-Ti`` and ``-Super`` are
    part of the model (``"RTX 3090 Ti"``, ``"RTX 4080 SUPER"``)."""
    number = model.removeprefix("RTX")
    return _nvidia(model, memory_gb, number, *aliases, default=default)


CONSUMER_ENTRIES: tuple[CatalogEntry, ...] = (
    _geforce("RTX2080-Ti", 11),
    _geforce("RTX3060", 12, default=True),
    _geforce("RTX3060", 8),
    _geforce("RTX3060-Ti", 8),
    _geforce("RTX3070", 8),
    _geforce("RTX3070-Ti", 8),
    _geforce("RTX3080", 10, default=True),
    _geforce("RTX3080", 12),
    _geforce("RTX3080-Ti", 12),
    _geforce("RTX3090", 24),
    _geforce("RTX3090-Ti", 24),
    _geforce("RTX4060", 8),
    _geforce("RTX4060-Ti", 16, default=True),
    _geforce("RTX4060-Ti", 8),
    _geforce("RTX4070", 12),
    _geforce("RTX4070-Super", 12, "RTX4070S", "4070S"),
    _geforce("RTX4070-Ti", 12),
    _geforce("RTX4070-Ti-Super", 16, "RTX4070S-Ti", "RTX4070TiS", "4070S-Ti"),
    _geforce("RTX4080", 16),
    _geforce("RTX4080-Super", 16, "RTX4080S", "4080S"),
    _geforce("RTX4090", 24),
    _geforce("RTX4090D", 24),
    _geforce("RTX5060", 8),
    _geforce("RTX5060-Ti", 16, default=True),
    _geforce("RTX5060-Ti", 8),
    _geforce("RTX5070", 12),
    _geforce("RTX5070-Ti", 16),
    _geforce("RTX5080", 16),
    _geforce("RTX5090", 32),
    _nvidia("TitanRTX", 24, "Titan-RTX"),
)
"""GeForce cards, which marketplaces (VastAI, RunPod) rent most: memory per card as NVIDIA
ships it; a model made in two sizes has both, the common one the default."""

WORKSTATION_ENTRIES: tuple[CatalogEntry, ...] = (
    _nvidia("A2000", 12, "RTX-A2000", "RTXA2000", default=True),
    _nvidia("A2000", 6, "RTX-A2000", "RTXA2000"),
    _nvidia("A4000", 16, "RTX-A4000", "RTXA4000"),
    _nvidia("A4500", 20, "RTX-A4500", "RTXA4500"),
    _nvidia("A5000", 24, "RTX-A5000", "RTXA5000"),
    _nvidia("RTX2000-Ada", 16, "RTX2000Ada"),
    _nvidia("RTX4000-SFF-Ada", 20, "RTX4000-Ada-SFF", "RTX4000SFFAda"),
    _nvidia("RTX4500-Ada", 24, "RTX4500Ada"),
    _nvidia("RTX5000-Ada", 32, "RTX5000Ada"),
    _nvidia("RTX5880-Ada", 48, "RTX5880Ada"),
    _nvidia(
        "RTXPRO6000",
        96,
        "RTX-PRO-6000",
        "RTXPRO6000-Blackwell",
        "RTXPRO6000S",
        "RTXPRO6000WS",
        "RTXPRO6000-Blackwell-Server-Edition",
        "RTXPRO6000-Blackwell-Workstation-Edition",
    ),
    _nvidia("RTXPRO5000", 48, "RTX-PRO-5000", "RTXPRO5000-Blackwell"),
    _nvidia("RTXPRO4000", 24, "RTX-PRO-4000", "RTXPRO4000-Blackwell"),
    _nvidia("Quadro-RTX8000", 48, "Q-RTX8000", "QuadroRTX8000"),
    _nvidia("Quadro-RTX6000", 24, "Q-RTX6000", "QuadroRTX6000"),
)
"""Workstation cards (RTX A-series, RTX Ada, RTX PRO Blackwell, Quadro RTX); the A6000 and
the RTX 4000/6000 Ada are with the data-centre GPUs above."""


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
    *CONSUMER_ENTRIES,
    *WORKSTATION_ENTRIES,
    *AMD_ENTRIES,
    *AWS_ENTRIES,
    *GOOGLE_ENTRIES,
)
