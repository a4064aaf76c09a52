"""What a provider offers: the values its tools' session lists (pure).

A provider plugin's session (``skyward_provider_tools`` hook) that can list its machines
satisfies :class:`OfferSource`: asked an :class:`OfferQuery`, it answers with
:class:`Offer` rows, usually through :func:`offers_from` (its instance types that fit,
cheapest first). ``skyward offers`` and ``sky.offers`` (:mod:`skyward.offer_table`) ask
every such session the same query and sort the answers by the price of the whole pool.

One name, one thing: :class:`Offer` here is a row of that table (``sky.Offer``). What a
cloud driver's ``choose_offer`` returns is a different value,
:class:`skyward.providers.cloud.ChosenOffer` (the machine every node of one pool gets).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skyward.accelerators.parse import parse_accelerator
from skyward.errors import ConfigurationError
from skyward.instances import InstanceType, select_instance

__all__ = ["Offer", "OfferQuery", "OfferSource", "ShippedOffers", "fits", "offers_from", "price_order", "query"]


@dataclass(frozen=True, slots=True)
class OfferQuery:
    """What a provider is asked for: per node, ``accelerator`` (a catalog name such as
    ``"A100"``, or ``None`` for CPU machines), ``count`` of them, on spot or not."""

    accelerator: str | None
    """The accelerator's catalog name (``"A100"``), or ``None`` for CPU machines."""
    count: int = 1
    """Accelerators per node."""
    nodes: int = 1
    """Nodes in the pool, so an offer can be priced for the whole pool."""
    spot: bool = False
    """Whether spot capacity is asked for."""


@dataclass(frozen=True, slots=True)
class Offer:
    """One machine type a provider offers in one region (prices USD per hour per node;
    ``spot_hourly`` is ``None`` where it has no spot market)."""

    provider: str
    """The provider's name (``"aws"``)."""
    region: str
    """The region the machine type is offered in."""
    instance: str
    """The machine type's name at the provider (``"g5.xlarge"``)."""
    accelerator: str | None
    """The accelerator's catalog name, or ``None`` for a CPU machine."""
    accelerator_count: int
    """Accelerators per machine (0 for a CPU machine)."""
    vcpus: int
    """Virtual CPUs per machine."""
    memory_gib: float
    """Memory per machine, GiB."""
    on_demand_hourly: float | None
    """On-demand price, USD per hour per node (``None``: not sold on demand there)."""
    spot_hourly: float | None
    """Spot price, USD per hour per node (``None``: no spot market there)."""

    def hourly(self, spot: bool) -> float | None:
        """One node's price per hour on that market (``None``: not sold there)."""
        return self.spot_hourly if spot else self.on_demand_hourly

    def pool_hourly(self, spot: bool, nodes: int) -> float | None:
        """The whole pool's price per hour: ``nodes`` of this machine on that market."""
        price = self.hourly(spot)
        return None if price is None else price * nodes


@runtime_checkable
class OfferSource(Protocol):
    """A provider session that can list what it offers."""

    def offers(self, query: OfferQuery) -> list[Offer]:
        """Every machine type, in every region, that can serve ``query``."""
        ...


@runtime_checkable
class ShippedOffers(Protocol):
    """A provider session that can also answer from data its plugin ships (machine types
    and list prices), with no account and no network: what ``skyward offers`` shows on a
    machine with no credentials, marked as such. Live offers (spot prices, what a region
    has today) still need the account."""

    def shipped_offers(self, query: OfferQuery) -> list[Offer]:
        """The offers matching ``query`` from the data the plugin ships (no API call)."""
        ...


def query(accelerator: str | None, *, nodes: int = 1, spot: bool = False) -> OfferQuery:
    """A validated query: ``accelerator`` is a catalog name (``"A100"``, ``"A100:2"``,
    ``"H100-80GB"``); a bad one is a ConfigurationError naming it and the known ones."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigurationError(f"offers(nodes={nodes!r}): give a whole number of nodes >= 1")
    if not isinstance(spot, bool):
        raise ConfigurationError(f"offers(spot={spot!r}): must be True or False")
    if accelerator is None:
        return OfferQuery(accelerator=None, nodes=nodes, spot=spot)
    parsed = parse_accelerator(accelerator)
    return OfferQuery(accelerator=accelerator, count=parsed.count, nodes=nodes, spot=spot)


def fits(instance: InstanceType, wanted: OfferQuery) -> bool:
    """Whether one node of this type satisfies the query (the same rule instance
    selection uses: same model, any memory variant unless named, at least ``count``)."""
    if wanted.accelerator is None:
        return instance.accelerator is None
    request = dataclasses.replace(parse_accelerator(wanted.accelerator), count=wanted.count)
    try:
        select_instance([instance], accelerator=request)
    except ConfigurationError:
        return False
    return True


def price_order(spot: bool) -> Callable[[Offer], tuple[bool, float, str, str, str]]:
    """The sort key of a table: cheapest first on the market asked, unknown prices last,
    then by provider, region and instance so equal prices read the same every time."""

    def key(offer: Offer) -> tuple[bool, float, str, str, str]:
        price = offer.hourly(spot)
        return (price is None, price or 0.0, offer.provider, offer.region, offer.instance)

    return key


def offers_from(provider: str, instances: Iterable[InstanceType], wanted: OfferQuery) -> list[Offer]:
    """The instance types that fit, cheapest first for the market asked (unknown prices last)."""
    found = [
        Offer(
            provider=provider,
            region=i.region,
            instance=i.name,
            accelerator=i.accelerator,
            accelerator_count=i.accelerator_count,
            vcpus=i.vcpus,
            memory_gib=round(i.memory / 2**30, 1),
            on_demand_hourly=i.on_demand_price or None,
            spot_hourly=i.spot_price,
        )
        for i in instances
        if fits(i, wanted) and (i.spot_price is not None or not wanted.spot)
    ]
    return sorted(found, key=price_order(wanted.spot))
