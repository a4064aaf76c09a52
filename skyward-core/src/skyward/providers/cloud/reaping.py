"""Deleting what pools left behind: one by one, where one failure must not stop the rest,
and the rule for what may go (shared by the pool-start sweeps and ``skyward down --expired``).

The reapers of the clouds with instances, firewalls and keys (DigitalOcean, Verda) share
three steps here: delete the doomed instances (:func:`delete_instances`), find the pools
still alive (:func:`live_pools`: their other resources stay), and report for a cron job
(:func:`reaper_exit`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from skyward.providers.cloud.naming import PoolMark
from skyward.providers.resources import INSTANCE, Resource

Id = TypeVar("Id", bound=Hashable)  # an instance id: DigitalOcean's int, Verda's str


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


def delete_instances(
    doomed: Iterable[tuple[Id, str, str]],
    delete: Callable[[Id], object],
    what: str,
    error: type[Exception],
    failures: list[str],
    say: Callable[[str], None],
) -> list[tuple[Id, str, str]]:
    """Delete each doomed ``(id, name, reason)``; returns those deleted. A deletion that
    raises ``error`` goes to ``failures`` as ``"<what> <name> (<id>): ..."`` (the way the
    ``say`` line names it) and is tried again by the next reaper."""
    deleted: list[tuple[Id, str, str]] = []
    for ident, name, reason in doomed:
        try:
            delete(ident)
        except error as exc:
            failures.append(f"{what} {name} ({ident}): {exc}")
            continue
        deleted.append((ident, name, reason))
        say(f"deleted {what} {name} ({ident}): {reason}")
    return deleted


def live_pools(
    marks: Iterable[tuple[Id, PoolMark | None]], deleted: Iterable[tuple[Id, str, str]], own_pool: str | None
) -> set[str]:
    """The pools that keep their other resources: those with an instance left (``marks``:
    each listed instance's id and pool mark, less the ``deleted``), and the pool starting."""
    gone = {ident for ident, _, _ in deleted}
    alive = {mark.pool_id for ident, mark in marks if mark is not None and ident not in gone}
    return alive if own_pool is None else alive | {own_pool}


def reaper_exit(failures: Sequence[str], counts: Sequence[tuple[int, str]]) -> int:
    """A reaper's ``main``: each failure on stderr, then one summary line (``counts``:
    ``(3, "droplet")``...); 1 when anything could not be deleted (cron mails it)."""
    for failure in failures:
        print(f"could not delete {failure}", file=sys.stderr)
    done = ", ".join(f"{count} {noun}(s)" for count, noun in counts)
    print(f"skyward reaper: deleted {done}; {len(failures)} failure(s)")
    return 1 if failures else 0
