"""MIG (Multi-Instance GPU) profiles and the validation of a partition layout.

A MIG-capable GPU has 7 compute slices and 8 memory slices. A profile such as
``3g.40gb`` takes 3 compute slices and, on an 80GB GPU, 4 memory slices (40GB). A
layout is valid when its partitions fit both budgets and no profile is used more often
than the GPU allows. This is slice accounting only: the exact placement is left to
``nvidia-smi mig`` on the node.

``mig="3g.40gb"`` means that profile repeated as many times as it fits (2 partitions);
``mig=["3g.40gb", "4g.40gb"]`` means exactly those partitions. As text (the part after
``@`` in ``"H100@3g.40gb"``), ``+`` separates partitions and ``Nx`` repeats one:
``"1x3g.40gb"`` is a single partition, ``"2x1g.10gb+3g.40gb"`` three.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from skyward.errors import ConfigurationError

COMPUTE_SLICES = 7
MEMORY_SLICES = 8


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG profile of one GPU variant.

    ``max_instances`` is how many of this profile fit on an otherwise empty GPU (the
    "Workers" column of the profile tables).
    """

    name: str
    compute_slices: int
    memory_slices: int
    memory_gb: int
    max_instances: int


def _profile(name: str, compute: int, memory_slices: int, max_instances: int) -> MigProfile:
    memory_gb = int(name.rsplit(".", 1)[1].removesuffix("gb"))
    return MigProfile(name, compute, memory_slices, memory_gb, max_instances)


# H100 80GB (SXM and PCIe) and A100 80GB share the same profiles.
PROFILES_80GB: tuple[MigProfile, ...] = (
    _profile("1g.10gb", 1, 1, 7),
    _profile("1g.20gb", 1, 2, 4),
    _profile("2g.20gb", 2, 2, 3),
    _profile("3g.40gb", 3, 4, 2),
    _profile("4g.40gb", 4, 4, 1),
    _profile("7g.80gb", 7, 8, 1),
)

PROFILES_A100_40GB: tuple[MigProfile, ...] = (
    _profile("1g.5gb", 1, 1, 7),
    _profile("2g.10gb", 2, 2, 3),
    _profile("3g.20gb", 3, 4, 2),
    _profile("4g.20gb", 4, 4, 1),
)

# H100 NVL (94GB): same slice geometry, larger memory slices.
PROFILES_H100_NVL: tuple[MigProfile, ...] = (
    _profile("1g.12gb", 1, 1, 7),
    _profile("1g.24gb", 1, 2, 4),
    _profile("2g.24gb", 2, 2, 3),
    _profile("3g.47gb", 3, 4, 2),
    _profile("4g.47gb", 4, 4, 1),
    _profile("7g.94gb", 7, 8, 1),
)


def normalize_profile_name(name: str) -> str:
    """``" 3G.40GB "`` -> ``"3g.40gb"``."""
    return name.strip().casefold()


def profile_names(profiles: Sequence[MigProfile]) -> str:
    return ", ".join(p.name for p in profiles)


_ITEM = re.compile(r"^(?:(\d+)\s*[x*]\s*)?([0-9]+g\.[0-9]+gb)$")


def parse_mig_text(text: str) -> str | list[str]:
    """``"3g.40gb"`` -> ``"3g.40gb"`` (fill the GPU); ``"2x1g.10gb+3g.40gb"`` -> a list."""
    items = [normalize_profile_name(i) for i in text.split("+")]
    names: list[str] = []
    for item in items:
        match = _ITEM.match(item)
        if match is None or (match[1] is not None and int(match[1]) < 1):
            raise ConfigurationError(
                f"cannot read MIG partition {item!r} in {text!r}: write a profile such as "
                "'3g.40gb' (fills the GPU), or partitions joined by '+' with an optional "
                "count of at least 1, e.g. '1x3g.40gb' or '2x1g.10gb+3g.40gb'"
            )
        if len(items) == 1 and match[1] is None:
            return match[2]
        names.extend([match[2]] * int(match[1] or 1))
    return names


def requested_profiles(spec: str | Sequence[str]) -> tuple[str | None, list[str]]:
    """Split a ``mig=`` value into (profile to fill the GPU with, or explicit partitions)."""
    parsed = parse_mig_text(spec) if isinstance(spec, str) else list(spec)
    if isinstance(parsed, str):
        return parsed, [parsed]
    names = [normalize_profile_name(n) for n in parsed]
    if not names:
        raise ConfigurationError(
            "mig=[] asks for no partitions; give a profile such as '3g.40gb' or a list of them, or leave mig unset"
        )
    return None, names


def expand_mig(spec: str | Sequence[str], profiles: Sequence[MigProfile], gpu: str) -> tuple[str, ...]:
    """The partitions of one GPU that ``spec`` asks for, validated against ``profiles``.

    A single profile name expands to that profile repeated ``max_instances`` times; a
    sequence is taken as the exact list of partitions. ``gpu`` names the GPU variant in
    error messages.
    """
    if not profiles:
        raise ConfigurationError(f"{gpu} does not support MIG partitioning")
    by_name = {p.name: p for p in profiles}
    fill, names = requested_profiles(spec)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ConfigurationError(
            f"MIG profile {unknown[0]!r} is not valid for {gpu}; valid profiles: {profile_names(profiles)}"
        )
    if fill is not None:
        return (fill,) * by_name[fill].max_instances
    check_layout(names, profiles, gpu)
    return tuple(names)


def check_layout(names: Sequence[str], profiles: Sequence[MigProfile], gpu: str) -> None:
    """Raise :class:`ConfigurationError` unless ``names`` fit on one GPU."""
    by_name = {p.name: p for p in profiles}
    chosen = [by_name[n] for n in names]
    for name, used in Counter(names).items():
        limit = by_name[name].max_instances
        if used > limit:
            raise ConfigurationError(
                f"MIG profile {name!r} fits at most {limit} time(s) on {gpu}; {used} were requested"
            )
    compute = sum(p.compute_slices for p in chosen)
    if compute > COMPUTE_SLICES:
        raise ConfigurationError(
            f"MIG partitions {'+'.join(names)} need {compute} compute slices; {gpu} has {COMPUTE_SLICES}"
        )
    memory = sum(p.memory_slices for p in chosen)
    if memory > MEMORY_SLICES:
        gb = sum(p.memory_gb for p in chosen)
        raise ConfigurationError(
            f"MIG partitions {'+'.join(names)} need {memory} of {MEMORY_SLICES} memory "
            f"slices (about {gb}GB); that exceeds the memory of {gpu}"
        )


def format_mig(partitions: Sequence[str]) -> str:
    """``("3g.40gb", "3g.40gb", "1g.10gb")`` -> ``"2x3g.40gb+1x1g.10gb"``.

    Always the explicit form, so it reads back to the same partitions without knowing
    the GPU.
    """
    runs: list[tuple[str, int]] = []
    for name in partitions:
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + 1)
        else:
            runs.append((name, 1))
    return "+".join(f"{count}x{name}" for name, count in runs)
