"""Tables for people (rich) and JSON for scripts, from the command's values (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from skyward.accelerators.catalog import CatalogEntry
from skyward.cli.cache import CachedEnvironment
from skyward.cli.offers import SHIPPED, Row
from skyward.display.formatting import duration, money, rate
from skyward.providers.offers import Offer
from skyward.providers.resources import Removal, Resource


def _maybe_money(value: float | None) -> str:
    return "-" if value is None else money(value)


def _maybe_rate(value: float | None) -> str:
    return "-" if value is None else rate(value)


def expires_text(resource: Resource, now: float) -> str:
    left = resource.expires_in(now)
    if left is None:
        return "-"
    return f"EXPIRED {duration(-left)} ago" if left < 0 else duration(left)


def state_text(resource: Resource) -> str:
    """The state column: an idle machine (it runs no node) says whether it still bills,
    which is the reason to remove it early: "billing" only at a known price above zero,
    "price unknown" when the provider gives none, and nothing more when it is free."""
    if not resource.idle:
        return resource.state
    price = resource.hourly_price
    if price is None:
        return f"{resource.state} (idle, price unknown)"
    return f"{resource.state} (idle, billing)" if price > 0 else f"{resource.state} (idle)"


def resource_json(resource: Resource, now: float) -> dict[str, Any]:
    return {
        "provider": resource.provider,
        "region": resource.region,
        "pool_id": resource.pool_id,
        "kind": resource.kind,
        "id": resource.id,
        "name": resource.name,
        "state": resource.state,
        "created": resource.created,
        "expires_at": resource.expires_at,
        "expired": resource.expired(now),
        "idle": resource.idle,
        "age_seconds": resource.age(now),
        "hourly_price": resource.hourly_price,
        "cost_so_far": resource.cost_so_far(now),
    }


def resources_table(resources: Sequence[Resource], now: float) -> Table:
    table = Table(title="Skyward resources", title_justify="left")
    for column in ("provider", "region", "pool", "kind", "id", "state", "age", "expires in", "price", "cost so far"):
        table.add_column(column, justify="right" if column in ("price", "cost so far") else "left")
    for r in resources:
        age = r.age(now)
        table.add_row(
            r.provider,
            r.region,
            r.pool_id,
            r.kind,
            r.label.removeprefix(f"{r.kind} "),
            state_text(r),
            "-" if age is None else duration(age),
            expires_text(r, now),
            _maybe_rate(r.hourly_price),
            _maybe_money(r.cost_so_far(now)),
            style="bold red" if r.expired(now) or r.idle else None,
        )
    return table


def removal_json(removal: Removal, now: float) -> dict[str, Any]:
    return {**resource_json(removal.resource, now), "removed": removal.removed, "detail": removal.detail}


def removals_table(removals: Sequence[Removal]) -> Table:
    table = Table(title="skyward down", title_justify="left")
    for column in ("provider", "region", "pool", "kind", "id", "result"):
        table.add_column(column)
    for item in removals:
        r = item.resource
        result = "removed" if item.removed else f"NOT removed: {item.detail}"
        table.add_row(r.provider, r.region, r.pool_id, r.kind, r.label.removeprefix(f"{r.kind} "), result)
    return table


def offer_json(offer: Offer, nodes: int, spot: bool) -> dict[str, Any]:
    hourly = offer.hourly(spot)
    return {
        "provider": offer.provider,
        "region": offer.region,
        "instance": offer.instance,
        "accelerator": offer.accelerator,
        "accelerator_count": offer.accelerator_count,
        "vcpus": offer.vcpus,
        "memory_gib": offer.memory_gib,
        "on_demand_hourly": offer.on_demand_hourly,
        "spot_hourly": offer.spot_hourly,
        "nodes": nodes,
        "pool_hourly": None if hourly is None else hourly * nodes,
    }


SHIPPED_MARK = "*"


def offers_table(rows: Sequence[Row], nodes: int, spot: bool) -> Table:
    table = Table(title=f"offers for {nodes} node(s){' on spot' if spot else ''}", title_justify="left")
    for column in ("provider", "region", "instance", "accelerators", "vCPUs", "memory", "on demand", "spot", "pool"):
        table.add_column(column, justify="left" if column in ("provider", "region", "instance") else "right")
    for row in rows:
        o = row.offer
        hourly = o.hourly(spot)
        mark = SHIPPED_MARK if row.source == SHIPPED else ""
        table.add_row(
            o.provider + mark,
            o.region,
            o.instance,
            "-" if o.accelerator is None else f"{o.accelerator_count} x {o.accelerator}",
            str(o.vcpus),
            f"{o.memory_gib:g} GiB",
            _maybe_rate(o.on_demand_hourly),
            _maybe_rate(o.spot_hourly),
            _maybe_rate(None if hourly is None else hourly * nodes),
        )
    return table


def offers_notes(rows: Sequence[Row], needs_account: Sequence[tuple[str, str, str]]) -> list[str]:
    """The lines under the offers table (stderr): what the mark means, who needs an account."""
    lines = []
    shipped = sorted({r.offer.provider for r in rows if r.source == SHIPPED})
    if shipped:
        lines.append(
            f"{SHIPPED_MARK} {', '.join(shipped)}: list prices from the catalog its plugin ships, no account needed "
            "(no spot prices)"
        )
    lines += [f"{provider}: {what} need an account: {fix}" for provider, what, fix in needs_account]
    return lines


def accelerators_table(entries: Sequence[CatalogEntry]) -> Table:
    table = Table(title="accelerators (ask for a model or a variant: A100, A100-80GB, A100:8)", title_justify="left")
    for column in ("model", "variant", "vendor", "memory", "kind", "also spelt"):
        table.add_column(column, justify="right" if column == "memory" else "left")
    for e in entries:
        table.add_row(e.model, e.variant, e.vendor, f"{e.memory_gb} GB", e.kind, ", ".join(e.aliases))
    return table


def size_text(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


def environment_json(env: CachedEnvironment) -> dict[str, Any]:
    return {
        "name": env.name,
        "path": str(env.path),
        "size": env.size,
        "last_used": env.last_used,
        "complete": env.complete,
        "kind": env.kind,
    }


def environments_table(envs: Sequence[CachedEnvironment], now: float, kind: str = "environment") -> Table:
    table = Table(title=f"cached {kind}s", title_justify="left")
    for column in (kind, "size", "last used", "complete"):
        table.add_column(column)
    for env in envs:
        table.add_row(
            env.name, size_text(env.size), f"{duration(now - env.last_used)} ago", "yes" if env.complete else "no"
        )
    return table
