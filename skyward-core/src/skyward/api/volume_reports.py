"""What each node said of its volumes: the pool's open waits for every node's word.

A node's agent mounts (or downloads) its ``sky.Volume``s once the CLUSTER message brought
their keys, then says ``volumes`` (ok, or why not) in a NOTICE; its workers get the
CLUSTER message, and with it their first task, only after that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable


class VolumeReports:
    """Each node's word on its volumes (the client's I/O thread records, the opener waits)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._said: dict[int, str | None] = {}  # node -> None (ready) or why not
        self._changed = threading.Condition()
        self._clock = clock

    def record(self, node: int, ok: bool, message: str) -> None:
        with self._changed:
            self._said[node] = None if ok else message
            self._changed.notify_all()

    def wait(self, nodes: Iterable[int], timeout: float) -> dict[int, str]:
        """Node -> why its volumes are not ready, for each of ``nodes`` that failed or
        said nothing within ``timeout`` seconds (empty: every one is ready). Returns at
        the first failure: the pool fails its open without waiting for the rest."""
        wanted = set(nodes)
        deadline = self._clock() + timeout
        with self._changed:
            while True:
                failed = {n: why for n, why in self._said.items() if n in wanted and why is not None}
                if failed:
                    return failed
                missing = wanted - self._said.keys()
                left = deadline - self._clock()
                if not missing:
                    return {}
                if left <= 0:
                    return {n: f"node {n}: no word on its volumes within {timeout:g} s" for n in sorted(missing)}
                self._changed.wait(min(left, 1.0))
