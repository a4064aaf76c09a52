"""What the providers offer for a request: ``sky.offers`` and ``skyward offers``.

A provider plugin's tools (``skyward_provider_tools`` hook) open a session that, where the
provider can list its machines, satisfies :class:`~skyward.providers.offers.OfferSource`.
Both the command and ``sky.offers`` ask every such session the same
:class:`~skyward.providers.offers.OfferQuery` and sort the answers by the price of the whole
pool, so the table a user reads before choosing is the data behind
``ComputePool(selection="cheapest")``. The values themselves (``Offer``, ``OfferQuery``)
are the provider contract's (:mod:`skyward.providers.offers`); this module gathers them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from skyward.errors import ConfigurationError
from skyward.plugin_hints import install_command
from skyward.plugins.registry import get_plugin_manager, registry
from skyward.providers.local_tools import PROVIDER as LOCAL
from skyward.providers.offers import Offer, OfferQuery, OfferSource, fits, offers_from, price_order, query
from skyward.providers.resources import ProviderTools

__all__ = [
    "Offer", "OfferQuery", "OfferSource", "OfferTable", "collect", "fits", "installed_tools", "offers", "offers_from",
    "open_source", "price_order", "query",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class OfferTable:
    """What ``sky.offers`` returns: ``rows`` cheapest first for the whole pool of
    ``nodes`` on the market asked, and ``skipped``, each provider that could not answer
    (no credentials, an API error) with why. Iterating gives the rows."""

    rows: tuple[Offer, ...]
    """The offers, cheapest first for the whole pool on the market asked."""
    nodes: int
    """The pool size the prices are for."""
    spot: bool
    """Whether the prices are spot prices (True) or on-demand (False)."""
    skipped: tuple[tuple[str, str], ...] = ()
    """Each provider that could not answer, with why: ``(name, reason)``."""

    def __iter__(self) -> Iterator[Offer]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Offer:
        return self.rows[index]

    def __str__(self) -> str:
        head = f"{'provider':<13} {'region':<14} {'instance':<24} {'accelerators':<14} {'pool $/h':>9}"
        lines = [head]
        for o in self.rows:
            price = o.pool_hourly(self.spot, self.nodes)
            acc = f"{o.accelerator_count}x {o.accelerator}" if o.accelerator else "-"
            shown = "?" if price is None else f"{price:.3f}"
            lines.append(f"{o.provider:<13} {o.region:<14} {o.instance:<24} {acc:<14} {shown:>9}")
        lines += [f"({name}: {why})" for name, why in self.skipped]
        return "\n".join(lines)


def collect(
    sources: Iterable[tuple[str, object]], wanted: OfferQuery, *, on_skip: Callable[[str, str], None] | None = None
) -> OfferTable:
    """Asks each opened session (provider name, session) for ``wanted``; one that lists no
    offers or fails is skipped with its reason (``on_skip`` hears it as it happens)."""
    rows: list[Offer] = []
    skipped: list[tuple[str, str]] = []

    def skip(name: str, why: str) -> None:
        skipped.append((name, why))
        if on_skip is not None:
            on_skip(name, why)

    for name, session in sources:
        if not isinstance(session, OfferSource):
            skip(name, "this plugin lists no offers")
            continue
        try:
            rows += session.offers(wanted)
        except Exception as error:  # one provider's API failing leaves the others' rows
            skip(name, f"could not list offers: {error}")
    rows.sort(key=price_order(wanted.spot))
    return OfferTable(rows=tuple(rows), nodes=wanted.nodes, spot=wanted.spot, skipped=tuple(skipped))


def installed_tools() -> list[ProviderTools]:
    groups = get_plugin_manager().hook.skyward_provider_tools()
    return [tools for group in groups for tools in group]


def open_source(tools: ProviderTools, config: object | None) -> tuple[object | None, str]:
    """The tools' session for ``config`` when its credentials are found and accepted, or
    ``None`` and why not (one harmless read call)."""
    try:
        session = tools.open(config)
        check = session.check()
    except ConfigurationError as error:
        return None, str(error)
    except Exception as error:  # an unreachable API: that provider only
        return None, f"could not check the credentials: {type(error).__name__}: {error}"
    if not check.found:
        return None, f"{check.detail} ({check.fix})" if check.fix else check.detail
    if not check.valid:
        return None, f"credentials not accepted: {check.detail}"
    return session, ""


def offers(
    accelerator: str | None = None,
    *,
    nodes: int = 1,
    spot: bool = False,
    providers: Sequence[str | object] | None = None,
    tools: Sequence[ProviderTools] | None = None,
) -> OfferTable:
    """What each installed provider offers for ``nodes`` nodes with ``accelerator``
    (``"A100"``, ``"H100:8"``; ``None``: CPU machines), sorted by the whole pool's price
    per hour on spot (``spot=True``: only machines sold on spot) or on-demand.

    ``providers`` narrows the providers: names (``"aws"``) or configurations
    (``sky.AWS(region="us-west-2")``, asked with that configuration). A provider without
    usable credentials is skipped and named in ``skipped``. ``tools`` replaces the
    installed plugins' (tests, embedding).
    """
    wanted = query(accelerator, nodes=nodes, spot=spot)
    every = list(tools) if tools is not None else installed_tools()
    by_name = {t.name: t for t in every}
    chosen: list[tuple[ProviderTools, object | None]] = []
    if providers is None:  # every provider that may list offers: Local never does (local_tools says why)
        chosen = [(t, None) for t in every if t.name != LOCAL]
    else:
        if isinstance(providers, str) or not isinstance(providers, Sequence):
            raise ConfigurationError(
                f"offers(providers={providers!r}): give a list of provider names or configurations"
            )
        for item in providers:
            name = item if isinstance(item, str) else _provider_name(item)
            if name not in by_name:
                known = ", ".join(sorted(by_name)) or f"none (install a cloud plugin: {install_command('aws')})"
                raise ConfigurationError(
                    f"offers(providers=[...]): no offers for {item!r}; providers with offers: {known}"
                )
            chosen.append((by_name[name], None if isinstance(item, str) else item))
    opened: list[tuple[str, object]] = []
    skipped: list[tuple[str, str]] = []
    for provider_tools, config in chosen:
        session, why = open_source(provider_tools, config)
        if session is None:
            skipped.append((provider_tools.name, why))
        else:
            opened.append((provider_tools.name, session))
    table = collect(opened, wanted)
    return dataclasses.replace(table, skipped=(*skipped, *table.skipped))


def _provider_name(config: object) -> str:
    return registry.provider_for(config).name
