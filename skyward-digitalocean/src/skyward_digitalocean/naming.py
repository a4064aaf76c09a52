"""Names and tags of what a pool creates, and which leftovers may be deleted.

Every droplet carries two tags: ``skyward`` (all of skyward's droplets, so a reaper can
list them) and ``skyward-pool:<pool id>:<expiry>`` (this pool's, with the Unix time after
which no node of the pool can still be doing useful work). Firewalls and SSH keys are
named ``skyward-<pool id>-<expiry>``. Pure functions: no I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from skyward.errors import ConfigurationError
from skyward.providers.cloud.naming import RUN_DIR_PREFIX, PoolMark, expired_names

COMMON_TAG = "skyward"
_POOL_TAG = re.compile(r"^skyward-pool:(?P<pool>[a-z0-9][a-z0-9-]{0,62}):(?P<expires>\d{9,11})$")
_RESOURCE = re.compile(r"^skyward-(?P<pool>[a-z0-9][a-z0-9-]{0,62})-(?P<expires>\d{9,11})$")
_POOL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def check_pool_id(pool_id: str) -> str:
    if not _POOL_ID.match(pool_id):
        raise ConfigurationError(
            f"pool id {pool_id!r} cannot name DigitalOcean resources: use lowercase letters, digits and '-'"
        )
    return pool_id


def pool_tag(pool_id: str, expires: int) -> str:
    return f"skyward-pool:{check_pool_id(pool_id)}:{expires}"


def resource_name(pool_id: str, expires: int) -> str:
    """Name of the pool's firewall and SSH key (letters, digits, '-' as DO requires)."""
    return f"skyward-{check_pool_id(pool_id)}-{expires}"


def droplet_name(pool_id: str, node: int) -> str:
    """A valid hostname: ``sky-1a2b3c4d-0``."""
    return f"{check_pool_id(pool_id)}-{node}"


def run_dir(pool_id: str) -> str:
    """Where a node's agent keeps its worker sockets."""
    return f"{RUN_DIR_PREFIX}{check_pool_id(pool_id)}"


def parse_pool_tag(tag: str) -> PoolMark | None:
    match = _POOL_TAG.match(tag)
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


def parse_resource_name(name: str) -> PoolMark | None:
    match = _RESOURCE.match(name)
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


def pool_mark(tags: Iterable[str]) -> PoolMark | None:
    for tag in tags:
        mark = parse_pool_tag(tag)
        if mark is not None:
            return mark
    return None


@dataclass(frozen=True, slots=True)
class DropletView:
    """What the reaper needs to know about a droplet."""

    id: int
    name: str
    status: str  # new | active | off | archive
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Doomed:
    droplet: DropletView
    reason: str


def droplets_to_reap(droplets: Iterable[DropletView], now: float, own_pool: str | None = None) -> list[Doomed]:
    """Skyward droplets of other pools that only cost money now.

    A droplet qualifies when it carries both skyward tags and either it is powered off
    (its agent is gone: skyward never powers a node back on) or its pool's expiry has
    passed (its own TTL has ended it). Droplets without skyward's tags are never touched.
    """
    doomed = []
    for droplet in droplets:
        if COMMON_TAG not in droplet.tags:
            continue
        mark = pool_mark(droplet.tags)
        if mark is None or mark.pool_id == own_pool:
            continue
        if droplet.status == "off":
            doomed.append(Doomed(droplet, "powered off (a powered-off droplet is still billed)"))
        elif now > mark.expires:
            doomed.append(Doomed(droplet, f"its pool {mark.pool_id} expired at {mark.expires}"))
    return doomed


def expired_marks(names: Iterable[str], now: float, live_pools: set[str]) -> list[str]:
    """Names of firewalls/keys whose pool has expired and has no droplet left."""
    return expired_names(names, parse_resource_name, now, live_pools)
