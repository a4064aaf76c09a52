"""``skyward offers``: live offers where an account is set up, shipped catalogs elsewhere.

A provider whose credentials are accepted is asked live (its API: what its regions have
today, spot prices). One that is not configured, or cannot be reached, answers from the
data its plugin ships when it has some (:class:`~skyward.providers.offers.ShippedOffers`:
skyward-aws ships EC2 machine types and on-demand list prices), each such row marked
``shipped``; one with no shipped data is named with what would let it answer. So
``skyward offers A100`` on a machine with no account shows AWS's A100 machines at list
price instead of five "skipped" lines, and says which clouds would need an account.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from skyward.accelerators.catalog import Catalog, CatalogEntry
from skyward.cli.opening import Opened, State
from skyward.offer_table import price_order
from skyward.providers.offers import Offer, OfferQuery, OfferSource, ShippedOffers
from skyward.providers.reachability import unreachable

LIVE = "live"
SHIPPED = "shipped"


class SortKey(StrEnum):
    """How ``--sort`` orders the rows: ``price`` cheapest pool first (unknown last), ``gpu``
    by accelerator name then count then price, ``memory`` most memory per node first."""

    PRICE = "price"
    GPU = "gpu"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class Row:
    offer: Offer
    source: str  # LIVE or SHIPPED


@dataclass(frozen=True, slots=True)
class Gathered:
    rows: tuple[Row, ...]
    needs_account: tuple[tuple[str, str, str], ...]  # (provider, what it would add, how to set it up)
    errors: tuple[str, ...]


def gather(opened: Sequence[Opened], wanted: OfferQuery, say: Callable[[str], None]) -> Gathered:
    """Every provider's rows for ``wanted``: live when ready, shipped when it has a catalog."""
    rows: list[Row] = []
    needs: list[tuple[str, str, str]] = []
    errors: list[str] = []
    for item in opened:
        session = item.session
        if item.state is State.READY and isinstance(session, OfferSource):
            try:
                rows += [Row(o, LIVE) for o in session.offers(wanted)]
                continue
            except Exception as error:  # one provider's API failing leaves the others' rows
                offline = unreachable(error)
                problem = f"{item.name}: could not list offers: {offline or error}"
                if not isinstance(session, ShippedOffers):
                    errors.append(problem)
                    say(problem)
                    continue
                say(f"{problem}; showing its shipped catalog")
        if isinstance(session, ShippedOffers):
            rows += [Row(o, SHIPPED) for o in session.shipped_offers(wanted)]
            if item.state is not State.READY:
                needs.append((item.name, "live offers and spot prices", item.fix or item.detail))
            continue
        if item.state is State.READY:
            continue  # it answers no offers query at all (Local, a plugin without the ability)
        needs.append((item.name, "its offers", item.fix or item.detail))
        if item.state in (State.UNREACHABLE, State.REFUSED, State.BROKEN):
            errors.append(item.line())
    return Gathered(tuple(rows), tuple(needs), tuple(errors))


def in_region(rows: Sequence[Row], region: str | None) -> list[Row]:
    return list(rows) if region is None else [r for r in rows if r.offer.region == region]


def ordered(rows: Sequence[Row], key: SortKey, spot: bool, nodes: int) -> list[Row]:
    """The rows in the order ``--sort`` asks (pure; ties always by provider, region, type)."""
    by_price = price_order(spot)
    if key is SortKey.GPU:
        return sorted(rows, key=lambda r: (r.offer.accelerator or "~", r.offer.accelerator_count, by_price(r.offer)))
    if key is SortKey.MEMORY:
        return sorted(rows, key=lambda r: (-r.offer.memory_gib, by_price(r.offer)))
    return sorted(rows, key=lambda r: by_price(r.offer))


def accelerator_rows(catalog: Catalog) -> list[CatalogEntry]:
    """Every variant the catalog knows, model by model in catalog order."""
    return [entry for model in catalog.models() for entry in catalog.variants(model)]


def accelerator_json(entry: CatalogEntry) -> dict[str, Any]:
    return {
        "model": entry.model,
        "variant": entry.variant,
        "vendor": entry.vendor,
        "memory_gb": entry.memory_gb,
        "form_factor": entry.form_factor,
        "kind": entry.kind,
        "aliases": list(entry.aliases),
    }
