"""The live price of a whole pool on one candidate, from its provider's offers.

``ComputePool(selection="cheapest")`` asks each candidate's provider, through the same
offer source ``sky.offers`` and ``skyward offers`` read (the ``skyward_provider_tools``
hook), what fits one node, and prices the pool as its spot plan would run it: each spot
node at the spot price, each on-demand node at the on-demand price. A provider that lists
no offers, or whose listing fails, has no price: such a candidate is tried after every
priced one, never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from skyward.api.spec import PoolSpec
from skyward.offer_table import Offer, OfferQuery, OfferSource, installed_tools, open_source
from skyward.pricing import pool_hourly
from skyward.providers.protocol import ProviderDriver, SpotMarket
from skyward.spot import Market, SpotStrategy, plan_markets


def strategy_of(spec: PoolSpec, driver: ProviderDriver) -> SpotStrategy | None:
    """The spot strategy the pool would get on this provider (its default when unset)."""
    if not isinstance(driver, SpotMarket):
        return None
    return spec.spot if spec.spot is not None else driver.default_spot()


def query_for(spec: PoolSpec, markets: Sequence[Market]) -> OfferQuery:
    accelerator = None
    count = 1
    if spec.accelerator is not None:
        accelerator, count = spec.accelerator.name, spec.accelerator.count
    return OfferQuery(accelerator=accelerator, count=count, nodes=spec.nodes, spot=False)


def best_price(offers: Sequence[Offer], spec: PoolSpec, markets: Sequence[Market]) -> float | None:
    """The cheapest whole-pool hourly price among ``offers`` that fit ``spec`` (its
    machine, CPUs and memory), each node on its planned market (pure)."""
    needs_spot = all(m is Market.SPOT for m in markets)
    prices = []
    for offer in offers:
        if spec.machine is not None and offer.instance != spec.machine:
            continue
        if spec.cpu is not None and offer.vcpus < spec.cpu:
            continue
        if spec.memory_mb is not None and offer.memory_gib * 1024 < spec.memory_mb:
            continue
        if offer.on_demand_hourly is None or (needs_spot and offer.spot_hourly is None):
            continue
        prices.append(pool_hourly(markets, offer.on_demand_hourly, offer.spot_hourly))
    return min(prices) if prices else None


def candidate_price(spec: PoolSpec, driver: ProviderDriver) -> float | None:
    """The whole pool's hourly price on this candidate, or None when its provider lists
    no offers (or cannot be asked)."""
    markets = [p.market for p in plan_markets(strategy_of(spec, driver), spec.nodes)]
    tools = next((t for t in installed_tools() if t.name == driver.name), None)
    if tools is None:
        return None
    session, _ = open_source(tools, spec.provider)
    if session is None:
        return None
    if not isinstance(session, OfferSource):
        return None
    try:
        found = session.offers(query_for(spec, markets))
    except Exception:  # an API failing to list: the candidate is tried, after the priced ones
        return None
    return best_price(found, spec, markets)
