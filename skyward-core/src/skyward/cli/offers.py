"""Turning a provider's instance types into the command's offers (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from skyward.accelerators import parse_accelerator
from skyward.cli.model import Offer, OfferQuery
from skyward.errors import ConfigurationError
from skyward.instances import InstanceType, select_instance


def query(accelerator: str | None, *, nodes: int = 1, spot: bool = False) -> OfferQuery:
    """A validated query: ``accelerator`` is a catalog name (``"A100"``, ``"A100:2"``,
    ``"H100-80GB"``); a bad one is a ConfigurationError naming it and the known ones."""
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigurationError(f"--nodes {nodes!r}: give a whole number of nodes >= 1")
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
    return sorted(found, key=lambda o: (o.hourly(wanted.spot) is None, o.hourly(wanted.spot) or 0.0, o.instance))
