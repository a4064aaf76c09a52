"""The direct path: ``>>`` and ``@`` on idle workers, from the calling thread.

When the dispatcher has an idle worker (every worker, for ``@``), the caller sends the
task over a socket of its own (one per thread and worker, made once) and waits on it
there: no hand-off to the I/O thread and back, which is most of a quick call's cost in
Python. Otherwise the call waits in the queue like any task; the caller never sees which.
The dispatcher counts a direct call as load (``reserve``/``release``), so queued work
does not pile onto a worker the caller is using.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import zmq

from skyward.errors import NodeLostError, WorkerDiedError
from skyward.transport import chunked, serialize, wire
from skyward.transport.dispatcher import DEFAULT_RETRIES, WorkerKey
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, WorkerLink
from skyward.transport.results import ResultDecoder

__all__ = ["DirectPath", "Queue"]

Queue = Callable[[Sequence[list[serialize.Frame]], WorkerKey | None, int | None], list[Future[Any]]]
"""Queues tasks (for one worker, or any; with their retries) and returns their futures:
the way back to the queue when no worker is idle."""

_POLL_MS = 100  # how often a waiting caller looks up from its socket: closed pool, dead worker


class DirectPath:
    """``run`` and ``run_on_all`` over the calling thread's own sockets."""

    def __init__(
        self,
        ledger: TaskLedger,
        links: Links,
        decoder: ResultDecoder,
        queue: Queue,
        rerun_lost: bool,
        unreadable: Callable[[WorkerLink, BaseException], None],
    ) -> None:
        self._ledger = ledger
        self._links = links
        self._decoder = decoder
        self._queue = queue
        self._rerun_lost = rerun_lost
        # a worker sent what this client cannot read: its node restarts it, and its death
        # notice ends the wait (SocketLoop.unreadable)
        self._unreadable = unreadable
        self._local = threading.local()

    def _reassembly(self) -> chunked.Reassembly:
        """This thread's results whose chunks are arriving, per socket."""
        found: chunked.Reassembly | None = self._local.__dict__.get("reassembly")
        if found is None:
            found = self._local.reassembly = chunked.Reassembly(self._links.data_channel)
        return found

    def _receive(self, sock: zmq.Socket[bytes], worker: WorkerLink, generation: int) -> wire.Results | None:
        """The results of the message waiting on this caller's ``sock`` to ``worker``; None
        while a result's chunks are still to come, for a message of another kind, and for
        one this client cannot read (its worker is restarted: ``SocketLoop.unreadable``).
        A sealed result's parts are waited for here, on the caller's thread (its call waits
        for them anyway), until ``worker`` dies or the pool closes (then None too: the
        caller's checks raise the reason)."""
        try:
            message = self._reassembly().feed_nowait(wire.recv_frames(sock), sock)
            if isinstance(message, chunked.SealedMessage):
                message = message.complete(functools.partial(self._gone, worker, generation))
            return None if message is None else wire.open_results(message, self._links.shm)
        except wire.MALFORMED as error:
            self._unreadable(worker, error)
            return None

    def _gone(self, worker: WorkerLink, generation: int) -> bool:
        """Whether ``worker`` died (or its node was lost) since ``generation``, or the pool closed."""
        return worker.generation != generation or self._ledger.closed_reason is not None

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
            self._reassembly().drop(known[1])
        sock = self._links.socket(zmq.DEALER, worker.endpoint, server_public)
        sockets[worker.key] = (stamp, sock)
        return sock

    def run(self, frames: list[serialize.Frame], retries: int | None = None) -> Any:
        """Run one task and return its result or raise its exception (``>>``). On an idle
        worker it goes from this thread over its own socket; otherwise it waits in the
        queue. A task whose node is lost, drained or replaced under it runs again
        elsewhere, through the queue, when the client re-runs lost work and the task's
        ``retries`` (None: ``DEFAULT_RETRIES``) allow."""
        ledger = self._ledger
        with ledger.lock:
            ledger.check_open()
            key = ledger.dispatcher.reserve(time.monotonic())
        if key is None:
            return _wait(self._queue([frames], None, retries)[0])
        fn_key = bytes(frames[0])
        seconds: float | None = None
        budget = DEFAULT_RETRIES if retries is None else retries
        again = self._rerun_lost and budget > 0
        worker = self._links.find_worker(key)
        node = self._links.nodes.get(key[0])
        if worker is None or node is None:  # its node left the pool after the reservation
            with ledger.lock:
                ledger.dispatcher.release(key)
            return _wait(self._queue([frames], None, retries)[0])
        sent: tuple[zmq.Socket[bytes], int] | None = None
        try:
            generation = worker.generation
            sock = self._socket(worker)
            task_id = ledger.next_id()
            sent = (sock, task_id)
            task_frames = wire.encode_task(fn_key, bytes(frames[1]), frames[2:])
            chunked.send_message(
                sock,
                wire.pack_message(
                    [wire.pack_tasks([(task_id, len(task_frames), 0)]), *task_frames],
                    self._links.shm,
                    self._links.bulk(worker.endpoint),
                ),
                sealed=self._links.sealed_path(worker, sock),
            )
            while True:
                if sock.poll(_POLL_MS):
                    results = self._receive(sock, worker, generation)
                    if results is None:
                        continue  # a chunk still to come, or nothing this call reads
                    entries, parts = results
                    offset = 0
                    for tid, status, count, ran in entries:
                        if tid == task_id:
                            seconds = ran
                            return self._decoder.value(status, parts[offset : offset + count], key[0])
                        offset += count  # a late reply to an earlier call on this socket
                ledger.check_open()
                replaced = self._links.nodes.get(key[0]) is not node
                if again and (node.draining or replaced or node.lost):
                    break  # its node is going or gone: run it elsewhere
                if replaced:
                    raise NodeLostError(f"node {key[0]} was replaced before this task, running there, ended")
                if worker.generation != generation:
                    if not node.lost:
                        raise WorkerDiedError(worker.last_death)
                    if self._rerun_lost and budget == 0:
                        raise NodeLostError(f"{worker.last_death}; {_AT_MOST_ONCE}")
                    raise NodeLostError(worker.last_death)
        except KeyboardInterrupt:
            # the caller was interrupted (Ctrl-C, a notebook's interrupt): the worker
            # drops the task or interrupts it, and is free for the next call
            if sent is not None:
                with contextlib.suppress(zmq.ZMQError):
                    sent[0].send(wire.pack_cancel(sent[1]), zmq.NOBLOCK)
            raise
        finally:
            with ledger.lock:
                ledger.dispatcher.release(key, fn_key, seconds)
        return _wait(self._queue([frames], None, budget - 1)[0])

    def run_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        """Run one task on every worker of every node live when it is called (neither lost
        nor draining; a node that joins later is not waited for): ``@``. Results in node,
        then worker order; the first failure in that order is raised once all have
        answered. A node lost while it runs fails it with ``NodeLostError``; with no live
        node at all, it fails at once."""
        ledger = self._ledger
        with ledger.lock:
            ledger.check_open()
            keys = live_workers(ledger)
            reserved = ledger.dispatcher.reserve_all(keys, time.monotonic())
        if not reserved:
            return self._run_queued_on_all(frames, keys)
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
        sockets: list[zmq.Socket[bytes]] = []
        for position, worker in enumerate(workers):
            sock = self._socket(worker)
            sockets.append(sock)
            task_id = self._ledger.next_id()
            chunked.send_message(
                sock,
                wire.pack_message(
                    [wire.pack_tasks([(task_id, len(task_frames), 0)]), *task_frames],
                    self._links.shm,
                    self._links.bulk(worker.endpoint),
                ),
                sealed=self._links.sealed_path(worker, sock),
            )
            pending[task_id] = position
            poller.register(sock, zmq.POLLIN)
        try:
            return self._collect_on_all(poller, pending, workers, generations, sockets)
        except KeyboardInterrupt:
            # the caller was interrupted: every worker drops or interrupts its copy, as for >>
            for task_id, position in pending.items():
                with contextlib.suppress(zmq.ZMQError):
                    sockets[position].send(wire.pack_cancel(task_id), zmq.NOBLOCK)
            raise

    def _collect_on_all(
        self,
        poller: zmq.Poller,
        pending: dict[int, int],
        workers: list[WorkerLink],
        generations: list[int],
        sockets: list[zmq.Socket[bytes]],
    ) -> list[Any]:
        """The results of a task sent to each of ``workers`` over ``sockets`` (``pending``:
        task id -> position, emptied as they answer)."""
        by_socket = {sock: position for position, sock in enumerate(sockets)}
        results: list[Any] = [None] * len(workers)
        errors: dict[int, BaseException] = {}
        while pending:
            # one message from each socket that has one: a socket with more is ready again
            # at the next poll, which then returns at once. Reading on until zmq.Again cost
            # an exception per socket per wake-up, and a broadcast's workers answer one each.
            for sock, _ in poller.poll(_POLL_MS):
                at = by_socket[sock]
                received = self._receive(sock, workers[at], generations[at])
                if received is None:
                    continue  # a chunk still to come, or nothing this call reads
                entries, parts = received
                offset = 0
                for task_id, status, count, _ran in entries:
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

    def _run_queued_on_all(self, frames: list[serialize.Frame], keys: list[WorkerKey]) -> list[Any]:
        futures: list[Future[Any]] = []
        for key in keys:
            futures += self._queue([list(frames)], key, None)
        results: list[Any] = []
        try:
            for future in futures:
                results.append(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results


_AT_MOST_ONCE = "its function runs at most once (sky.compute(retries=0)), so it was not run again"


def live_workers(ledger: TaskLedger) -> list[WorkerKey]:
    """The workers ``@`` runs on now (under the ledger's lock); ``NodeLostError`` when no
    node is live."""
    keys = ledger.dispatcher.live_workers()
    if not keys:
        raise NodeLostError(
            "the pool has no live node now (every node is lost, draining or gone, or none has joined yet): "
            "@ runs on the workers of the nodes live when it is called; use >> or gather, which wait for a node "
            "on a pool that replaces or adds nodes"
        )
    return keys


def _wait(future: Future[Any]) -> Any:
    try:
        return future.result()
    except BaseException:
        future.cancel()  # interrupted while waiting: a task still queued never starts
        raise
