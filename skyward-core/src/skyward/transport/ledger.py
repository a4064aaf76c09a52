"""The client's book of tasks: what waits for each one, its frames until it ends, and
the one lock every part of the client takes to read or change it.

The ``Dispatcher`` decides where each task goes; the ledger keeps what the dispatcher
does not (the ``Completion`` each task resolves, the frames to send again after a
recall, the feeder of a task's input streams) and keeps the two consistent: a task the
dispatcher forgets is forgotten here in the same locked step. Callers enqueue on any
thread; the I/O thread settles results (``settle``) and resolves completions outside the
lock, since user callbacks may run there.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError

from skyward.errors import AbandonedError, NodeLostError
from skyward.transport import serialize, wire
from skyward.transport.completion import Completion
from skyward.transport.dispatcher import DEFAULT_RETRIES, CancelOutcome, Dispatcher, WorkerKey
from skyward.transport.inputs import Feeder
from skyward.transport.stream import StreamChannel

__all__ = ["Settled", "TaskLedger", "claim", "ended_by_recall", "fail"]

# statuses up to this one end a task (OK, RAISED, RECALLED); later ones (ITEM, WANT,
# ITEMS) come while it runs: one comparison keeps plain results on their quick path
_LAST_FINAL = wire.Status.RECALLED

Settled = tuple[Completion, wire.Status, list[serialize.Frame]]
"""A completion to resolve (outside the lock) with a result's status and frames."""


class TaskLedger:
    """Completions, frames and feeders of the tasks in flight, under one lock."""

    def __init__(self, rerun_lost: bool = False, wait_for_nodes: bool = False) -> None:
        # rerun_lost: the tasks a lost or drained node held run again elsewhere (within
        # their function's retries); wait_for_nodes: with no node left, work waits for one
        self.lock = threading.Lock()
        self.dispatcher = Dispatcher([], rerun_lost=rerun_lost, wait_for_nodes=wait_for_nodes)
        self.completions: dict[int, Completion] = {}
        # A task's frames are kept until its result arrives: a task recalled from a busy
        # worker or re-run after an interruption is sent again. What this keeps alive
        # beyond the queue is at most a window of tasks per worker.
        self.payloads: dict[int, list[serialize.Frame]] = {}
        self.feeders: dict[int, Feeder] = {}  # tasks with input streams: who reads them here
        self.future_ids: weakref.WeakKeyDictionary[Future[object], int] = weakref.WeakKeyDictionary()
        self._ids = itertools.count(1)
        self.closed_reason: BaseException | None = None
        # streams nobody reads any more (closed, or dropped: appended from __del__, so
        # without the lock); the I/O thread drops or recalls them
        self.stopped_streams: deque[int] = deque()

    def next_id(self) -> int:
        return next(self._ids)

    def check_open(self) -> None:
        if self.closed_reason is not None:
            raise self.closed_reason

    # -- callers (any thread) ------------------------------------------------------------

    def enqueue(
        self,
        payloads: Sequence[list[serialize.Frame]],
        completions: Sequence[Completion],
        target: WorkerKey | None,
        stream: bool = False,
        feed: Callable[[int, Completion], None] | None = None,
        retries: Sequence[int | None] | None = None,
    ) -> list[int]:
        """Queue tasks; ``feed(task_id, completion)`` starts each one's input feeder (under
        the lock, so its WANT finds it). ``retries``: each task's function's
        ``sky.compute(retries=...)`` (None: ``DEFAULT_RETRIES``). A task whose target's
        node is lost fails at once."""
        ids: list[int] = []
        refused: list[tuple[Completion, str]] = []
        budgets = [DEFAULT_RETRIES if r is None else r for r in retries] if retries is not None else None
        with self.lock:
            self.check_open()
            for position, (frames, completion) in enumerate(zip(payloads, completions, strict=True)):
                task_id = next(self._ids)
                ids.append(task_id)
                budget = DEFAULT_RETRIES if budgets is None else budgets[position]
                problem = self.dispatcher.submit(task_id, bytes(frames[0]), target, budget, stream)
                if problem is not None:
                    refused.append((completion, problem))
                    continue
                self.completions[task_id] = completion
                self.payloads[task_id] = frames
                if feed is not None:
                    feed(task_id, completion)
        for completion, problem in refused:
            fail(completion, NodeLostError(problem))
        return ids

    def track(self, futures: Sequence[Future[object]], ids: Sequence[int]) -> None:
        """Remember each future's task (``abandon_futures`` finds it by its future)."""
        for task_id, future in zip(ids, futures, strict=True):
            self.future_ids[future] = task_id

    def task_of(self, future: Future[object]) -> int | None:
        return self.future_ids.get(future)

    # -- the I/O thread (the lock held where it says so) --------------------------------

    def forget(self, task_id: int) -> None:
        """Drop what the ledger keeps for the task (under the lock)."""
        self.completions.pop(task_id, None)
        self.payloads.pop(task_id, None)
        if self.feeders:
            feeder = self.feeders.pop(task_id, None)
            if feeder is not None:
                feeder.stop()

    def abandon(self, task_ids: Iterable[int], interrupt: bool = False) -> None:
        """Nobody wants these results: drop what is queued; what was sent is recalled by
        the dispatcher's next ``recalls`` (with ``interrupt``, interrupted where it runs)."""
        with self.lock:
            for task_id in task_ids:
                if self.dispatcher.cancel(task_id, interrupt) is CancelOutcome.DROPPED:
                    self.forget(task_id)

    def abandon_stopped_streams(self) -> None:
        """Drop or recall the streams their readers stopped (lock-free appends: ``__del__``)."""
        if self.stopped_streams:
            stopped = []
            while self.stopped_streams:
                stopped.append(self.stopped_streams.popleft())
            self.abandon(stopped)

    def cancelled(self, task_id: int) -> None:
        with self.lock:
            self.dispatcher.cancel(task_id)
            self.forget(task_id)

    def fail_where(self, decide: Callable[[Dispatcher], Sequence[tuple[int, BaseException]]]) -> None:
        """Under the lock, ``decide`` tells the dispatcher what happened and returns the
        tasks it gave up on, each with its error; the ledger forgets them in the same
        step and fails their completions after it."""
        with self.lock:
            doomed = decide(self.dispatcher)
            failed = [(self.completions.pop(task_id, None), error) for task_id, error in doomed]
            for task_id, _ in doomed:
                self.forget(task_id)
        for completion, error in failed:
            if completion is not None:
                fail(completion, error)

    def restart(self, task_id: int) -> str | None:
        """Whether a task a lost node was running as a stream can start again from its
        beginning (None), or why not; under the lock. A stream whose reader has had none
        of its values can: what had arrived of it is dropped. One whose reader has had
        values cannot (they would come again), nor can a task whose input streams were
        being read (their items are gone)."""
        if task_id in self.feeders:
            return "it was reading input streams, whose items are spent: it is not run again"
        completion = self.completions.get(task_id)
        if isinstance(completion, StreamChannel):
            if completion.closed:
                return "its reader had stopped reading it"
            delivered = completion.restart()
            if delivered:
                values = "1 value" if delivered == 1 else f"{delivered} values"
                return (
                    f"the stream had delivered {values} to its reader, and a stream is not restarted "
                    "midway (its values would come again)"
                )
        return None

    def settle(
        self,
        key: WorkerKey,
        entries: list[tuple[int, wire.Status, int, float]],
        frames: list[serialize.Frame],
        now: float,
    ) -> list[Settled]:
        """The bookkeeping of one RESULTS message from worker ``key``, under the lock: what
        to resolve, in order (the I/O thread resolves it outside the lock)."""
        done: list[Settled] = []
        dispatcher = self.dispatcher
        with self.lock:
            offset = 0
            for task_id, status, count, seconds in entries:
                payload = frames[offset : offset + count]
                offset += count
                if status > _LAST_FINAL:  # a stream's value or an input stream's WANT: it goes on
                    if status == wire.Status.WANT:
                        feeder = self.feeders.get(task_id)
                        if feeder is not None and payload:
                            feeder.want(*wire.unpack_want(payload[0]))
                        continue
                    completion = self.completions.get(task_id)
                    if completion is not None:
                        done.append((completion, status, payload))
                    continue
                if status == wire.Status.RECALLED:
                    abandoned = dispatcher.recalled(key, task_id)
                    completion = self.completions.get(task_id) if abandoned else None
                    if not dispatcher.is_pending(task_id):
                        self.forget(task_id)
                else:
                    dispatcher.completed(key, task_id, seconds, now)
                    completion = self.completions.pop(task_id, None)  # the first result wins
                    self.payloads.pop(task_id, None)
                    if self.feeders:
                        feeder = self.feeders.pop(task_id, None)
                        if feeder is not None:
                            feeder.stop()
                if completion is not None:
                    done.append((completion, status, payload))
        return done

    def close(self, error: BaseException) -> dict[WorkerKey, list[int]] | None:
        """Fail everything outstanding with ``error``; what each worker held (to recall),
        or None when the ledger was closed already."""
        with self.lock:
            if self.closed_reason is not None:
                return None
            self.closed_reason = error
            held = {k: self.dispatcher.inflight(k) for k in self.dispatcher.workers()}
            self.dispatcher.drop_all()
            completions, self.completions = self.completions, {}
            self.payloads.clear()
            feeders, self.feeders = self.feeders, {}
        for feeder in feeders.values():
            feeder.stop()
        for completion in completions.values():
            fail(completion, error)
        return held


def ended_by_recall(completion: Completion) -> None:
    """A task the worker dropped on a recall (it was abandoned): a plain task never ran;
    a stream's generator was closed where it stood, which its reader asked for."""
    if isinstance(completion, StreamChannel):
        completion.set_result(None)
    else:
        fail(completion, AbandonedError("the task was abandoned before it began: it never ran"))


def claim(completion: Completion) -> bool:
    """Mark the completion running as its task is sent; False if it was cancelled. A task
    sent again (stolen from a busy worker, or re-run after an interruption) is running
    already."""
    if completion.done():
        return False
    if isinstance(completion, Future) and completion.running():
        return True
    return completion.set_running_or_notify_cancel()


def fail(completion: Completion, error: BaseException) -> None:
    """Fail a completion unless it already finished or was cancelled."""
    if completion.done():
        return
    try:
        completion.set_exception(error)
    except InvalidStateError:
        pass  # cancelled (or resolved) on another thread meanwhile
