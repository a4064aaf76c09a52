"""The direct path: ``>>`` and ``@`` on idle workers, from the calling thread.

When the dispatcher has an idle worker (every worker, for ``@``), the caller sends the
task over a socket of its own (one per thread and worker, made once) and waits on it
there: no hand-off to the I/O thread and back, which is most of a quick call's cost in
Python. Otherwise the call waits in the queue like any task; the caller never sees which.
The dispatcher counts a direct call as load (``reserve``/``release``), so queued work
does not pile onto a worker the caller is using.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import zmq

from skyward.errors import NodeLostError, WorkerDiedError
from skyward.transport import serialize, wire
from skyward.transport.dispatcher import WorkerKey
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, WorkerLink
from skyward.transport.results import ResultDecoder

__all__ = ["DirectPath", "Queue"]

Queue = Callable[[Sequence[list[serialize.Frame]], WorkerKey | None], list[Future[Any]]]
"""Queues tasks (for one worker, or any) and returns their futures: the way back to the
queue when no worker is idle."""

_POLL_MS = 100  # how often a waiting caller looks up from its socket: closed pool, dead worker


class DirectPath:
    """``run`` and ``run_on_all`` over the calling thread's own sockets."""

    def __init__(
        self, ledger: TaskLedger, links: Links, decoder: ResultDecoder, queue: Queue, rerun_interrupted: bool
    ) -> None:
        self._ledger = ledger
        self._links = links
        self._decoder = decoder
        self._queue = queue
        self._rerun_interrupted = rerun_interrupted
        self._local = threading.local()

    def _socket(self, worker: WorkerLink) -> zmq.Socket[bytes]:
        """This thread's own socket to ``worker`` (remade after the worker restarts)."""
        sockets: dict[WorkerKey, tuple[tuple[int, str, bytes | None], zmq.Socket[bytes]]]
        sockets = self._local.__dict__.setdefault("direct", {})
        node = self._links.nodes.get(worker.key[0])
        server_public = node.server_public if node is not None else None
        # a replaced node starts its workers at generation 0 again: its new endpoint or key
        # tells its sockets from the old node's
        stamp = (worker.generation, worker.endpoint, server_public)
        known = sockets.get(worker.key)
        if known is not None and known[0] == stamp:
            return known[1]
        if known is not None:
            known[1].close(linger=0)
        sock = self._links.socket(zmq.DEALER, worker.endpoint, server_public)
        sockets[worker.key] = (stamp, sock)
        return sock

    def run(self, frames: list[serialize.Frame]) -> Any:
        """Run one task and return its result or raise its exception (``>>``). On an idle
        worker it goes from this thread over its own socket; otherwise it waits in the
        queue. A task whose node gets an interruption notice runs again elsewhere."""
        ledger = self._ledger
        with ledger.lock:
            ledger.check_open()
            key = ledger.dispatcher.reserve(time.monotonic())
        if key is None:
            return _wait(self._queue([frames], None)[0])
        fn_key = bytes(frames[0])
        seconds: float | None = None
        worker = self._links.find_worker(key)
        node = self._links.nodes.get(key[0])
        if worker is None or node is None:  # its node left the pool after the reservation
            with ledger.lock:
                ledger.dispatcher.release(key)
            return _wait(self._queue([frames], None)[0])
        try:
            generation = worker.generation
            sock = self._socket(worker)
            task_id = ledger.next_id()
            task_frames = wire.encode_task(fn_key, bytes(frames[1]), frames[2:])
            wire.send_frames(sock, wire.pack_message([wire.pack_tasks([(task_id, len(task_frames), 0)]), *task_frames]))
            while True:
                if sock.poll(_POLL_MS):
                    header, parts = wire.open_message(wire.recv_frames(sock))
                    if header[:1] != wire.RESULTS:
                        continue
                    offset = 0
                    for tid, status, count, ran in wire.unpack_results(header):
                        if tid == task_id:
                            seconds = ran
                            return self._decoder.value(status, parts[offset : offset + count], key[0])
                        offset += count  # a late reply to an earlier call on this socket
                ledger.check_open()
                replaced = self._links.nodes.get(key[0]) is not node
                if self._rerun_interrupted and (node.draining or replaced):
                    break  # the node got an interruption notice (or was replaced): run it elsewhere
                if worker.generation != generation:
                    raise (NodeLostError if node.lost else WorkerDiedError)(worker.last_death)
        finally:
            with ledger.lock:
                ledger.dispatcher.release(key, fn_key, seconds)
        return _wait(self._queue([frames], None)[0])

    def run_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        """Run one task on every worker of every node (``@``): results in node, then worker
        order; the first failure in that order is raised once all have answered. A lost
        node fails it at once with ``NodeLostError``."""
        ledger = self._ledger
        with ledger.lock:
            ledger.check_open()
            self._links.check_every_node_alive()
            keys = ledger.dispatcher.reserve_all(time.monotonic())
        if keys is None:
            return self._run_queued_on_all(frames)
        try:
            return self._run_direct_on_all(frames, keys)
        finally:
            with ledger.lock:
                for key in keys:
                    ledger.dispatcher.release(key)

    def _run_direct_on_all(self, frames: list[serialize.Frame], keys: list[WorkerKey]) -> list[Any]:
        found = [self._links.find_worker(k) for k in keys]
        workers = [w for w in found if w is not None]
        if len(workers) != len(keys):
            raise NodeLostError("a node left the pool as a computation for every worker began")
        generations = [w.generation for w in workers]
        task_frames = wire.encode_task(bytes(frames[0]), bytes(frames[1]), frames[2:])
        poller = zmq.Poller()
        pending: dict[int, int] = {}  # task id -> position
        for position, worker in enumerate(workers):
            sock = self._socket(worker)
            task_id = self._ledger.next_id()
            wire.send_frames(sock, wire.pack_message([wire.pack_tasks([(task_id, len(task_frames), 0)]), *task_frames]))
            pending[task_id] = position
            poller.register(sock, zmq.POLLIN)
        results: list[Any] = [None] * len(workers)
        errors: dict[int, BaseException] = {}
        while pending:
            for sock, _ in poller.poll(_POLL_MS):
                while True:
                    try:
                        header, parts = wire.open_message(wire.recv_frames(sock, zmq.NOBLOCK))
                    except zmq.Again:
                        break
                    if header[:1] != wire.RESULTS:
                        continue
                    offset = 0
                    for task_id, status, count, _ran in wire.unpack_results(header):
                        payload = parts[offset : offset + count]
                        offset += count
                        if task_id not in pending:
                            continue  # a late reply to an earlier call on this socket
                        position = pending.pop(task_id)
                        try:
                            results[position] = self._decoder.value(status, payload, workers[position].key[0])
                        except BaseException as error:
                            errors[position] = error
            self._ledger.check_open()
            for position in pending.values():
                worker = workers[position]
                if worker.generation != generations[position]:
                    node = self._links.nodes.get(worker.key[0])
                    raise (NodeLostError if node is None or node.lost else WorkerDiedError)(worker.last_death)
        if errors:
            raise errors[min(errors)]
        return results

    def _run_queued_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        futures: list[Future[Any]] = []
        for node in self._links.ordered():
            for worker in node.workers:
                futures += self._queue([list(frames)], worker.key)
        results: list[Any] = []
        try:
            for future in futures:
                results.append(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results


def _wait(future: Future[Any]) -> Any:
    try:
        return future.result()
    except BaseException:
        future.cancel()  # interrupted while waiting: a task still queued never starts
        raise
