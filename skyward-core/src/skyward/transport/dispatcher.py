"""Which task goes to which worker, and when: pure bookkeeping, no sockets, no threads.

The client's I/O thread owns one ``Dispatcher`` and turns its decisions into messages;
unit tests drive it directly (tests/unit/test_dispatcher*.py, hypothesis over
interleavings of submit, complete, cancel and node loss).

Rules it keeps:

- A worker holds at most ``window`` tasks (what it runs plus what waits on it). The
  window adapts to how long the function's tasks take (the worker reports each task's
  run time): a function not yet measured gets 1, and a measured one gets enough tasks to
  cover about one round trip (``PREFETCH_SECONDS``, or the round trip measured to that
  worker when longer), at most ``MAX_WINDOW``. Quick tasks travel 16 at a time, which
  is what makes a 10,000-task gather cheap; a task that takes 0.1 s is never sent to
  wait behind another, so a worker that frees up takes the next one from the client's
  queue and no queued task waits behind a long one while a worker is idle.
- Cancelling a queued task removes it: it never starts. A task already sent is recalled:
  the worker drops it if it has not begun (``recalled``), or its result comes back.
- A task meant for one worker (``@``) whose node is lost fails at once. A task a lost
  node was running goes back to the front of the queue and runs again elsewhere when
  the pool re-runs lost work (``rerun_lost``) and the task has re-runs left (its
  function's ``retries``); otherwise it fails. A stream is re-run only while none of
  its values reached its reader (the client says which: ``node_lost``'s ``restart``).
- When no node is left (every one lost or gone, or none yet), queued work waits for a
  node to join if the pool waits for nodes (``wait_for_nodes``), and fails otherwise;
  ``fail_waiting`` fails what waits when no node will come.
- A worker busy with a long task (its oldest task out for ``STEAL_AFTER``) takes no
  queued work; when another worker is idle and nothing is queued, the tasks waiting
  behind the long one are recalled and go to the idle worker (work stealing). A recalled
  task that had already begun simply delivers its result: nothing runs twice.
- A drained node (spot interruption notice) takes no new work; its re-runnable tasks go
  back to the front of the queue (a re-run, counted against the task's ``retries``),
  and the first result of a task wins.
- Each live node's idle time is kept (``load``): when it last ran out of work, to the
  precision of one call to ``assign`` (one turn of the client's I/O thread).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from skyward.transport.load import ClientLoad

MAX_WINDOW = 16
# Work sent ahead of need (beyond the running task) is kept to about this much time, so
# a queued task waits on a worker no longer than it would take to send it elsewhere.
# 2 ms: on this machine a round trip is ~0.1 ms; tasks of 0.1 ms then travel 16 at a
# time (bench: gather of 10,000 trivial tasks unchanged), tasks of 5 ms or more one by one.
PREFETCH_SECONDS = 0.002
# A worker whose oldest task has been out this long is busy with a long one: it takes no
# queued work, and when another worker is idle, what waits behind the long task is
# recalled and runs there (work stealing; the worker answers a RECALL during a long task,
# see agent/watch.py, which engages after 20 ms).
STEAL_AFTER = 0.05
_EWMA = 0.3  # weight of a new duration sample: follows a change within a few tasks
# How many times a task a lost node was running runs again elsewhere, unless its
# function says otherwise (``@sky.compute(retries=n)``). One: a node lost under a task
# is almost always the node's fault (a host failure, a reclaimed instance, an OOM-killed
# agent), and one more run tells that apart from a task that takes down every node it
# runs on, which a higher default would let destroy that many nodes first.
DEFAULT_RETRIES = 1

WorkerKey = tuple[int, int]  # (node, worker)


class CancelOutcome(Enum):
    """What cancelling a task did."""

    DROPPED = "dropped"  # it was waiting in the client: it will never start
    RECALLING = "recalling"  # it was sent: a RECALL goes to its worker (see ``recall_for``)
    UNKNOWN = "unknown"  # finished, failed or never known


@dataclass
class _WorkerState:
    key: WorkerKey
    inflight: dict[int, float] = field(default_factory=dict)  # task id -> time sent (ordered)
    targeted: deque[int] = field(default_factory=deque)  # tasks for this worker alone
    available: bool = True
    reserved: int = 0  # direct calls in flight on the callers' own sockets
    direct_since: float | None = None  # when the oldest of them was sent
    round_trip: float = 0.0

    def load(self) -> int:
        return len(self.inflight) + self.reserved


@dataclass(slots=True)
class _TaskState:
    fn_key: bytes
    target: WorkerKey | None
    retries: int  # how many times it may run again after its node was lost or drained
    where: WorkerKey | None = None  # the worker that holds it, None while queued
    abandoned: bool = False  # cancelled after it was sent: a recall is on its way
    stealing: bool = False  # recalled from a worker stuck on a long task, to run elsewhere
    reruns: int = 0
    stream: bool = False  # a generator (or a task with input streams): never stolen once sent


Restart = Callable[[int], "str | None"]
"""For a stream a lost node was running: why it cannot start again from its beginning
(its reader has had values, its inputs were read), or None when it can (the client
has then forgotten whatever it had received of it)."""


def _restartable(_task_id: int) -> str | None:
    return None


@dataclass(frozen=True)
class Failure:
    """A task the dispatcher gave up on, and why (the client fails its completion)."""

    task_id: int
    reason: str
    node_lost: bool


class Dispatcher:
    """Queue, per-worker windows, cancellation, node loss and re-runs for one pool.

    One class past 300 lines on purpose: every rule above reads and changes the same
    few structures (the queue, each worker's in-flight tasks, the task table) in one step
    the client makes under one lock, and the hypothesis state machine checks them
    together; split, each part would reach into the others' state.
    """

    def __init__(self, workers_per_node: Iterable[int], rerun_lost: bool = False, wait_for_nodes: bool = False) -> None:
        # rerun_lost: the tasks of a lost or drained node run again elsewhere, within
        # their retries; wait_for_nodes: with no node left, queued work waits for one
        self.rerun_lost = rerun_lost
        self.wait_for_nodes = wait_for_nodes
        self._tasks: dict[int, _TaskState] = {}
        self._queue: deque[int] = deque()
        self._workers: dict[WorkerKey, _WorkerState] = {}
        self._nodes: dict[int, list[WorkerKey]] = {}
        self._lost: set[int] = set()
        self._draining: set[int] = set()
        self._durations: dict[bytes, float] = {}
        self._recalls: dict[WorkerKey, list[int]] = {}
        self._cancels: dict[WorkerKey, list[int]] = {}  # tasks to interrupt where they run
        self._idle_since: dict[int, float] = {}  # live nodes with nothing to do, since when
        self._maybe_idle: set[int] = set()  # nodes whose load fell: stamped at the next assign
        for node, count in enumerate(workers_per_node):
            self.set_node(node, count)

    # -- nodes and workers -------------------------------------------------------------

    def set_node(self, node: int, workers: int) -> list[int]:
        """(Re)declare a node with ``workers`` fresh workers (a replacement starts clean).
        Returns the tasks the old node still held or was meant to run alone: they fail."""
        orphans: list[int] = []
        for key in self._nodes.get(node, []):
            old = self._workers.pop(key)
            self._recalls.pop(key, None)
            self._cancels.pop(key, None)
            for task_id in [*old.inflight, *old.targeted]:
                if self._tasks.pop(task_id, None) is not None:
                    orphans.append(task_id)
        keys = [(node, w) for w in range(workers)]
        self._nodes[node] = keys
        for key in keys:
            self._workers[key] = _WorkerState(key)
        self._lost.discard(node)
        self._draining.discard(node)
        self._idle_since.pop(node, None)
        self._maybe_idle.add(node)
        return orphans

    def remove_node(self, node: int) -> list[Failure]:
        """Forget a node that left the pool (elastic pools shrink while work runs). Returns
        the tasks it still held or was meant to run alone: they fail. Queued tasks stay
        queued for the nodes that remain, or one that joins later; when none remains and
        the pool does not wait for nodes, they fail too."""
        why = f"node {node} left the pool before this task ended"
        failures: list[Failure] = []
        for key in self._nodes.pop(node, []):
            old = self._workers.pop(key)
            self._recalls.pop(key, None)
            self._cancels.pop(key, None)
            for task_id in [*old.inflight, *old.targeted]:
                task = self._tasks.get(task_id)
                if task is None:
                    continue
                if task.where is not None and task.where != key:
                    continue  # re-run elsewhere after a drain: it is the other worker's now
                del self._tasks[task_id]
                failures.append(Failure(task_id, why, node_lost=True))
        self._lost.discard(node)
        self._draining.discard(node)
        self._idle_since.pop(node, None)
        self._maybe_idle.discard(node)
        return failures + self._fail_if_none_left(f"node {node} left the pool")

    def node_load(self, node: int) -> int:
        """Tasks a node's workers hold or run directly: 0 once a drained node has finished
        what it had (its tasks for it alone that were never sent wait there for good)."""
        return sum(self._workers[key].load() for key in self._nodes.get(node, []))

    def worker_died(self, key: WorkerKey) -> list[int]:
        """The worker's process died: what it held fails (first, the one it was running).
        It takes nothing until ``worker_ready``. (The task may well have killed it: it is
        not run again, unlike the tasks of a lost node.)"""
        worker = self._workers[key]
        worker.available = False
        lost = [t for t in worker.inflight if t in self._tasks]
        worker.inflight.clear()
        self._recalls.pop(key, None)
        for task_id in lost:
            self._tasks.pop(task_id, None)
        self._maybe_idle.add(key[0])
        return lost

    def worker_ready(self, key: WorkerKey) -> None:
        if key in self._workers and key[0] not in self._lost:
            self._workers[key].available = True

    def node_lost(self, node: int, reason: str, restart: Restart = _restartable) -> list[Failure]:
        """The node stopped answering (or went away). What was meant for it alone fails.
        What it was running goes back to the front of the queue, in order, when it may
        run again (``rerun_why_not``); the rest fails. ``restart`` is asked about each
        stream that would run again. When no node is left, see ``_fail_if_none_left``."""
        self._lost.add(node)
        self._idle_since.pop(node, None)
        failures: list[Failure] = []
        again: list[int] = []
        for key in self._nodes.get(node, []):
            worker = self._workers[key]
            worker.available = False
            for task_id in worker.targeted:
                if self._tasks.pop(task_id, None) is not None:
                    failures.append(Failure(task_id, reason, node_lost=True))
            for task_id in worker.inflight:
                task = self._tasks.get(task_id)
                if task is None or task.where != key:
                    continue
                problem = self.rerun_why_not(task_id)
                if problem is None and task.stream:
                    problem = restart(task_id)
                if problem is None:
                    task.reruns += 1
                    task.where = None
                    task.stealing = False
                    again.append(task_id)
                else:
                    del self._tasks[task_id]
                    failures.append(Failure(task_id, f"{reason}; {problem}", node_lost=True))
            worker.inflight.clear()
            worker.targeted.clear()
            self._recalls.pop(key, None)
            self._cancels.pop(key, None)
        self._queue.extendleft(reversed(again))
        return failures + self._fail_if_none_left(reason)

    def rerun_why_not(self, task_id: int) -> str | None:
        """Why a task its node can no longer finish does not run again elsewhere (None:
        it does). A stream's reader is the client's to ask (see ``node_lost``)."""
        task = self._tasks.get(task_id)
        if task is None:
            return "it had ended"
        if task.target is not None:
            return "it was meant for that worker alone"
        if task.abandoned:
            return "it had been abandoned"
        if not self.rerun_lost:
            return "this pool does not run a lost node's tasks again"
        if task.retries == 0:
            return "its function runs at most once (sky.compute(retries=0)), so it was not run again"
        if task.reruns >= task.retries:
            times = "once" if task.reruns == 1 else f"{task.reruns} times"
            return (
                f"it had been run again {times} already, all its function allows "
                f"(sky.compute(retries={task.retries}) raises that)"
            )
        return None

    def _fail_if_none_left(self, reason: str) -> list[Failure]:
        """With no node left to run anything (every one lost or gone, or none joined yet),
        what waits fails, unless the pool waits for nodes."""
        if self.wait_for_nodes or self.present():
            return []
        why = f"every node of the pool is gone ({reason})"
        failures = [Failure(task_id, why, node_lost=True) for task_id in self._tasks]
        self._tasks.clear()
        self._queue.clear()
        return failures

    def fail_waiting(self, reason: str) -> list[Failure]:
        """No node will come (the pool cannot get one back): the tasks queued while no
        node can take them fail with ``reason``. Nothing fails while a node can still run
        them (a live node that is not draining), and work queued later waits again."""
        if any(self._usable_node(n) for n in self._nodes):
            return []
        failures = [Failure(task_id, reason, node_lost=True) for task_id in self.queued()]
        for failure in failures:
            del self._tasks[failure.task_id]
        self._queue.clear()
        return failures

    def drain(self, node: int) -> None:
        """The node will go away (spot notice, scale-down): no new work; its re-runnable
        tasks go back to the front of the queue (each counts as a re-run). Tasks for that
        node alone stay: they may still finish; so do tasks that may not run again."""
        self._draining.add(node)
        self._idle_since.pop(node, None)
        for key in self._nodes.get(node, []):
            worker = self._workers[key]
            worker.available = False
            for task_id in reversed(list(worker.inflight)):
                task = self._tasks.get(task_id)
                if task is None or task.stream or self.rerun_why_not(task_id) is not None:
                    continue
                task.reruns += 1
                task.where = None
                del worker.inflight[task_id]  # a late result from here still wins (``completed``)
                self._queue.appendleft(task_id)

    def is_lost(self, node: int) -> bool:
        return node in self._lost

    def present(self) -> bool:
        """Whether some node is in the pool and not lost (it may be draining)."""
        return len(self._nodes) > len(self._lost)

    def _usable_node(self, node: int) -> bool:
        return node in self._nodes and node not in self._lost and node not in self._draining

    def is_usable(self, key: WorkerKey) -> bool:
        worker = self._workers.get(key)
        return worker is not None and worker.available and key[0] not in self._lost and key[0] not in self._draining

    def workers(self) -> list[WorkerKey]:
        return [k for keys in self._nodes.values() for k in keys]

    def live_workers(self) -> list[WorkerKey]:
        """Every worker of every node that is neither lost nor draining, in node, then
        worker order: what ``@`` runs on when it is called."""
        return [k for node in sorted(self._nodes) if self._usable_node(node) for k in self._nodes[node]]

    # -- tasks -------------------------------------------------------------------------

    def submit(
        self,
        task_id: int,
        fn_key: bytes,
        target: WorkerKey | None = None,
        retries: int = DEFAULT_RETRIES,
        stream: bool = False,
    ) -> str | None:
        """Queue a task. Returns why it cannot run (its target's node is lost, or no node
        is left and the pool does not wait for one), or None. ``retries``: how many times
        it may run again when its node is lost or drained (with ``rerun_lost``). A
        ``stream`` (a generator's values coming back while it runs, or a task reading
        input streams) is a task like any other, except that once sent it is never
        stolen, nor moved off a draining node: the worker may have begun it and its
        first values may have been read (a lost node's streams: see ``node_lost``)."""
        if target is not None:
            if target[0] in self._lost:
                return f"node {target[0]} of the pool was lost before this task could be sent to it"
            if target not in self._workers:
                return f"the pool has no worker {target[1]} on node {target[0]}"
            self._idle_since.pop(target[0], None)
        elif not self.wait_for_nodes and len(self._nodes) <= len(self._lost):
            return "every node of the pool is gone" if self._lost else "the pool has no node to run it"
        self._tasks[task_id] = _TaskState(fn_key, target, retries, stream=stream)
        if target is None:
            self._queue.append(task_id)
        else:
            self._workers[target].targeted.append(task_id)
        return None

    def cancel(self, task_id: int, interrupt: bool = False) -> CancelOutcome:
        """Nobody wants ``task_id``: dropped if no worker has it, else recalled from its
        worker (it never starts there); with ``interrupt`` (the caller was interrupted) a
        task that already runs is interrupted too (a CANCEL instead of a RECALL)."""
        task = self._tasks.get(task_id)
        if task is None:
            return CancelOutcome.UNKNOWN
        if task.where is None:
            self._tasks.pop(task_id)  # the queues skip ids that are gone
            return CancelOutcome.DROPPED
        if not task.abandoned:
            task.abandoned = True
            (self._cancels if interrupt else self._recalls).setdefault(task.where, []).append(task_id)
        return CancelOutcome.RECALLING

    def recalls(self) -> dict[WorkerKey, list[int]]:
        """RECALL messages to send now (worker -> task ids); each is handed out once."""
        out, self._recalls = self._recalls, {}
        return out

    def cancels(self) -> dict[WorkerKey, list[int]]:
        """CANCEL messages to send now (worker -> task ids: one message each); handed out once."""
        out, self._cancels = self._cancels, {}
        return out

    def window(self, key: WorkerKey, fn_key: bytes) -> int:
        """How many tasks of this function the worker may hold at once."""
        duration = self._durations.get(fn_key)
        if duration is None:
            return 1
        budget = max(PREFETCH_SECONDS, self._workers[key].round_trip)
        if duration <= 0:
            return MAX_WINDOW
        return max(1, min(MAX_WINDOW, 1 + math.floor(budget / duration)))

    def assign(self, now: float) -> list[tuple[WorkerKey, list[int]]]:
        """Tasks to send now, per worker, in order: first each worker's own tasks, then the
        shared queue, spread so no worker takes more than its fair share of it."""
        out = self._assign(now)
        if self._maybe_idle:
            self._stamp_idle(now)
        return out

    def _assign(self, now: float) -> list[tuple[WorkerKey, list[int]]]:
        out: list[tuple[WorkerKey, list[int]]] = []
        for key, worker in self._workers.items():
            if worker.targeted and worker.available and key[0] not in self._lost:
                sent = self._take(worker, worker.targeted, len(worker.targeted), now)
                if sent:
                    out.append((key, sent))
        if not self._queue:
            return out
        live = [
            w
            for w in self._workers.values()
            if self.is_usable(w.key) and w.load() < MAX_WINDOW and not self._stuck(w, now)
        ]
        if not live:
            return out
        share = math.ceil(len(self._queue) / len(live))
        for worker in sorted(live, key=lambda w: w.load()):
            if not self._queue:
                break
            sent = self._take(worker, self._queue, share, now)
            if sent:
                out.append((worker.key, sent))
        return out

    def _stuck(self, worker: _WorkerState, now: float) -> bool:
        """Whether the worker's oldest task (a direct call counts) has been out
        ``STEAL_AFTER`` or longer."""
        oldest = worker.direct_since
        for sent in worker.inflight.values():
            oldest = sent if oldest is None else min(oldest, sent)
            break
        return oldest is not None and now - oldest >= STEAL_AFTER

    def steal(self, now: float) -> None:
        """When a worker is idle and nothing is queued, recall the tasks that wait behind a
        long one on another worker (they come back through ``recalled``)."""
        if self._queue:  # O(1): queued work goes to the idle worker first
            return
        if not any(self.is_usable(w.key) and w.load() == 0 and not w.targeted for w in self._workers.values()):
            return
        for worker in self._workers.values():
            # behind a direct call every queued task waits; otherwise the first may be running
            behind = list(worker.inflight) if worker.reserved else list(worker.inflight)[1:]
            if not behind or not self._stuck(worker, now):
                continue
            for task_id in behind:
                task = self._tasks.get(task_id)
                if task is None or task.abandoned or task.stealing or task.target is not None or task.stream:
                    continue
                task.stealing = True
                self._recalls.setdefault(worker.key, []).append(task_id)

    def _stamp_idle(self, now: float) -> None:
        """Nodes whose load fell since the last look and that now hold nothing: idle
        since ``now``."""
        for node in self._maybe_idle:
            if node not in self._idle_since and self._usable_node(node) and self._node_idle(node):
                self._idle_since[node] = now
        self._maybe_idle.clear()

    def _node_idle(self, node: int) -> bool:
        """Nothing sent to its workers, nothing waiting for one of them alone (the
        queues keep the ids of cancelled tasks until they reach their head)."""
        tasks = self._tasks
        for key in self._nodes[node]:
            worker = self._workers[key]
            if worker.load() or any(t in tasks for t in worker.targeted):
                return False
        return True

    def _take(self, worker: _WorkerState, queue: deque[int], limit: int, now: float) -> list[int]:
        sent: list[int] = []
        windows: dict[bytes, int] = {}  # per function, once per call: this runs for every task
        load = worker.load()
        tasks = self._tasks
        while queue and len(sent) < limit:
            task_id = queue[0]
            task = tasks.get(task_id)
            if task is None or task.where is not None:
                queue.popleft()  # cancelled, failed, or already re-sent
                continue
            window = windows.get(task.fn_key)
            if window is None:
                window = windows[task.fn_key] = self.window(worker.key, task.fn_key)
            if load >= window:
                break
            queue.popleft()
            task.where = worker.key
            worker.inflight[task_id] = now
            load += 1
            sent.append(task_id)
        if sent:
            self._idle_since.pop(worker.key[0], None)
        return sent

    def reserve(self, now: float) -> WorkerKey | None:
        """A worker with nothing to do, for a direct call on the caller's own socket."""
        best: _WorkerState | None = None
        for worker in self._workers.values():
            if self.is_usable(worker.key) and worker.load() == 0 and not worker.targeted:
                best = worker
                break
        if best is None:
            return None
        best.reserved += 1
        best.direct_since = now
        self._idle_since.pop(best.key[0], None)
        return best.key

    def reserve_all(self, keys: list[WorkerKey], now: float) -> bool:
        """Reserve these workers for a direct broadcast; False (nothing reserved) when
        one is busy or unusable."""
        if any(not self.is_usable(k) or self._workers[k].load() >= MAX_WINDOW for k in keys):
            return False
        for key in keys:
            worker = self._workers[key]
            worker.reserved += 1
            if worker.direct_since is None:
                worker.direct_since = now
            self._idle_since.pop(key[0], None)
        return True

    def release(self, key: WorkerKey, fn_key: bytes | None = None, seconds: float | None = None) -> None:
        worker = self._workers.get(key)
        if worker is not None and worker.reserved > 0:
            worker.reserved -= 1
            if worker.reserved == 0:
                worker.direct_since = None
            self._maybe_idle.add(key[0])
        if fn_key is not None and seconds is not None:
            self._learn(fn_key, seconds)

    def completed(self, key: WorkerKey, task_id: int, seconds: float, now: float) -> bool:
        """A result arrived from ``key``. True when the task was still wanted (the first
        result wins); the client then resolves its completion."""
        worker = self._workers.get(key)
        sent = worker.inflight.pop(task_id, None) if worker is not None else None
        self._maybe_idle.add(key[0])
        task = self._tasks.pop(task_id, None)
        if task is None:
            return False
        self._learn(task.fn_key, seconds)
        if worker is not None and sent is not None and not worker.inflight:
            sample = max(0.0, now - sent - seconds)
            worker.round_trip = sample if worker.round_trip == 0 else 0.8 * worker.round_trip + 0.2 * sample
        if task.where is not None and task.where != key:
            other = self._workers.get(task.where)
            if other is not None:
                other.inflight.pop(task_id, None)
        return not task.abandoned

    def recalled(self, key: WorkerKey, task_id: int) -> bool:
        """The worker dropped the task before it began. True when it was abandoned (the
        client reports it cancelled); a task still wanted goes back to the queue."""
        worker = self._workers.get(key)
        if worker is not None:
            worker.inflight.pop(task_id, None)
            self._maybe_idle.add(key[0])
        task = self._tasks.get(task_id)
        if task is None or task.where != key:
            return False
        if task.abandoned:
            self._tasks.pop(task_id)
            return True
        task.where = None
        task.stealing = False
        self._queue.appendleft(task_id)
        return False

    def _learn(self, fn_key: bytes, seconds: float) -> None:
        known = self._durations.get(fn_key)
        self._durations[fn_key] = seconds if known is None else (1 - _EWMA) * known + _EWMA * seconds

    # -- views -------------------------------------------------------------------------

    def pending(self) -> int:
        return len(self._tasks)

    def is_pending(self, task_id: int) -> bool:
        return task_id in self._tasks

    def holder(self, task_id: int) -> WorkerKey | None:
        task = self._tasks.get(task_id)
        return None if task is None else task.where

    def inflight(self, key: WorkerKey) -> list[int]:
        return list(self._workers[key].inflight)

    def queued(self) -> list[int]:
        return [t for t in self._queue if t in self._tasks and self._tasks[t].where is None]

    def load(self, now: float) -> ClientLoad:
        """What the autoscaler reads (see ``ClientLoad``)."""
        self._stamp_idle(now)
        running = 0
        targeted = 0
        slots = 0
        per_node: dict[int, int] = {}
        for node, keys in self._nodes.items():
            held = 0
            for key in keys:
                worker = self._workers[key]
                running += len(worker.inflight)
                targeted += sum(1 for t in worker.targeted if t in self._tasks)
                held += worker.load()
            if self._usable_node(node):
                per_node[node] = held
                slots += sum(1 for key in keys if self._workers[key].available)
        direct = sum(w.reserved for w in self._workers.values())
        return ClientLoad(
            queued=max(0, len(self._tasks) - running - targeted),
            running=running + direct,
            per_node=per_node,
            slots=slots,
            idle_since={n: t for n, t in self._idle_since.items() if n in per_node},
        )

    def drop_all(self) -> list[int]:
        """Forget every task (the pool is closing); returns their ids."""
        ids = list(self._tasks)
        self._tasks.clear()
        self._queue.clear()
        for worker in self._workers.values():
            worker.inflight.clear()
            worker.targeted.clear()
        self._recalls.clear()
        return ids
