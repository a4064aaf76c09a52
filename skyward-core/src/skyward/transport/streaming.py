"""Streams and input feeders: the client's side of tasks that talk while they run.

A stream (a generator's values coming back, ``gen() >> pool``) is a queued task whose
completion is a ``StreamChannel``; its reader grants the worker more values with CREDIT
and stops it by closing (see ``stream``). A task with input streams (parameters
annotated ``Iterator[T]``) gets a ``Feeder`` that reads the caller's iterables on its
own thread as the worker asks (WANT) and hands the items to the I/O thread (INPUT; see
``inputs``). Credits and inputs go out on the I/O thread: it owns the worker sockets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

import zmq

from skyward.transport import serialize, wire
from skyward.transport.completion import Completion
from skyward.transport.direct import live_workers
from skyward.transport.dispatcher import WorkerKey
from skyward.transport.inputs import Feeder
from skyward.transport.ledger import TaskLedger, fail
from skyward.transport.links import Links
from skyward.transport.results import ResultDecoder
from skyward.transport.socket_loop import SocketLoop
from skyward.transport.stream import STREAM_WINDOW, FinishHandler, RemoteStream, StreamChannel

__all__ = ["Inputs", "Streams"]

Inputs = list[tuple[str, Iterable[Any]]]
"""(parameter name, the caller's iterable) of each input stream, by slot."""


class Streams:
    """Queues streams and tasks with input streams; sends their credits and inputs."""

    def __init__(self, ledger: TaskLedger, links: Links, loop: SocketLoop, decoder: ResultDecoder) -> None:
        self._ledger = ledger
        self._links = links
        self._loop = loop
        self._decoder = decoder

    def stream(
        self,
        frames: list[serialize.Frame],
        target: WorkerKey | None = None,
        window: int = STREAM_WINDOW,
        on_finish: FinishHandler | None = None,
        inputs: Inputs | None = None,
        retries: int | None = None,
    ) -> RemoteStream[Any]:
        """Queue a generator task: an iterator over what it yields (see ``stream``). It
        waits in the queue and is cancelled, recalled and failed like any task. When
        its node is lost, it starts again from its beginning elsewhere (within
        ``retries``) only if its reader has had none of its values yet; otherwise it
        fails with ``NodeLostError`` saying how many it had: a stream is never restarted
        midway, and never moved off a draining node (it may finish there)."""
        task_id = 0
        ledger = self._ledger

        def grant(count: int) -> None:
            self._loop.call_soon(lambda: self._send_credit(task_id, count))

        def stop() -> None:
            ledger.stopped_streams.append(task_id)  # lock-free: this may run in __del__
            try:
                self._loop.wake()
            except zmq.ZMQError:
                pass  # closed meanwhile: nothing left to stop

        channel = StreamChannel(window, on_finish)
        (task_id,) = ledger.enqueue(
            [frames], [channel], target, stream=True, feed=self._feeding(inputs), retries=[retries]
        )
        self._loop.nudge()
        return RemoteStream(channel, self._decoder, grant, stop)

    def stream_on_all(self, frames: list[serialize.Frame]) -> list[RemoteStream[Any]]:
        """A generator task on every worker of every node live when it is called (``@``):
        one stream each, in node, then worker order. With no live node it fails at once
        with ``NodeLostError``."""
        with self._ledger.lock:
            self._ledger.check_open()
            keys = live_workers(self._ledger)
        return [self.stream(list(frames), target=key) for key in keys]

    def submit_with_inputs(self, frames: list[serialize.Frame], inputs: Inputs) -> Future[Any]:
        """Queue a task whose input streams the worker pulls as it reads them (see
        ``inputs``); like ``submit`` otherwise, except that it is never re-run."""
        future: Future[Any] = Future()
        (task_id,) = self._ledger.enqueue([frames], [future], None, stream=True, feed=self._feeding(inputs))
        self._ledger.track([future], [task_id])
        self._loop.nudge()
        return future

    def _feeding(self, inputs: Inputs | None) -> Callable[[int, Completion], None] | None:
        """What the ledger calls, under its lock, to start a task's feeder (None: no inputs)."""
        if not inputs:
            return None

        def feed(task_id: int, completion: Completion) -> None:
            self._start_feeder(task_id, completion, inputs)

        return feed

    def _start_feeder(self, task_id: int, completion: Completion, inputs: Inputs) -> None:
        def send(slot: int, ended: bool, items: list[list[serialize.Frame]]) -> None:
            self._loop.call_soon(lambda: self._send_input(task_id, slot, ended, items))

        def failed(error: BaseException) -> None:
            fail(completion, error)
            self._loop.call_soon(lambda: self._ledger.abandon([task_id]))

        self._ledger.feeders[task_id] = Feeder(inputs, send, completion.done, failed)

    def _holder(self, task_id: int) -> zmq.Socket[bytes] | None:
        """The socket of the worker that holds the task now, or None (over, taken back)."""
        with self._ledger.lock:
            key = self._ledger.dispatcher.holder(task_id)
        worker = None if key is None else self._links.find_worker(key)
        return None if worker is None else worker.socket

    def _send_input(self, task_id: int, slot: int, ended: bool, items: list[list[serialize.Frame]]) -> None:
        sock = self._holder(task_id)
        if sock is not None:
            head = wire.pack_input(task_id, slot, ended, [len(item) for item in items])
            wire.send_frames(sock, [head, *(frame for item in items for frame in item)])

    def _send_credit(self, task_id: int, count: int) -> None:
        sock = self._holder(task_id)
        if sock is not None:
            sock.send(wire.pack_credit(task_id, count))
