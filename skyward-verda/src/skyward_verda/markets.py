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

from skyward.providers import Market, NodePlan
from skyward_verda.offers import Markets


def markets_needed(plans: list[NodePlan]) -> Markets:
    """What the pool's one location must offer for these plans."""
    if plans and all(p.fallback for p in plans):
        return Markets(spot=True, on_demand=False, spot_optional=True)
    return Markets(
        spot=any(p.market is Market.SPOT for p in plans),
        on_demand=any(p.market is Market.ON_DEMAND for p in plans),
    )
