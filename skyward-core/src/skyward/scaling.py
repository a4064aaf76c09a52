"""How many nodes a pool has: ``sky.Nodes(desired, max=None, min=None)``.

``nodes=4`` is a fixed pool; ``nodes=(2, 16)`` is ``Nodes(desired=2, max=16)``: it starts
with 2, grows up to 16 while work waits and shrinks back to 2 when idle. ``min`` plays
two parts, as in the upstream project whose names these are: it is how many nodes must
have answered before the pool opens (the rest join as they come up), and the floor an
idle elastic pool shrinks to (``min=0``: all the way to zero, waking on the next task).
``desired=0`` with a ``max`` is a pool born empty that starts its first node on its
first task.

A frozen, validated value: a bad count is refused here, naming the parameter, before a
pool exists (nothing is provisioned for a pool whose size cannot be right).
"""

from __future__ import annotations

from dataclasses import dataclass

from skyward.errors import ConfigurationError

__all__ = ["MAX_NODES", "Nodes", "nodes_of"]

MAX_NODES = 1000
"""Nodes in one pool. Cloud accounts' instance quotas stop far below; past this a value
is a mistake, refused before the constructor builds per-node lists (``nodes=10**30``
would hang it)."""


def _count(name: str, value: object, lowest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= MAX_NODES:
        raise ConfigurationError(f"sky.Nodes({name}={value!r}): must be an integer >= {lowest} and at most {MAX_NODES}")
    return value


@dataclass(frozen=True, slots=True)
class Nodes:
    """The size of a pool and how far it may change: ``desired`` nodes at start, at most
    ``max`` (default: ``desired``, a fixed pool), at least ``min`` once started (default:
    ``desired``) and ``min`` ready before work starts."""

    desired: int
    """Nodes started when the pool opens (0: born empty, the first task starts one)."""
    max: int | None = None
    """The most nodes the pool may grow to; ``None``: ``desired`` (no growth)."""
    min: int | None = None
    """Nodes ready before the pool opens, and the floor an idle pool shrinks to; ``None``: ``desired``."""

    def __post_init__(self) -> None:
        desired = _count("desired", self.desired, 0)
        ceiling = desired if self.max is None else _count("max", self.max, 1)
        floor = desired if self.min is None else _count("min", self.min, 0)
        if ceiling < desired:
            raise ConfigurationError(
                f"sky.Nodes(desired={desired}, max={ceiling}): max must be at least desired "
                f"(a pool that starts with {desired} may grow to max, never start above it)"
            )
        if floor > desired:
            raise ConfigurationError(
                f"sky.Nodes(desired={desired}, min={floor}): min must be at most desired "
                f"(min nodes must be ready before work starts, out of the {desired} started)"
            )
        if ceiling == 0:
            raise ConfigurationError(
                "sky.Nodes(desired=0): a pool born empty needs max >= 1, the most nodes it may start "
                "(e.g. sky.Nodes(desired=0, max=4))"
            )

    @property
    def floor(self) -> int:
        """The fewest nodes an idle pool shrinks to."""
        return self.desired if self.min is None else self.min

    @property
    def ceiling(self) -> int:
        """The most nodes the pool may have."""
        return self.desired if self.max is None else self.max

    @property
    def ready(self) -> int:
        """How many nodes must have answered before the pool opens."""
        return self.floor

    @property
    def elastic(self) -> bool:
        """Whether the pool changes size with its work (a fixed pool only replaces lost nodes)."""
        return self.ceiling != self.floor

    def __str__(self) -> str:
        if not self.elastic:
            return str(self.desired)
        return f"{self.desired} (min {self.floor}, max {self.ceiling})"


def nodes_of(value: object) -> Nodes:
    """``ComputePool(nodes=...)``: an int (fixed), a ``(desired, max)`` pair or a ``Nodes``."""
    if isinstance(value, Nodes):
        return value
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ConfigurationError(
                f"ComputePool(nodes={value!r}): a tuple is (desired, max), e.g. nodes=(2, 16); "
                "use sky.Nodes(desired, max=..., min=...) for a floor too"
            )
        desired, ceiling = value
        both_ints = all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        if both_ints and ceiling < desired:
            raise ConfigurationError(
                f"ComputePool(nodes={value!r}): (desired, max) needs max >= desired, e.g. nodes=({ceiling}, {desired})"
            )
        return Nodes(desired=desired, max=ceiling)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NODES:
        raise ConfigurationError(
            f"ComputePool(nodes={value!r}): must be an integer >= 1 and at most {MAX_NODES}, a (desired, max) "
            "pair such as (2, 16), or sky.Nodes(desired, max=..., min=...)"
        )
    return Nodes(desired=value)
