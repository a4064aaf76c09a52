"""What waits for a task: a ``concurrent.futures.Future``, or one slot of a batch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from skyward.errors import RemoteError


class Completion(Protocol):
    """What the I/O thread needs of whatever waits for a task."""

    def set_running_or_notify_cancel(self) -> bool: ...

    def set_result(self, result: Any, /) -> None: ...

    def set_exception(self, exception: BaseException | None, /) -> None: ...

    def done(self) -> bool: ...

    def cancelled(self) -> bool: ...


class BatchResult:
    """The completion of a batch of tasks: results by position and one Event.

    A Future per task is a Condition and an RLock; for 10,000 trivial tasks, creating,
    resolving and waiting on each one in turn costs the client more than the workers
    spend running the tasks (the client, one GIL, is what limits a gather). A batch takes
    one small slot per task and wakes its caller once: when everything is done, or when
    a failure can be reported.
    """

    def __init__(self, size: int, on_finish: Callable[[bool], None] | None = None) -> None:
        self.results: list[Any] = [None] * size
        self.errors: dict[int, BaseException] = {}
        self._finished = [False] * size
        self._remaining = size
        self._cancelled = False
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._on_finish = on_finish  # called with failed=True/False as each task ends
        self.on_abandon: Callable[[], None] | None = None  # set by the client: recall the rest
        self.on_interrupt: Callable[[], None] | None = None  # set by the client: interrupt the rest
        if size == 0:
            self._changed.set()

    def slot(self, index: int) -> _Slot:
        return _Slot(self, index)

    def slots(self) -> list[_Slot]:
        """Every task's slot, in order (one comprehension: no method call per task)."""
        return [_Slot(self, index) for index in range(len(self.results))]

    def _finish(self, index: int, value: Any, error: BaseException | None) -> None:
        with self._lock:
            if self._finished[index]:
                return
            self._finished[index] = True
            self._remaining -= 1
            if error is None:
                self.results[index] = value
            else:
                self.errors[index] = error
            wake = self._remaining == 0 or bool(self.errors)
        if self._on_finish is not None:
            self._on_finish(error is not None)
        if wake:
            self._changed.set()

    def wait(self) -> tuple[Any, ...]:
        """Every result in order; or the first failure in batch order, raised as soon as
        every task before it has finished. What has not begun is then recalled: it never
        starts (see ``Dispatcher.cancel``)."""
        try:
            while True:
                self._changed.wait()
                with self._lock:
                    if self.errors:
                        first = min(self.errors)
                        if all(self._finished[:first]):
                            raise self.errors[first]
                    elif self._remaining == 0:
                        return tuple(self.results)
                    self._changed.clear()
        except KeyboardInterrupt:  # the caller was interrupted: what runs stops too
            self._cancelled = True
            if self.on_interrupt is not None:
                self.on_interrupt()
            raise
        except BaseException:
            self._cancelled = True
            if self.on_abandon is not None:
                self.on_abandon()
            raise

    def unfinished(self) -> list[int]:
        with self._lock:
            return [i for i, done in enumerate(self._finished) if not done]


class _Slot:
    """One task's place in a BatchResult (quacks like the part of a Future the I/O thread uses)."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: BatchResult, index: int) -> None:
        self._batch = batch
        self._index = index

    def set_running_or_notify_cancel(self) -> bool:
        return not self._batch._cancelled

    def set_result(self, result: Any, /) -> None:
        self._batch._finish(self._index, result, None)

    def set_exception(self, exception: BaseException | None, /) -> None:
        self._batch._finish(self._index, None, exception or RemoteError("a task failed without an exception"))

    def done(self) -> bool:
        return self._batch._finished[self._index]

    def cancelled(self) -> bool:
        return self._batch._cancelled and not self._batch._finished[self._index]
