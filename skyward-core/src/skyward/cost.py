"""Cost accounting: pure functions from priced instances and time to cost events.

Prices are hourly, in USD, billed linearly (per second, no minimum charge): an estimate
for the user's eyes, not an invoice. Zero prices (the Local provider) still produce
events, with ``0.0`` everywhere.

Two ways to use it:

* ``cost_update(instances, t)`` / ``cost_final(instances, t)``: every instance billed for
  the same ``t`` seconds (the pool's lifetime);
* ``CostLedger``: instances that start and stop at different times (a spot instance
  reclaimed halfway, a replacement node), each billed for its own interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from skyward.events import CostFinal, CostUpdate, InstanceProvisioned

_SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class PricedInstance:
    """An instance and what it costs per hour: ``hourly_price`` is what is paid (the spot
    price for a spot instance), ``on_demand_price`` what it would cost on-demand."""

    instance_id: str
    spot: bool
    hourly_price: float
    on_demand_price: float

    def __post_init__(self) -> None:
        for price in (self.hourly_price, self.on_demand_price):
            if not (math.isfinite(price) and price >= 0):
                raise ValueError(f"bad price {price!r} for instance {self.instance_id!r}")

    @classmethod
    def from_event(cls, event: InstanceProvisioned) -> PricedInstance:
        """Price an instance from its ``InstanceProvisioned`` event.

        Unknown prices count as ``0.0``; an unknown on-demand price counts as the price
        paid, so no savings are claimed that cannot be shown.
        """
        on_demand = event.price_on_demand
        paid = event.price_spot if event.spot else on_demand
        if paid is None:
            paid = on_demand if on_demand is not None else 0.0
        if on_demand is None:
            on_demand = paid
        return cls(event.instance_id, event.spot, paid, on_demand)


def hourly_rate(instances: Iterable[PricedInstance]) -> float:
    """What the instances cost together per hour."""
    return sum((i.hourly_price for i in instances), 0.0)


def _check_seconds(seconds: float) -> None:
    if seconds < 0:
        raise ValueError(f"elapsed time must be >= 0, got {seconds}")


def _cost(instance: PricedInstance, seconds: float) -> float:
    return instance.hourly_price * (seconds / _SECONDS_PER_HOUR)


def _savings(instance: PricedInstance, seconds: float) -> float:
    # Per instance, as (on-demand - paid) * hours: when paid <= on-demand the difference
    # is >= 0 exactly in floating point, so savings never show as -0.0000001.
    return (instance.on_demand_price - instance.hourly_price) * (seconds / _SECONDS_PER_HOUR)


def _counts(instances: Iterable[PricedInstance]) -> tuple[int, int]:
    spot = ondemand = 0
    for instance in instances:
        if instance.spot:
            spot += 1
        else:
            ondemand += 1
    return spot, ondemand


def cost_update(
    instances: Sequence[PricedInstance], elapsed_seconds: float, *, provider: str = "", region: str = ""
) -> CostUpdate:
    """The cost so far of ``instances``, all running for ``elapsed_seconds`` on ``provider``
    in ``region``."""
    _check_seconds(elapsed_seconds)
    spot, ondemand = _counts(instances)
    return CostUpdate(
        elapsed_seconds=elapsed_seconds,
        accumulated_cost=sum((_cost(i, elapsed_seconds) for i in instances), 0.0),
        hourly_rate=hourly_rate(instances),
        spot_count=spot,
        ondemand_count=ondemand,
        provider=provider,
        region=region,
    )


def cost_final(
    instances: Sequence[PricedInstance], total_seconds: float, *, provider: str = "", region: str = ""
) -> CostFinal:
    """The total cost of ``instances``, all running for ``total_seconds`` on ``provider``
    in ``region``."""
    _check_seconds(total_seconds)
    spot, ondemand = _counts(instances)
    return CostFinal(
        total_cost=sum((_cost(i, total_seconds) for i in instances), 0.0),
        total_seconds=total_seconds,
        hourly_rate=hourly_rate(instances),
        spot_count=spot,
        ondemand_count=ondemand,
        savings_vs_ondemand=sum((_savings(i, total_seconds) for i in instances), 0.0),
        provider=provider,
        region=region,
    )


@dataclass(frozen=True, slots=True)
class BilledInterval:
    """One instance's billed interval, in seconds since the ledger's start."""

    instance: PricedInstance
    started_at: float
    stopped_at: float | None = None

    def seconds(self, now: float) -> float:
        end = now if self.stopped_at is None else min(self.stopped_at, now)
        return max(end - self.started_at, 0.0)


@dataclass(frozen=True, slots=True)
class CostLedger:
    """Instances with their own start and stop times; times are seconds since the pool
    started (any monotonic origin works, as long as it is the same for every call).

    Each method returns a new ledger: the pool keeps the latest in one attribute.
    """

    intervals: tuple[BilledInterval, ...] = ()

    def start(self, instance: PricedInstance, at: float) -> CostLedger:
        """Bill ``instance`` from ``at``; starting an instance twice is a no-op."""
        _check_seconds(at)
        if any(b.instance.instance_id == instance.instance_id for b in self.intervals):
            return self
        return CostLedger((*self.intervals, BilledInterval(instance, at)))

    def stop(self, instance_id: str, at: float) -> CostLedger:
        """Stop billing ``instance_id`` at ``at``; unknown or stopped ones are ignored."""
        return CostLedger(
            tuple(
                replace(b, stopped_at=max(at, b.started_at))
                if b.instance.instance_id == instance_id and b.stopped_at is None
                else b
                for b in self.intervals
            )
        )

    def running(self, now: float) -> tuple[PricedInstance, ...]:
        """The instances billed at ``now``."""
        return tuple(
            b.instance for b in self.intervals if b.started_at <= now and (b.stopped_at is None or b.stopped_at > now)
        )

    def update(self, now: float, *, provider: str = "", region: str = "") -> CostUpdate:
        """Cost so far; rate and counts are those of the instances running at ``now``."""
        _check_seconds(now)
        running = self.running(now)
        spot, ondemand = _counts(running)
        return CostUpdate(
            elapsed_seconds=now,
            accumulated_cost=sum((_cost(b.instance, b.seconds(now)) for b in self.intervals), 0.0),
            hourly_rate=hourly_rate(running),
            spot_count=spot,
            ondemand_count=ondemand,
            provider=provider,
            region=region,
        )

    def final(self, now: float, *, provider: str = "", region: str = "") -> CostFinal:
        """Total cost at ``now``; rate and counts cover every instance ever billed."""
        _check_seconds(now)
        instances = [b.instance for b in self.intervals]
        spot, ondemand = _counts(instances)
        return CostFinal(
            total_cost=sum((_cost(b.instance, b.seconds(now)) for b in self.intervals), 0.0),
            total_seconds=now,
            hourly_rate=hourly_rate(instances),
            spot_count=spot,
            ondemand_count=ondemand,
            savings_vs_ondemand=sum((_savings(b.instance, b.seconds(now)) for b in self.intervals), 0.0),
            provider=provider,
            region=region,
        )


__all__ = [
    "BilledInterval",
    "CostLedger",
    "PricedInstance",
    "cost_final",
    "cost_update",
    "hourly_rate",
]
