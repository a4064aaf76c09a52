"""What a pool costs per hour on a plan of markets, and the cap check (pure).

Below both the pool's failover (``skyward.api``) and the cloud template
(``skyward.providers.cloud``), which price a candidate the same way: a cap is checked
before anything is made, by whichever of them sees the offer first.
"""

from __future__ import annotations

from collections.abc import Sequence

from skyward.errors import PriceCapError
from skyward.spot import Market


def pool_hourly(markets: Sequence[Market], on_demand: float, spot: float | None) -> float:
    """What the pool costs per hour when each node runs on its planned market (a spot node
    without a spot price is counted at the on-demand price)."""
    return sum((spot if m is Market.SPOT and spot is not None else on_demand) for m in markets)


def check_price_cap(cap: float | None, hourly: float, what: str) -> None:
    """Raise PriceCapError when the pool's hourly price is above ``cap``; before anything
    is made, so the next candidate starts from nothing."""
    if cap is not None and hourly > cap:
        raise PriceCapError(
            f"{what} costs ${hourly:.4g}/h for the pool, above max_hourly_cost=${cap:g}/h; raise the cap, "
            "use fewer nodes or another candidate"
        )
