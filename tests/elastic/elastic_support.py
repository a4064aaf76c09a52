"""What the elastic end-to-end tests share: an event log a test waits on, and the means
to hurt a Local node from outside (its process group killed or stopped, as a host that
died or froze).

Every wait is a condition with a deadline (``until``): a loaded 2-core machine makes a
node take seconds to start, never a wrong answer, so no test times anything.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import pytest

import skyward as sky
from skyward.events import NodeAdded, NodeRemoved, PoolResized, SkywardEvent

E = TypeVar("E")

WAIT = 90.0
"""Seconds a condition may take before the test fails naming it: generous (a node's
start on a machine shared with other test runs takes seconds), it catches a hang."""


class EventLog:
    """Every event a pool emitted, in order; safe to read while the pool runs."""

    def __init__(self) -> None:
        self._events: list[SkywardEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: SkywardEvent) -> None:
        with self._lock:
            self._events.append(event)

    def all(self) -> list[SkywardEvent]:
        with self._lock:
            return list(self._events)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.all() if isinstance(e, kind)]

    def added(self, reason: str | None = None) -> list[NodeAdded]:
        return [e for e in self.of(NodeAdded) if reason is None or e.reason == reason]

    def removed(self, reason: str | None = None) -> list[NodeRemoved]:
        return [e for e in self.of(NodeRemoved) if reason is None or e.reason == reason]

    def resized(self) -> list[PoolResized]:
        return self.of(PoolResized)


def until(what: str, condition: Callable[[], bool], seconds: float = WAIT) -> None:
    """Waits for ``condition()``; fails the test naming ``what`` when it is still false
    after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {seconds:g} s for {what}", pytrace=False)
        time.sleep(0.05)


def running(pool: sky.ComputePool) -> int:
    """Tasks on a worker now, as the pool's client counts them."""
    client = pool._client
    return 0 if client is None else client.load().running


def instance_at(pool: sky.ComputePool, node: int) -> str:
    """The instance id of the member at index ``node``."""
    return next(h.instance_id for h in pool.nodes if h.node == node)


def live_count(pool: sky.ComputePool) -> int:
    return len(pool.nodes)


def node_group(pool: sky.ComputePool, node: int) -> int:
    """The process group id of Local node ``node`` (its bootstrap shell, agent and workers)."""
    handle = next(h for h in pool.nodes if h.node == node)
    driver = pool._driver
    for local in driver._nodes:  # type: ignore[attr-defined]
        if local.instance_id == handle.instance_id:
            return int(local.process.pid)
    raise AssertionError(f"node {node} ({handle.instance_id}) is not one of the Local driver's running nodes")


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie, dead but not reaped by
    a container's init, does not count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            return True
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group: the host died."""
    os.killpg(pgid, signal.SIGKILL)


def instance_ids(pool: sky.ComputePool) -> set[str]:
    return {h.instance_id for h in pool.nodes}


def indices(pool: sky.ComputePool) -> list[int]:
    return sorted(h.node for h in pool.nodes)


def results_ok(results: Sequence[int], count: int) -> bool:
    return list(results) == [i + 1 for i in range(count)]
