"""Spot strategies: how much of a pool may, or must, run on spot instances.

Users write a shortcut or a value::

    spot="always"          Spot.Always(retries=10, interval=1.0)  spot only; retry
    spot="if-available"    Spot.IfAvailable()                     spot, else on-demand
    spot="never"           Spot.Never                             on-demand only
    spot=0.8               Spot.Percent(0.8)                      at least 80% spot

and the pool turns it into one :data:`SpotStrategy` with :func:`normalize_spot`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from skyward.errors import ConfigurationError

_ALLOWED = (
    "'always', 'if-available', 'never', a fraction in (0, 1] such as 0.8, "
    "or Spot.Always(...), Spot.IfAvailable(), Spot.Never, Spot.Percent(p)"
)


@dataclass(frozen=True, slots=True)
class SpotAlways:
    """Spot instances only. A launch refused for lack of spot capacity is retried
    ``retries`` times, ``interval`` seconds apart, before the pool gives up."""

    retries: int = 10
    """More launch tries after spot capacity is refused; 0 gives up at the first refusal."""
    interval: float = 1.0
    """Seconds between tries."""

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int):
            raise ConfigurationError(f"Spot.Always(retries=...) must be an int; got {self.retries!r}")
        if self.retries < 0:
            raise ConfigurationError(f"Spot.Always(retries=...) must be >= 0; got {self.retries}")
        if (
            isinstance(self.interval, bool)
            or not isinstance(self.interval, int | float)
            or not math.isfinite(self.interval)
            or self.interval < 0
        ):
            raise ConfigurationError(
                f"Spot.Always(interval=...) must be a finite number of seconds >= 0; got {self.interval!r}"
            )


@dataclass(frozen=True, slots=True)
class SpotIfAvailable:
    """Spot where there is capacity; on-demand for the rest."""


@dataclass(frozen=True, slots=True)
class SpotNever:
    """On-demand instances only. ``Spot.Never`` is the value; calling it returns itself."""

    def __call__(self) -> SpotNever:
        return self


@dataclass(frozen=True, slots=True)
class SpotPercent:
    """At least ``fraction`` of the nodes on spot (rounded up); the rest may be on-demand."""

    fraction: float
    """The share of nodes that must be spot, in (0, 1]; stored as a float."""

    def __post_init__(self) -> None:
        value = self.fraction
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= 1
        ):
            raise ConfigurationError(
                f"a spot fraction must be a number in (0, 1], e.g. 0.8 for at least 80% "
                f"spot; got {value!r} (use 'never' for no spot)"
            )
        object.__setattr__(self, "fraction", float(value))


SpotStrategy = SpotAlways | SpotIfAvailable | SpotNever | SpotPercent
"""The normalised spot strategy the pool and providers work with."""

SpotLike = Literal["always", "if-available", "never"] | float | SpotStrategy
"""What ``ComputePool(spot=...)`` accepts."""


class Spot:
    """Namespace of spot strategies: ``Spot.Always(...)``, ``Spot.IfAvailable()``,
    ``Spot.Never``, ``Spot.Percent(p)``."""

    Always = SpotAlways
    IfAvailable = SpotIfAvailable
    Never: ClassVar[SpotNever] = SpotNever()
    Percent = SpotPercent


_NAMES: dict[str, SpotStrategy] = {
    "always": SpotAlways(),
    "if-available": SpotIfAvailable(),
    "if_available": SpotIfAvailable(),
    "ifavailable": SpotIfAvailable(),
    "never": SpotNever(),
}


def normalize_spot(value: SpotLike | str | type[SpotAlways] | type[SpotIfAvailable]) -> SpotStrategy:
    """Turn any accepted spot value into a :data:`SpotStrategy`; idempotent.

    Accepts ``"always"``, ``"if-available"``, ``"never"`` (any case), a number in
    (0, 1], a strategy value, or the classes ``Spot.Always``/``Spot.IfAvailable``
    themselves (taken with their defaults). Anything else raises
    :class:`ConfigurationError` saying what is allowed.
    """
    if isinstance(value, SpotStrategy):
        return value
    if value is SpotAlways or value is SpotIfAvailable:
        return value()
    if isinstance(value, str):
        strategy = _NAMES.get(value.strip().casefold())
        if strategy is None:
            raise ConfigurationError(f"unknown spot strategy {value!r}; use {_ALLOWED}")
        return strategy
    if isinstance(value, int | float) and not isinstance(value, bool):
        return SpotPercent(value)
    raise ConfigurationError(f"spot must be {_ALLOWED}; got {value!r}")


def min_spot_nodes(strategy: SpotStrategy, nodes: int) -> int:
    """How many of ``nodes`` must be spot instances under ``strategy`` (a positive
    fraction asks for at least one)."""
    if isinstance(strategy, SpotAlways):
        return nodes
    if isinstance(strategy, SpotPercent):
        exact = strategy.fraction * nodes
        nearest = round(exact)
        # 0.3 * 10 is 3.0000000000000004 in floating point: that means 3, not 4.
        if nearest >= 1 and math.isclose(exact, nearest, rel_tol=1e-9):
            return min(nodes, nearest)
        return min(nodes, math.ceil(exact))
    return 0


def wants_spot(strategy: SpotStrategy) -> bool:
    """Whether the pool should try spot capacity first."""
    return not isinstance(strategy, SpotNever)


class Market(enum.Enum):
    """The market a node is launched in: spot (cheaper, may be reclaimed) or on-demand."""

    SPOT = "spot"
    """Spare capacity at a discount; the provider may reclaim the instance at short notice."""
    ON_DEMAND = "on-demand"
    """Full price; the instance runs until it is terminated."""


@dataclass(frozen=True, slots=True)
class NodePlan:
    """The market one node is launched in, and how hard to insist on spot."""

    node: int
    """The node's index in the pool; node 0 is the head node."""
    market: Market
    """The market the node is launched in first."""
    retries: int = 0
    """More tries after spot capacity is refused."""
    interval: float = 0.0
    """Seconds between tries."""
    fallback: bool = False
    """Whether the node may run on-demand when spot is refused (``Spot.IfAvailable()``)."""


def plan_markets(strategy: SpotStrategy | None, nodes: int) -> list[NodePlan]:
    """One plan per node, for providers with a spot market.

    ``None`` or ``Spot.Never``: every node on-demand. ``Spot.Always(retries, interval)``:
    every node spot, insisting ``retries`` more times. ``Spot.IfAvailable()``: spot, with
    on-demand as the fallback. ``Spot.Percent(p)``: the last ``min_spot_nodes`` nodes spot
    (retried like ``Spot.Always()``), the rest on-demand, so the head node (node 0, where
    distributed training meets) is not the one a reclaim takes.
    """
    if strategy is None or isinstance(strategy, SpotNever):
        return [NodePlan(n, Market.ON_DEMAND) for n in range(nodes)]
    if isinstance(strategy, SpotIfAvailable):
        return [NodePlan(n, Market.SPOT, fallback=True) for n in range(nodes)]
    if isinstance(strategy, SpotAlways):
        return [NodePlan(n, Market.SPOT, strategy.retries, strategy.interval) for n in range(nodes)]
    if isinstance(strategy, SpotPercent):
        spot = min_spot_nodes(strategy, nodes)
        default = SpotAlways()
        return [
            NodePlan(n, Market.SPOT, default.retries, default.interval)
            if n >= nodes - spot
            else NodePlan(n, Market.ON_DEMAND)
            for n in range(nodes)
        ]
    raise TypeError(f"not a spot strategy: {strategy!r}")
