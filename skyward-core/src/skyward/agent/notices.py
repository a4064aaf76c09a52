"""The drop box through which processes on a node tell the pool something (stdlib only).

A provider's watcher on the node (AWS's spot-interruption poller) writes one JSON object
per file into :func:`notices_dir`; the node's agent forwards each to the pool as a NOTICE
message, and the pool acts on its ``kind``. The directory and the kinds are defined here,
once, because three parties meet on them: the agent (reads), the provider's watcher
(writes) and the pool (acts).
"""

from __future__ import annotations

import enum


class NoticeKind(enum.StrEnum):
    """What a dropped notice means to the pool."""

    INTERRUPTION = "interruption"
    """The provider reclaims this (spot) node soon: its work runs again elsewhere."""
    REBALANCE = "rebalance"
    """An early hint that capacity is scarce: shown to the user only."""


def notices_dir(run_dir: str, node: int) -> str:
    """Node ``node``'s drop box under its run directory."""
    return f"{run_dir.rstrip('/')}/notices-{node}"
