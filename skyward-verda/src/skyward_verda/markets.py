"""Which market (spot or on-demand) each node uses, from the pool's spot strategy (pure).

* ``spot`` unset or ``Spot.Never``: every node on-demand. (Verda's spot instances can be
  reclaimed at any moment together with their disk, so spot is something to ask for.)
* ``Spot.Always(retries, interval)``: every node spot; a deploy refused for capacity is
  tried again ``retries`` times, ``interval`` seconds apart, then the pool fails.
* ``Spot.IfAvailable()``: spot where the location has spot capacity, on-demand otherwise
  (and when a spot deploy is refused); the user is told.
* ``Spot.Percent(p)``: the last ``ceil(p * nodes)`` nodes spot, retried like
  ``Spot.Always()``, the rest on-demand, so the head node (node 0, where distributed
  training meets) is not the one a reclaim takes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skyward.spot import SpotAlways, SpotIfAvailable, SpotNever, SpotPercent, SpotStrategy, min_spot_nodes
from skyward_verda.offers import Markets


class Market(enum.Enum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"


@dataclass(frozen=True, slots=True)
class NodePlan:
    node: int
    market: Market
    retries: int = 0  # more tries after a capacity refusal
    interval: float = 0.0  # seconds between tries
    fallback: bool = False  # may run on-demand when spot is refused


def plan_markets(strategy: SpotStrategy | None, nodes: int) -> list[NodePlan]:
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


def markets_needed(plans: list[NodePlan]) -> Markets:
    """What the pool's one location must offer for these plans."""
    if plans and all(p.fallback for p in plans):
        return Markets(spot=True, on_demand=False, spot_optional=True)
    return Markets(
        spot=any(p.market is Market.SPOT for p in plans),
        on_demand=any(p.market is Market.ON_DEMAND for p in plans),
    )
