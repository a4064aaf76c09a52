"""Instance types offered by providers, and choosing the smallest one that fits.

Every provider describes what it can launch as :class:`InstanceType` values; the pool
picks one with :func:`select_instance`. ``cpu`` and ``memory`` here are per instance:
a caller that means "per worker" multiplies by the workers on a node first.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from skyward.accelerators.catalog import Catalog, current_catalog
from skyward.accelerators.mig import expand_mig
from skyward.accelerators.parse import parse_accelerator
from skyward.accelerators.spec import Accelerator
from skyward.errors import ConfigurationError
from skyward.units import format_memory, format_memory_approx, parse_memory

NEAREST_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceType:
    """One launchable machine type in one region (and zone, where it matters).

    ``memory`` is in bytes (see :mod:`skyward.units`). ``accelerator`` is a catalog
    spelling of the device (``"A100-40GB"``, ``"H100"``, ``"Trainium2"``; name the
    memory variant where the model has several) and ``accelerator_count`` how many the
    instance has; ``None`` and 0 for CPU-only machines. Prices are USD per hour;
    ``spot_price`` is ``None`` where the type has no spot market.
    """

    name: str
    """The provider's name for the type (``"g5.xlarge"``)."""
    vcpus: int
    """Virtual CPUs."""
    memory: int
    """Memory in bytes."""
    on_demand_price: float
    """On-demand price, USD per hour."""
    accelerator: str | None = None
    """The accelerator's catalog spelling (``"A100-40GB"``), or ``None`` for a CPU-only machine."""
    accelerator_count: int = 0
    """Accelerators per instance; 0 for a CPU-only machine."""
    spot_price: float | None = None
    """Spot price, USD per hour; ``None`` where the type has no spot market."""
    region: str = ""
    """The region the type is offered in ("" where the provider has no regions)."""
    zone: str | None = None
    """The zone, where prices or capacity differ by zone; ``None`` otherwise."""
    available: bool = True
    """Whether the type can be launched now; an unavailable one is shown as a near miss, never chosen."""

    def __post_init__(self) -> None:
        if self.vcpus < 1 or self.memory < 1:
            raise ValueError(f"{self.name}: vcpus and memory must be positive")
        if (self.accelerator is None) != (self.accelerator_count == 0):
            raise ValueError(
                f"{self.name}: accelerator and accelerator_count go together "
                f"(got {self.accelerator!r} x {self.accelerator_count})"
            )
        if self.accelerator_count < 0 or self.on_demand_price < 0:
            raise ValueError(f"{self.name}: counts and prices must not be negative")

    @property
    def size_key(self) -> tuple[int, int, int, float, str, str, str]:
        """The order ``select_instance`` prefers: fewest accelerators, then vCPUs,
        memory and on-demand price (name, region and zone break ties)."""
        return (
            self.accelerator_count,
            self.vcpus,
            self.memory,
            self.on_demand_price,
            self.name,
            self.region,
            self.zone or "",
        )

    def describe(self) -> str:
        """One line for messages: name, place, vCPUs, memory, accelerators and on-demand price."""
        where = self.zone or self.region
        place = f" ({where})" if where else ""
        acc = f", {self.accelerator_count}x {self.accelerator}" if self.accelerator else ""
        return (
            f"{self.name}{place}: {self.vcpus} vCPUs, {format_memory_approx(self.memory)}"
            f"{acc}, ${self.on_demand_price:g}/h"
        )


Misfit = tuple[InstanceType, tuple[str, ...]]
Reason = tuple[int, str]  # (how far off, why): a wrong model is further off than too few vCPUs
_NEAR, _FAR = 1, 3


class NoMatchingInstanceError(ConfigurationError):
    """No offered instance type satisfies the request.

    ``candidates`` holds the nearest instance types and, for each, why it failed.
    """

    def __init__(self, message: str, candidates: tuple[Misfit, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates
        """The nearest instance types, each with the reasons it does not fit, nearest first."""


class _AcceleratorMatcher:
    """Checks offered accelerators against one request, reading each offer name once."""

    def __init__(self, request: Accelerator, catalog: Catalog) -> None:
        self.request = request
        self.catalog = catalog
        self._offers: dict[str, Accelerator | None] = {}

    def _offer(self, name: str) -> Accelerator | None:
        if name not in self._offers:
            try:
                self._offers[name] = parse_accelerator(name, catalog=self.catalog)
            except ConfigurationError:
                self._offers[name] = None
        return self._offers[name]

    def misfit(self, instance: InstanceType) -> list[Reason]:
        req = self.request
        if instance.accelerator is None:
            return [(_FAR, f"has no accelerator, {req} requested")]
        offer = self._offer(instance.accelerator)
        if offer is None:
            return [(_FAR, f"its accelerator {instance.accelerator!r} is not in the catalog")]
        if offer.name != req.name:
            return [(_FAR, f"has {instance.accelerator}, not {req.name}")]
        entry = self.catalog.preferred(offer.name, offer.memory_gb, offer.form_factor)
        if entry is None:  # pragma: no cover - a parsed offer always has a variant
            return [(_FAR, f"its accelerator {instance.accelerator!r} is not in the catalog")]
        reasons: list[Reason] = []
        if req.memory_gb is not None and entry.memory_gb != req.memory_gb:
            reasons.append((_NEAR, f"has {entry.model}-{entry.memory_gb}GB, not {req.variant}"))
        elif req.form_factor is not None and entry.form_factor != req.form_factor:
            reasons.append((_NEAR, f"has {entry.variant}, not {req.variant}"))
        elif req.mig:
            try:
                expand_mig(list(req.mig), entry.mig_profiles, entry.variant)
            except ConfigurationError as exc:
                reasons.append((_NEAR, str(exc)))
        if instance.accelerator_count < req.count:
            reasons.append((_NEAR, f"has {instance.accelerator_count} {req.name}, {req.count} requested"))
        return reasons


def _request_text(accelerator: Accelerator | None, cpu: int | None, memory: int | None, machine: str | None) -> str:
    parts = []
    if machine is not None:
        parts.append(f"machine={machine!r}")
    if accelerator is not None:
        parts.append(f"accelerator={str(accelerator)!r}")
    if cpu is not None:
        parts.append(f"cpu={cpu}")
    if memory is not None:
        parts.append(f"memory={format_memory(memory)!r}")
    return ", ".join(parts) or "any instance"


def select_instance(
    available_instances: Iterable[InstanceType],
    accelerator: str | Accelerator | None = None,
    cpu: int | None = None,
    memory: str | int | None = None,
    *,
    machine: str | None = None,
    catalog: Catalog | None = None,
) -> InstanceType:
    """The smallest available instance type that satisfies the request.

    An instance matches when it is available, has at least ``cpu`` vCPUs and
    ``memory`` (``"32GB"`` or bytes), and, for an ``accelerator`` request, the same
    model (any memory or form factor variant unless the request names one, and MIG
    profiles valid on it) at least ``count`` times. ``machine`` restricts the choice to
    instance types of that name. Among matches the smallest wins: fewest accelerators,
    then vCPUs, then memory, then on-demand price.

    Raises :class:`NoMatchingInstanceError` (a :class:`ConfigurationError`) listing
    the nearest candidates and why each failed.
    """
    cat = current_catalog() if catalog is None else catalog
    request = None if accelerator is None else parse_accelerator(accelerator, catalog=cat)
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 1):
        raise ConfigurationError(f"cpu must be a positive int number of vCPUs; got {cpu!r}")
    memory_bytes = None if memory is None else parse_memory(memory)
    offered = list(available_instances)
    wanted = _request_text(request, cpu, memory_bytes, machine)

    if machine is not None:
        named = [i for i in offered if i.name == machine]
        if not named:
            names = sorted({i.name for i in offered})
            close = difflib.get_close_matches(machine, names, n=5, cutoff=0.5)
            hint = f"; similar: {', '.join(close)}" if close else ""
            raise NoMatchingInstanceError(
                f"machine={machine!r} is not among the {len(names)} instance types offered{hint}"
            )
        offered = named

    if not offered:
        raise NoMatchingInstanceError(
            f"no instance type matches {wanted}: the provider offered none "
            "(check the region, or the provider's quotas and credentials)"
        )

    matcher = None if request is None else _AcceleratorMatcher(request, cat)
    best: InstanceType | None = None
    misfits: list[tuple[int, Misfit]] = []
    for instance in offered:
        reasons: list[Reason] = [] if matcher is None else matcher.misfit(instance)
        if cpu is not None and instance.vcpus < cpu:
            reasons.append((_NEAR, f"{instance.vcpus} vCPUs < {cpu} requested"))
        if memory_bytes is not None and instance.memory < memory_bytes:
            have, want = format_memory_approx(instance.memory), format_memory(memory_bytes)
            reasons.append((_NEAR, f"{have} memory < {want} requested"))
        if not instance.available:
            reasons.append((_NEAR, "not available"))
        if reasons:
            distance = sum(weight for weight, _ in reasons)
            misfits.append((distance, (instance, tuple(why for _, why in reasons))))
        elif best is None or instance.size_key < best.size_key:
            best = instance
    if best is not None:
        return best

    misfits.sort(key=lambda m: (m[0], m[1][0].size_key))
    nearest = tuple(misfit for _, misfit in misfits[:NEAREST_SHOWN])
    lines = "\n".join(f"  - {inst.describe()}: {'; '.join(why)}" for inst, why in nearest)
    more = len(misfits) - len(nearest)
    tail = f"\n  ... and {more} more" if more > 0 else ""
    raise NoMatchingInstanceError(
        f"no instance type matches {wanted} among the {len(misfits)} offered; nearest:\n{lines}{tail}",
        nearest,
    )
