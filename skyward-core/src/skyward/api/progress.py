"""Task counts for ``TaskProgress``, throttled in one place for every path."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

PROGRESS_INTERVAL = 0.1  # at most one TaskProgress per 100 ms: a stream of quick calls
# does not wake the event thread once per task (the last one is sent by ``flush_due``)


class Progress:
    """Counts submitted, done and failed tasks; ``emit(done, submitted, failed)`` is called
    at most every ``PROGRESS_INTERVAL`` (a change inside the interval is left due, and
    ``flush_due`` sends it later)."""

    def __init__(self, emit: Callable[[int, int, int], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._emit = emit
        self._clock = clock
        self._lock = threading.Lock()
        self.submitted = self.done = self.failed = 0
        self._last = -PROGRESS_INTERVAL
        self._due = False

    def add(self, count: int) -> None:
        with self._lock:
            self.submitted += count

    def finished(self, failed: bool) -> None:
        now = self._clock()
        with self._lock:
            if failed:
                self.failed += 1
            else:
                self.done += 1
            if now - self._last < PROGRESS_INTERVAL:
                self._due = True
                return
            self._last = now
            self._due = False
            counts = (self.done, self.submitted, self.failed)
        self._emit(*counts)

    def track(self, future: Future[Any]) -> None:
        """Count the future when it ends (cancelled counts as failed)."""
        self.add(1)
        future.add_done_callback(lambda f: self.finished(f.cancelled() or f.exception() is not None))

    def flush_due(self) -> None:
        with self._lock:
            if not self._due:
                return
            self._due = False
            self._last = self._clock()
            counts = (self.done, self.submitted, self.failed)
        self._emit(*counts)
