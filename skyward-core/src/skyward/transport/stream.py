"""What a stream's caller iterates: the values a remote generator yields, in order.

A stream is a task with many results (see ``wire``: ITEM per yielded value, then OK or
RAISED) and a bounded window: the worker sends at most ``window`` values ahead of what
this iterator has handed out, and is paused when none is left. Each time half the
window has been read, the iterator grants that many more (a CREDIT message through the
client's I/O thread), so the values held here never exceed ``window`` however fast the
generator is, and the worker rarely waits on a round trip.

The I/O thread only queues the raw frames; values are unpickled here, on the consuming
thread, so a fast stream does not load the thread every other task depends on.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from skyward.transport import serialize, wire
from skyward.transport.results import ResultDecoder

T = TypeVar("T")

# Values a worker may send ahead of the reader. 64 keeps what the client holds small
# whatever a value's size; a window of 1024 bought 1.11x (bench/bench_streams.py, 5
# alternating rounds of 300,000 ints on one Local worker: 89,605 against 99,895 values/s
# medians, this shared 2-core machine), the cost being per value, not waiting for credit.
STREAM_WINDOW = 64

FinishHandler = Callable[[bool], None]
"""Called once as a stream ends: True when it failed (a stream its reader stopped did not)."""


class StreamChannel:
    """The I/O thread's side of a stream (a ``Completion``): values arrive here, in order,
    then the end. The client holds this, not the ``RemoteStream`` the caller iterates, so
    dropping that iterator (``break`` out of a ``for`` loop) is seen at once."""

    def __init__(self, window: int, on_finish: FinishHandler | None) -> None:
        if window < 1:
            raise ValueError(f"a stream's window must be at least 1, got {window}")
        self.window = window
        # (frames, node, packed: several small values in one frame); None: the end
        self.items: deque[tuple[Sequence[serialize.Frame], int, bool] | None] = deque()
        self.error: BaseException | None = None
        self.ended = False  # the worker said the stream is over (or it failed)
        self.closed = False  # the reader wants no more
        # values handed to the reader; the first is counted under ``changed`` as it is
        # taken, so ``restart`` never drops a value the reader is about to get
        self.delivered = 0
        self.changed = threading.Condition(threading.Lock())
        self._on_finish = on_finish

    def item(self, frames: Sequence[serialize.Frame], node: int, packed: bool = False) -> None:
        with self.changed:
            if self.closed or self.ended:
                return
            self.items.append((frames, node, packed))
            self.changed.notify()

    def _end(self, error: BaseException | None) -> None:
        with self.changed:
            if self.ended:
                return
            self.ended = True
            if not self.closed:  # a reader that stopped has had its last value: StopIteration, whatever came after
                self.error = error
                self.items.append(None)
            self.changed.notify_all()
        if self._on_finish is not None:
            self._on_finish(error is not None and not self.closed)  # a stream the reader stopped did not fail

    def restart(self) -> int:
        """Its task starts again from the beginning on another worker (its node was lost):
        drop the values that arrived and that the reader has not taken, and return 0; or,
        when the reader has had values (they would come again) or stopped reading, change
        nothing and return how many it had (at least 1)."""
        with self.changed:
            if self.delivered or self.closed or self.ended:
                return max(1, self.delivered)
            self.items.clear()
            return 0

    def set_running_or_notify_cancel(self) -> bool:
        return not self.closed

    def set_result(self, result: Any, /) -> None:
        self._end(None)

    def set_exception(self, exception: BaseException | None, /) -> None:
        self._end(exception)

    def done(self) -> bool:
        return self.ended

    def cancelled(self) -> bool:
        return self.closed and not self.ended


class RemoteStream(Iterator[T], Generic[T]):
    """An iterator over a remote generator's values (``gen() >> pool``).

    ``close()``, leaving a ``with`` block, or dropping the iterator (``break`` out of
    ``for value in gen() >> pool``) stops the generator on the worker: its ``finally``
    runs there and the worker is free for the next task. An exception the generator
    raised is raised here, after every value it yielded before it, with the remote
    traceback as ``__cause__``; so is a lost worker (``WorkerDiedError``), a lost node or
    the pool's end.
    """

    def __init__(
        self,
        channel: StreamChannel,
        decoder: ResultDecoder,
        grant: Callable[[int], None],
        stop: Callable[[], None],
    ) -> None:
        self._channel = channel
        self._decoder = decoder
        self._grant = grant  # the client sends CREDIT for this many more values
        self._stop = stop  # the client drops or recalls the task
        self._read = 0  # values handed out since the last grant
        self._unpacked: deque[tuple[serialize.Frame, int]] = deque()  # small values of a packed frame, not yet read
        self._finished = False

    @property
    def window(self) -> int:
        return self._channel.window

    def __iter__(self) -> RemoteStream[T]:
        return self

    def __next__(self) -> T:
        channel = self._channel
        if self._unpacked and not channel.closed:
            channel.delivered += 1  # only this thread writes it; the first count was under the lock
            return self._value(*self._unpacked.popleft())
        self._unpacked.clear()
        with channel.changed:
            while not channel.items and not channel.closed:
                channel.changed.wait()
            if not channel.items:
                raise StopIteration
            entry = channel.items.popleft()
            if entry is not None:
                channel.delivered += 1
        if entry is None:
            self._finished = channel.closed = True
            if channel.error is not None:
                error, channel.error = channel.error, None
                raise error
            raise StopIteration
        frames, node, packed = entry
        if not packed:
            return self._value(frames, node)
        first, *rest = wire.unpack_values(frames[0])
        self._unpacked.extend((raw, node) for raw in rest)
        return self._value(first, node)

    def _value(self, frames: Sequence[serialize.Frame] | serialize.Frame, node: int) -> T:
        """Decode one value (a list of frames, or one packed pickle) and grant the worker
        more once half the window has been read."""
        self._read += 1
        if self._read * 2 >= self._channel.window:
            self._grant(self._read)
            self._read = 0
        one = isinstance(frames, bytes | memoryview)  # one value of a packed frame
        value: T = self._decoder.value(wire.Status.OK, [frames] if one else frames, node)
        return value

    def close(self) -> None:
        """Stop the generator on the worker (its ``finally`` runs) and drop what waits."""
        channel = self._channel
        with channel.changed:
            if channel.closed:
                return
            channel.closed = True
            ended = channel.ended
            channel.items.clear()
            channel.changed.notify_all()
        if not ended:
            self._stop()

    def __enter__(self) -> RemoteStream[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        channel = self._channel
        if not channel.closed and not channel.ended:
            channel.closed = True
            try:
                self._stop()  # lock-free: the client's I/O thread does the rest
            except Exception:
                pass  # the pool is gone: so is the worker's generator
