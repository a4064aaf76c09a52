"""Names of what a pool creates on Verda, and which leftovers may be deleted (pure).

Verda instances have no tags, so the instance ``description`` carries the mark:
``skyward pool=<pool id> expires=<unix time>``, the time after which no node of the pool
can still be doing useful work. Startup scripts and the throwaway SSH key are named
``skyward-<pool id>-<expiry>[-<node>]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from skyward.errors import ConfigurationError
from skyward.providers.cloud import naming as shared
from skyward.providers.cloud.naming import RUN_DIR_PREFIX, PoolMark

_POOL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
_DESCRIPTION = re.compile(r"^skyward pool=(?P<pool>[a-z0-9][a-z0-9-]{0,40}) expires=(?P<expires>\d{9,11})$")
_RESOURCE = re.compile(r"^skyward-(?P<pool>[a-z0-9][a-z0-9-]{0,40}?)-(?P<expires>\d{9,11})(?:-\d+)?$")
# Statuses of an instance that no longer runs a node but may still bill.
DEAD = frozenset({"offline", "error", "discontinued", "notfound", "no_capacity"})


def check_pool_id(pool_id: str) -> str:
    if not _POOL_ID.match(pool_id):
        raise ConfigurationError(f"pool id {pool_id!r} cannot name Verda resources: use lowercase letters, digits, '-'")
    return pool_id


def description(pool_id: str, expires: int) -> str:
    return f"skyward pool={check_pool_id(pool_id)} expires={expires}"


def hostname(pool_id: str, node: int) -> str:
    return f"{check_pool_id(pool_id)}-{node}"


def resource_name(pool_id: str, expires: int, node: int | None = None) -> str:
    suffix = "" if node is None else f"-{node}"
    return f"skyward-{check_pool_id(pool_id)}-{expires}{suffix}"


def run_dir(pool_id: str) -> str:
    return f"{RUN_DIR_PREFIX}{check_pool_id(pool_id)}"


def parse_description(text: str) -> PoolMark | None:
    match = _DESCRIPTION.match(text or "")
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


def parse_resource_name(name: str) -> PoolMark | None:
    match = _RESOURCE.match(name or "")
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


@dataclass(frozen=True, slots=True)
class InstanceView:
    id: str
    hostname: str
    status: str
    description: str
    os_volume_id: str | None


@dataclass(frozen=True, slots=True)
class Doomed:
    instance: InstanceView
    reason: str


def instances_to_reap(instances: Iterable[InstanceView], now: float, own_pool: str | None = None) -> list[Doomed]:
    """Skyward instances of other pools that only cost money now: shut down (skyward never
    starts a node again) or past their pool's expiry. Others are never touched."""
    doomed = []
    for instance in instances:
        mark = parse_description(instance.description)
        if mark is None or mark.pool_id == own_pool:
            continue
        if instance.status in DEAD:
            doomed.append(Doomed(instance, f"{instance.status} (a shut-down instance and its disk still bill)"))
        elif now > mark.expires:
            doomed.append(Doomed(instance, f"its pool {mark.pool_id} expired at {mark.expires}"))
    return doomed


def expired_names(names: Iterable[str], now: float, live_pools: set[str]) -> list[str]:
    """Names of scripts/keys whose pool has expired and has no instance left."""
    return shared.expired_names(names, parse_resource_name, now, live_pools)
