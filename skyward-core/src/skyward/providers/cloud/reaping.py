"""Deleting what pools left behind: one by one, where one failure must not stop the rest,
and the rule for what may go (shared by the pool-start sweeps and ``skyward down --expired``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from skyward.cli.model import INSTANCE, Resource


def delete_doomed(
    resources: Iterable[Mapping[str, Any]],
    doomed: Callable[[str], bool],
    delete: Callable[[Mapping[str, Any]], object],
    what: str,
    error: type[Exception],
    failures: list[str],
) -> list[str]:
    """Delete each listed resource whose ``name`` is ``doomed``; returns the names deleted.

    A deletion that raises ``error`` is added to ``failures`` (as ``"<what> <name>: ..."``)
    and tried again by the next reaper; any other exception propagates.
    """
    deleted: list[str] = []
    for resource in resources:
        name = str(resource.get("name", ""))
        if not doomed(name):
            continue
        try:
            delete(resource)
        except error as exc:
            failures.append(f"{what} {name}: {exc}")
            continue
        deleted.append(name)
    return deleted


def doomed_resources(resources: Iterable[Resource], now: float, own_pool: str | None = None) -> list[Resource]:
    """Which of a provider's Skyward resources may be deleted now, instances first (pure).

    An instance goes once its pool's expiry has passed (its own TTL has ended its work),
    or once it is ``idle`` (stopped but still billing: nothing starts it again).
    Anything else of a pool (security group, firewall, key, role) goes once the pool has
    expired and none of its instances is left but those going now: a group still held by
    a live instance cannot be deleted, and a live pool needs its role. ``own_pool`` (the
    pool being started) is never touched; nor is anything without a pool mark.
    """
    listed = [r for r in resources if r.pool_id and r.pool_id != own_pool]
    instances = [r for r in listed if r.kind == INSTANCE and (r.expired(now) or r.idle)]
    going = {r.id for r in instances}
    live_pools = {r.pool_id for r in resources if r.kind == INSTANCE and r.id not in going}
    rest = [r for r in listed if r.kind != INSTANCE and r.expired(now) and r.pool_id not in live_pools]
    return instances + rest
