"""When a pool's leftovers may be deleted: its expiry, and the marks that carry it (pure).

Each provider marks what a pool creates in its own way (DigitalOcean tags, Verda
descriptions) and parses its marks back into a :class:`PoolMark`; the rules on top of
those marks are the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REAP_SLACK = 300.0  # seconds past a node's own last moment before a reaper may delete it
RUN_DIR_PREFIX = "/tmp/skyward-"  # per pool; the agent makes it 0700 (single-tenant VM)


@dataclass(frozen=True, slots=True)
class PoolMark:
    pool_id: str
    expires: int


def lifetime(timeout: float, bootstrap_timeout: float, ttl_margin: float) -> float:
    """Seconds from a pool's start after which none of its nodes can still be working.

    A node arms its own TTL (the pool's timeout plus ``ttl_margin``) when its bootstrap
    starts, and bootstrap takes at most ``bootstrap_timeout``; ``REAP_SLACK`` covers
    clock skew and shutdown. Every provider's expiry label counts with this.
    """
    return bootstrap_timeout + timeout + ttl_margin + REAP_SLACK


def expiry(now: float, timeout: float, bootstrap_timeout: float, ttl_margin: float) -> int:
    """The Unix time after which none of the pool's nodes can still be working (see
    :func:`lifetime`)."""
    return math.ceil(now + lifetime(timeout, bootstrap_timeout, ttl_margin))


def is_expired(mark: PoolMark | None, now: float, live_pools: set[str]) -> bool:
    """Whether a marked resource may go: its pool has expired and has no node left."""
    return mark is not None and now > mark.expires and mark.pool_id not in live_pools


def expired_names(
    names: Iterable[str], parse: Callable[[str], PoolMark | None], now: float, live_pools: set[str]
) -> list[str]:
    """The ``names`` (read with ``parse``) whose pool has expired and has no node left."""
    return [name for name in names if is_expired(parse(name), now, live_pools)]
