"""The pool's client: one I/O thread owns the shared sockets; callers get results.

Tasks go straight to workers (one hop). Which task goes where, and when, is decided by
the ``Dispatcher`` (pure logic: queue, adaptive per-worker windows, cancellation, node
loss, re-runs); this module turns its decisions into messages. The handshake with the
agents is ``handshake``; every result is read by ``results.ResultDecoder``. Node agents
are the control plane: liveness, logs, metrics, and the news that a worker died or came
back.

The pool asks the client to run something and gets a result or an exception:
``run`` (``>>``), ``run_on_all`` (``@``), ``submit`` (a Future), ``submit_batch``
(``gather``). ``run`` and ``run_on_all`` use the calling thread's own sockets when the
workers are idle (no hand-off to the I/O thread and back, most of a quick call's cost in
Python) and otherwise wait in the queue like any task; the caller never sees which.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any

import zmq

from skyward.errors import AbandonedError, NodeIdentityError, NodeLostError, ProvisioningError, WorkerDiedError
from skyward.transport import handshake, security, serialize, wire
from skyward.transport.completion import BatchResult, Completion
from skyward.transport.dispatcher import CancelOutcome, Dispatcher, WorkerKey
from skyward.transport.handshake import worker_endpoint
from skyward.transport.inputs import Feeder
from skyward.transport.results import RemoteTraceback, ResultDecoder
from skyward.transport.security import PoolKeys
from skyward.transport.stream import STREAM_WINDOW, RemoteStream, StreamChannel

__all__ = [
    "BatchResult",
    "MessageHandler",
    "NodeLostError",
    "PoolClient",
    "RemoteStream",
    "RemoteTraceback",
    "worker_endpoint",
]

# (node index, message kind, decoded JSON payload) for LOG, METRICS and NOTICE messages
MessageHandler = Callable[[int, bytes, Any], None]

_PING_INTERVAL = 1.0
# statuses up to this one end a task (OK, RAISED, RECALLED); later ones (ITEM, WANT,
# ITEMS) come while it runs: one comparison keeps plain results on their quick path
_LAST_FINAL = wire.Status.RECALLED
_KNOWN_FUNCTIONS = 32  # fewer than the worker's cache (64): what we skip re-sending is still there


class _Worker:
    """Sockets and liveness of one worker (the dispatcher holds its work)."""

    __slots__ = ("endpoint", "functions", "generation", "key", "last_death", "socket")

    def __init__(self, key: WorkerKey, endpoint: str) -> None:
        self.key = key
        self.endpoint = endpoint
        self.socket: zmq.Socket[bytes] | None = None
        self.functions: dict[bytes, None] = {}  # insertion ordered: oldest first
        self.generation = 0  # bumped when the worker dies: direct callers notice
        self.last_death = ""


class _Node:
    def __init__(
        self, index: int, endpoint: str, socket: zmq.Socket[bytes], server_public: bytes | None = None
    ) -> None:
        self.index = index
        self.endpoint = endpoint
        self.socket = socket
        self.server_public = server_public  # this node's CURVE key: its agent's and its workers'
        self.info: dict[str, Any] | None = None
        self.workers: list[_Worker] = []
        self.last_heard = time.monotonic()
        self.lost = False
        self.said_bye = False
        self.draining = False


class PoolClient:
    def __init__(
        self,
        endpoints: Sequence[str],
        keys: PoolKeys | None,
        on_message: MessageHandler,
        node_timeout: float = 20.0,
        rerun_interrupted: bool = False,
        decoder: ResultDecoder | None = None,
        port_map: Callable[[int, int], str] | None = None,
        wheels: handshake.WheelSupply | None = None,
        identities: Sequence[handshake.NodeIdentity] | None = None,
    ) -> None:
        # rerun_interrupted: the tasks of a node that gets an interruption notice run
        # again elsewhere (the pool turns it on for spot pools)
        # port_map(node, container_port): where the client reaches that port of a node
        # whose host maps container ports to other ports (the PortMapping ability of
        # container clouds: VastAI hands out random host ports, so the workers' ports
        # keep no fixed offset from the agent's); None: worker_endpoint's rule
        self._port_map = port_map
        self._wheels = wheels  # what a node that asks gets in the handshake (skyward.wheels)
        # who must answer at each endpoint (the handshake refuses any other agent); None: unchecked
        self._identities = list(identities) if identities is not None else None
        self._rerun_interrupted = rerun_interrupted
        self._decoder = decoder or ResultDecoder()
        self._calls: list[Callable[[], None]] = []
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._keys = keys
        self._on_message = on_message
        self._node_timeout = node_timeout
        self._nodes = [self._new_node(i, e) for i, e in enumerate(endpoints)]
        self._wake_address = f"inproc://skyward-wake-{id(self)}"
        self._wake_pull = self._context.socket(zmq.PULL)
        self._wake_pull.bind(self._wake_address)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._control: list[list[bytes]] = []
        self._dispatcher = Dispatcher([])
        self._completions: dict[int, Completion] = {}
        self._future_ids: weakref.WeakKeyDictionary[Future[Any], int] = weakref.WeakKeyDictionary()
        # A task's frames are kept until its result arrives: a task recalled from a busy
        # worker or re-run after an interruption is sent again. What this keeps alive
        # beyond the queue is at most a window of tasks per worker.
        self._payloads: dict[int, list[serialize.Frame]] = {}
        self._ids = itertools.count(1)
        self._running = False
        self._closed_reason: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._poller = zmq.Poller()
        self._by_socket: dict[zmq.Socket[bytes], _Node | _Worker] = {}
        self._pid = os.getpid()
        # streams nobody reads any more (closed, or dropped: appended from __del__, so
        # without a lock); the I/O thread drops or recalls them
        self._stopped_streams: deque[int] = deque()
        self._feeders: dict[int, Feeder] = {}  # tasks with input streams: who reads them here

    def _new_node(self, index: int, endpoint: str) -> _Node:
        """Node ``index``'s agent socket, with the node's current CURVE key (a replacement
        has a new one: ``PoolKeys.renew``)."""
        server_public = self._keys.node(index).public if self._keys is not None else None
        return _Node(index, endpoint, self._socket(zmq.DEALER, endpoint, server_public), server_public)

    def _socket(self, kind: int, endpoint: str, server_public: bytes | None) -> zmq.Socket[bytes]:
        sock = self._context.socket(kind)
        for option, value in ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
            sock.setsockopt(option, value)
        if endpoint.startswith("tcp://"):
            if self._keys is None or server_public is None:
                raise ProvisioningError(f"refusing an unencrypted tcp connection to {endpoint}")
            security.configure_client(sock, server_public, self._keys.client)
        sock.connect(endpoint)
        return sock

    # -- start-up -----------------------------------------------------------------------

    def connect(self, timeout: float) -> list[dict[str, Any]]:
        """Wait until every agent answers HELLO, connect to every worker, start the I/O thread.
        Returns the agents' INFO dicts in node order."""

        def describe(silent: list[int]) -> str:
            names = ", ".join(f"node {i} ({self._nodes[i].endpoint})" for i in silent)
            return (
                f"{names} did not answer within {timeout:g} s of starting; "
                "raise the provider's bootstrap timeout or check the node's bootstrap log"
            )

        shared = handshake.shared_endpoint([n.endpoint for n in self._nodes])
        if shared is not None:
            raise NodeIdentityError(shared)
        infos = handshake.hello(
            [n.socket for n in self._nodes], describe, timeout, wheels=self._wheels, expected=self._identities
        )
        for node, info in zip(self._nodes, infos, strict=True):
            self._install(node, info)
        self._poller.register(self._wake_pull, zmq.POLLIN)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="skyward-io", daemon=True)
        self._thread.start()
        return infos

    def _install(self, node: _Node, info: dict[str, Any]) -> None:
        """Register an agent that answered the handshake, and connect to its workers."""
        node.info = info
        self._poller.register(node.socket, zmq.POLLIN)
        self._by_socket[node.socket] = node
        endpoints = [self._worker_at(node, bound) for bound in info["endpoints"]]
        for index, endpoint in enumerate(endpoints):
            worker = _Worker((node.index, index), endpoint)
            node.workers.append(worker)
            self._open_worker(worker)
        with self._lock:
            orphans = self._dispatcher.set_node(node.index, len(endpoints))
            failed = [self._completions.pop(t, None) for t in orphans]
            for task_id in orphans:
                self._forget(task_id)
        for completion in failed:
            if completion is not None:
                _fail(
                    completion, NodeLostError(f"node {node.index} was replaced before this task, meant for it, ended")
                )

    def _worker_at(self, node: _Node, bound: str) -> str:
        """Where to reach a worker of ``node`` that bound ``bound`` (through the port map
        when there is one)."""
        if self._port_map is not None and bound.startswith("tcp://"):
            return self._port_map(node.index, int(bound.rsplit(":", 1)[1]))
        return worker_endpoint(node.endpoint, bound, node.info.get("agent_endpoint") if node.info else None)

    def _open_worker(self, worker: _Worker) -> None:
        worker.socket = self._socket(zmq.DEALER, worker.endpoint, self._nodes[worker.key[0]].server_public)
        self._poller.register(worker.socket, zmq.POLLIN)
        self._by_socket[worker.socket] = worker

    def _close_worker_socket(self, worker: _Worker) -> None:
        """Drop the socket and whatever it still queues, so a restarted worker can never
        receive a task that was already failed."""
        if worker.socket is not None:
            self._poller.unregister(worker.socket)
            self._by_socket.pop(worker.socket, None)
            worker.socket.close(linger=0)
            worker.socket = None

    def worker_endpoints(self, node: int) -> list[str]:
        """Where this client reaches each worker of ``node`` (after any replacement)."""
        return [w.endpoint for w in self._nodes[node].workers]

    # -- caller side (any thread) ---------------------------------------------------------

    def _wake(self) -> None:
        sock: zmq.Socket[bytes] | None = self._local.__dict__.get("push")
        if sock is None:
            sock = self._context.socket(zmq.PUSH)
            sock.connect(self._wake_address)
            self._local.push = sock
        sock.send(b"")

    def _check_open(self) -> None:
        if self._closed_reason is not None:
            raise self._closed_reason

    def submit(self, frames: list[serialize.Frame]) -> Future[Any]:
        """Queue one task: a ``concurrent.futures.Future`` that enters the running state
        when the task is sent to a worker. ``cancel()`` before that succeeds and the task
        never starts; after it, ``cancel()`` returns False (the task may be running)."""
        return self.submit_many([frames])[0]

    def submit_many(
        self, payloads: Sequence[list[serialize.Frame]], target: WorkerKey | None = None
    ) -> list[Future[Any]]:
        futures: list[Future[Any]] = [Future() for _ in payloads]
        ids = self._enqueue(payloads, futures, target)
        for task_id, future in zip(ids, futures, strict=True):
            self._future_ids[future] = task_id
            future.add_done_callback(self._cancel_hook(task_id))
        return futures

    def stream(
        self,
        frames: list[serialize.Frame],
        target: WorkerKey | None = None,
        window: int = STREAM_WINDOW,
        on_finish: Callable[[bool], None] | None = None,
        inputs: list[tuple[str, Any]] | None = None,
    ) -> RemoteStream[Any]:
        """Queue a generator task: an iterator over what it yields (see ``stream``). It
        waits in the queue and is cancelled, recalled and failed like any task; it is
        never re-run elsewhere (its values may already have been read)."""
        task_id = 0

        def grant(count: int) -> None:
            self._on_io_thread(lambda: self._send_credit(task_id, count))

        def stop() -> None:
            self._stopped_streams.append(task_id)
            try:
                self._wake()
            except zmq.ZMQError:
                pass  # closed meanwhile: nothing left to stop

        channel = StreamChannel(window, on_finish)
        (task_id,) = self._enqueue([frames], [channel], target, stream=True, inputs=inputs)
        return RemoteStream(channel, self._decoder, grant, stop)

    def submit_with_inputs(self, frames: list[serialize.Frame], inputs: list[tuple[str, Any]]) -> Future[Any]:
        """Queue a task whose input streams the worker pulls as it reads them (see
        ``inputs``); like ``submit`` otherwise, except that it is never re-run."""
        future: Future[Any] = Future()
        (task_id,) = self._enqueue([frames], [future], None, stream=True, inputs=inputs)
        self._future_ids[future] = task_id
        future.add_done_callback(self._cancel_hook(task_id))
        return future

    def _start_feeder(self, task_id: int, completion: Completion, inputs: list[tuple[str, Any]]) -> None:
        def send(slot: int, ended: bool, items: list[list[serialize.Frame]]) -> None:
            self._on_io_thread(lambda: self._send_input(task_id, slot, ended, items))

        def fail(error: BaseException) -> None:
            _fail(completion, error)
            self.abandon([task_id])

        self._feeders[task_id] = Feeder(inputs, send, completion.done, fail)

    def _send_input(self, task_id: int, slot: int, ended: bool, items: list[list[serialize.Frame]]) -> None:
        with self._lock:
            key = self._dispatcher.holder(task_id)
        if key is None:
            return  # over (or taken back): nobody reads these
        worker = self._worker(key)
        if worker.socket is not None:
            head = wire.pack_input(task_id, slot, ended, [len(item) for item in items])
            wire.send_frames(worker.socket, [head, *(frame for item in items for frame in item)])

    def _check_every_node_alive(self) -> None:
        """For ``@`` (under the lock): a lost node fails it at once with ``NodeLostError``."""
        lost = [n.index for n in self._nodes if self._dispatcher.is_lost(n.index)]
        if lost:
            raise NodeLostError(
                f"node {lost[0]} of the pool was lost ({self._worker((lost[0], 0)).last_death or 'no answer'}); "
                "a computation for every worker cannot run on it"
            )

    def stream_on_all(self, frames: list[serialize.Frame]) -> list[RemoteStream[Any]]:
        """A generator task on every worker (``@``): one stream each, in node, then worker
        order. A lost node fails it at once with ``NodeLostError``."""
        with self._lock:
            self._check_open()
            self._check_every_node_alive()
        return [self.stream(list(frames), target=w.key) for node in self._nodes for w in node.workers]

    def _send_credit(self, task_id: int, count: int) -> None:
        with self._lock:
            key = self._dispatcher.holder(task_id)
        if key is not None:
            worker = self._worker(key)
            if worker.socket is not None:
                worker.socket.send(wire.pack_credit(task_id, count))

    def abandon_futures(self, futures: Sequence[Future[Any]]) -> None:
        """Nobody wants these futures' results (joblib's ``abort_everything``): those still
        queued are cancelled, those sent but not begun are recalled and never start (they
        end cancelled-by-error, ``AbandonedError``), those running finish unread."""
        ids = []
        for future in futures:
            if not future.cancel():
                task_id = self._future_ids.get(future)
                if task_id is not None:
                    ids.append(task_id)
        if ids:
            self.abandon(ids)

    def _cancel_hook(self, task_id: int) -> Callable[[Future[Any]], None]:
        def on_done(future: Future[Any]) -> None:
            self._future_ids.pop(future, None)
            if not future.cancelled():
                return
            if self._running:  # cancel() succeeded: the task was still queued here
                self._on_io_thread(lambda: self._cancelled(task_id, future))
            else:
                try:
                    future.set_running_or_notify_cancel()  # no I/O thread: notify waiters here
                except RuntimeError:
                    pass

        return on_done

    def _cancelled(self, task_id: int, future: Future[Any]) -> None:
        with self._lock:
            self._dispatcher.cancel(task_id)
            self._forget(task_id)
        future.set_running_or_notify_cancel()  # CANCELLED -> notified: wait() and as_completed() count it

    def submit_batch(
        self, payloads: Sequence[list[serialize.Frame]], on_finish: Callable[[bool], None] | None = None
    ) -> BatchResult:
        """Queue tasks that complete together (``gather``): one BatchResult, no Future each.
        When the batch is abandoned (its first failure raised), what has not begun never does."""
        batch = BatchResult(len(payloads), on_finish)
        ids = self._enqueue(payloads, batch.slots(), None)
        batch.on_abandon = lambda: self.abandon([ids[i] for i in batch.unfinished()])
        return batch

    def abandon(self, task_ids: Sequence[int]) -> None:
        """Nobody wants these results any more: drop what is queued, recall what was sent."""
        self._on_io_thread(lambda: self._abandon(task_ids))

    def _abandon(self, task_ids: Sequence[int]) -> None:
        with self._lock:
            for task_id in task_ids:
                if self._dispatcher.cancel(task_id) is CancelOutcome.DROPPED:
                    self._forget(task_id)

    def _forget(self, task_id: int) -> None:
        self._completions.pop(task_id, None)
        self._payloads.pop(task_id, None)
        if self._feeders:
            feeder = self._feeders.pop(task_id, None)
            if feeder is not None:
                feeder.stop()

    def _enqueue(
        self,
        payloads: Sequence[list[serialize.Frame]],
        completions: Sequence[Completion],
        target: WorkerKey | None,
        stream: bool = False,
        inputs: list[tuple[str, Any]] | None = None,
    ) -> list[int]:
        ids: list[int] = []
        refused: list[tuple[Completion, str]] = []
        rerunnable = self._rerun_interrupted and target is None and not stream
        with self._lock:
            self._check_open()
            for frames, completion in zip(payloads, completions, strict=True):
                task_id = next(self._ids)
                ids.append(task_id)
                fn_key = bytes(frames[0])
                problem = self._dispatcher.submit(task_id, fn_key, target, rerunnable, stream)
                if problem is not None:
                    refused.append((completion, problem))
                    continue
                self._completions[task_id] = completion
                self._payloads[task_id] = frames
                if inputs:
                    self._start_feeder(task_id, completion, inputs)
            wake = not self._wake_pending
            self._wake_pending = True
        for completion, problem in refused:
            _fail(completion, NodeLostError(problem))
        if wake:
            self._wake()
        return ids

    # -- the direct path: one synchronous call, no thread hand-off ---------------------------

    def _direct_socket(self, worker: _Worker) -> zmq.Socket[bytes]:
        """This thread's own socket to ``worker`` (remade after the worker restarts)."""
        sockets: dict[WorkerKey, tuple[tuple[int, str, bytes | None], zmq.Socket[bytes]]]
        sockets = self._local.__dict__.setdefault("direct", {})
        server_public = self._nodes[worker.key[0]].server_public
        stamp = (worker.generation, worker.endpoint, server_public)  # a replaced node: new endpoint or key
        known = sockets.get(worker.key)
        if known is not None and known[0] == stamp:
            return known[1]
        if known is not None:
            known[1].close(linger=0)
        sock = self._socket(zmq.DEALER, worker.endpoint, server_public)
        sockets[worker.key] = (stamp, sock)
        return sock

    def _worker(self, key: WorkerKey) -> _Worker:
        return self._nodes[key[0]].workers[key[1]]

    def run(self, frames: list[serialize.Frame]) -> Any:
        """Run one task and return its result or raise its exception (``>>``). On an idle
        worker it goes from this thread over its own socket; otherwise it waits in the
        queue. A task whose node gets an interruption notice runs again elsewhere."""
        with self._lock:
            self._check_open()
            key = self._dispatcher.reserve(time.monotonic())
        if key is None:
            return self._wait(self.submit(frames))
        fn_key = bytes(frames[0])
        seconds: float | None = None
        try:
            worker = self._worker(key)
            generation = worker.generation
            sock = self._direct_socket(worker)
            task_id = next(self._ids)
            task_frames = wire.encode_task(fn_key, bytes(frames[1]), frames[2:])
            wire.send_frames(sock, wire.pack_message([wire.pack_tasks([(task_id, len(task_frames), 0)]), *task_frames]))
            while True:
                if sock.poll(100):
                    header, parts = wire.open_message(wire.recv_frames(sock))
                    if header[:1] != wire.RESULTS:
                        continue
                    offset = 0
                    for tid, status, count, ran in wire.unpack_results(header):
                        if tid == task_id:
                            seconds = ran
                            return self._decoder.value(status, parts[offset : offset + count], key[0])
                        offset += count  # a late reply to an earlier call on this socket
                self._check_open()
                node = self._nodes[key[0]]
                if self._rerun_interrupted and (node.draining or worker not in node.workers):
                    break  # the node got an interruption notice (or was replaced): run it elsewhere
                if worker.generation != generation:
                    raise (NodeLostError if node.lost else WorkerDiedError)(worker.last_death)
        finally:
            with self._lock:
                self._dispatcher.release(key, fn_key, seconds)
        return self._wait(self.submit(frames))

    def _wait(self, future: Future[Any]) -> Any:
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted while waiting: a task still queued never starts
            raise

    def run_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        """Run one task on every worker of every node (``@``): results in node, then worker
        order; the first failure in that order is raised once all have answered. A lost
        node fails it at once with ``NodeLostError``."""
        with self._lock:
            self._check_open()
            self._check_every_node_alive()
            keys = self._dispatcher.reserve_all(time.monotonic())
        if keys is None:
            return self._run_queued_on_all(frames)
        fn_key = bytes(frames[0])
        try:
            workers = [self._worker(k) for k in keys]
            generations = [w.generation for w in workers]
            task_frames = wire.encode_task(fn_key, bytes(frames[1]), frames[2:])
            poller = zmq.Poller()
            pending: dict[int, int] = {}  # task id -> position
            for position, worker in enumerate(workers):
                sock = self._direct_socket(worker)
                task_id = next(self._ids)
                message = wire.pack_message([wire.pack_tasks([(task_id, len(task_frames), 0)]), *task_frames])
                wire.send_frames(sock, message)
                pending[task_id] = position
                poller.register(sock, zmq.POLLIN)
            results: list[Any] = [None] * len(workers)
            errors: dict[int, BaseException] = {}
            while pending:
                for sock, _ in poller.poll(100):
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
                self._check_open()
                for position in pending.values():
                    worker = workers[position]
                    if worker.generation != generations[position]:
                        lost_node = self._nodes[worker.key[0]].lost
                        raise (NodeLostError if lost_node else WorkerDiedError)(worker.last_death)
            if errors:
                raise errors[min(errors)]
            return results
        finally:
            with self._lock:
                for key in keys:
                    self._dispatcher.release(key)

    def _run_queued_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        futures: list[Future[Any]] = []
        for node in self._nodes:
            for worker in node.workers:
                futures += self.submit_many([list(frames)], target=worker.key)
        results: list[Any] = []
        try:
            for future in futures:
                results.append(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results

    def broadcast_control(self, frames: list[bytes]) -> None:
        with self._lock:
            self._control.append(frames)
            self._wake_pending = True
        self._wake()

    @property
    def node_infos(self) -> list[dict[str, Any]]:
        return [n.info or {} for n in self._nodes]

    def outstanding(self) -> int:
        with self._lock:
            return self._dispatcher.pending()

    # -- the I/O thread ---------------------------------------------------------------------

    def _loop(self) -> None:
        last_ping = 0.0
        while self._running:
            # while tasks are out, look again at least every 50 ms: a worker may become
            # stuck on a long task (see Dispatcher.steal) without any message arriving
            for sock, _ in self._poller.poll(50 if self._dispatcher.pending() else 250):
                if sock is self._wake_pull:
                    self._drain_wake()
                    continue
                owner = self._by_socket.get(sock)  # type: ignore[call-overload]
                if isinstance(owner, _Worker):
                    self._drain_worker(owner)
                elif isinstance(owner, _Node):
                    self._drain_node(owner)
            self._dispatch()
            now = time.monotonic()
            if now - last_ping >= _PING_INTERVAL:
                last_ping = now
                for node in self._nodes:
                    if not node.lost:
                        node.socket.send(wire.PING)
                self._check_liveness(now)

    def _drain_wake(self) -> None:
        while True:
            try:
                self._wake_pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
        with self._lock:
            self._wake_pending = False
            control, self._control = self._control, []
            calls, self._calls = self._calls, []
        for call in calls:
            call()
        for frames in control:
            for node in self._nodes:
                if not node.lost:
                    node.socket.send_multipart(frames)

    def _dispatch(self) -> None:
        now = time.monotonic()
        if self._stopped_streams:
            stopped = []
            while self._stopped_streams:
                stopped.append(self._stopped_streams.popleft())
            self._abandon(stopped)
        with self._lock:
            self._dispatcher.steal(now)
            assignments = self._dispatcher.assign(now)
            recalls = self._dispatcher.recalls()
            sends = [
                (key, [(t, self._completions.get(t), self._payloads.get(t)) for t in ids]) for key, ids in assignments
            ]
        for key, ids in recalls.items():
            worker = self._worker(key)
            if worker.socket is not None:
                worker.socket.send(wire.pack_recall(ids))
        for key, tasks in sends:
            self._send_chunk(self._worker(key), tasks)

    def _send_chunk(
        self, worker: _Worker, tasks: list[tuple[int, Completion | None, list[serialize.Frame] | None]]
    ) -> None:
        entries: list[tuple[int, int, int]] = []
        frames: list[Any] = []
        for task_id, completion, payload in tasks:
            if completion is None or payload is None or not _claim(completion):
                with self._lock:  # cancelled after it was assigned: it never leaves
                    self._dispatcher.cancel(task_id)
                    self._dispatcher.recalled(worker.key, task_id)
                    self._forget(task_id)
                continue
            fn_key = bytes(payload[0])
            fn_bytes = bytes(payload[1])
            if fn_key in worker.functions:
                fn_bytes = b""
            else:
                worker.functions[fn_key] = None
                if len(worker.functions) > _KNOWN_FUNCTIONS:
                    del worker.functions[next(iter(worker.functions))]
            task_frames = wire.encode_task(fn_key, fn_bytes, payload[2:])
            window = completion.window if isinstance(completion, StreamChannel) else 0
            entries.append((task_id, len(task_frames), window))
            frames.extend(task_frames)
        if entries and worker.socket is not None:
            wire.send_frames(worker.socket, wire.pack_message([wire.pack_tasks(entries), *frames]))

    def _drain_worker(self, worker: _Worker) -> None:
        while worker.socket is not None:
            try:
                frames = wire.recv_frames(worker.socket, zmq.NOBLOCK)
            except zmq.Again:
                return
            header, parts = wire.open_message(frames)
            if header[:1] != wire.RESULTS:
                continue
            self._resolve(worker, wire.unpack_results(header), parts, time.monotonic())

    def _resolve(
        self, worker: _Worker, entries: list[tuple[int, wire.Status, int, float]], frames: list[Any], now: float
    ) -> None:
        """Results of one RESULTS message: the bookkeeping under one lock, then each
        completion resolved outside it (user callbacks may run there)."""
        done: list[tuple[Completion, wire.Status, list[Any]]] = []
        dispatcher = self._dispatcher
        with self._lock:
            offset = 0
            for task_id, status, count, seconds in entries:
                payload = frames[offset : offset + count]
                offset += count
                if status > _LAST_FINAL:  # a stream's value or an input stream's WANT: it goes on
                    if status == wire.Status.WANT:
                        feeder = self._feeders.get(task_id)
                        if feeder is not None and payload:
                            feeder.want(*wire.unpack_want(payload[0]))
                        continue
                    completion = self._completions.get(task_id)
                    if completion is not None:
                        done.append((completion, status, payload))
                    continue
                if status == wire.Status.RECALLED:
                    abandoned = dispatcher.recalled(worker.key, task_id)
                    completion = self._completions.get(task_id) if abandoned else None
                    if not dispatcher.is_pending(task_id):
                        self._forget(task_id)
                else:
                    dispatcher.completed(worker.key, task_id, seconds, now)
                    completion = self._completions.pop(task_id, None)  # the first result wins
                    self._payloads.pop(task_id, None)
                    if self._feeders:
                        feeder = self._feeders.pop(task_id, None)
                        if feeder is not None:
                            feeder.stop()
                if completion is not None:
                    done.append((completion, status, payload))
        node = worker.key[0]
        for completion, status, payload in done:
            if completion.done():
                continue
            if status > _LAST_FINAL:
                if isinstance(completion, StreamChannel):
                    completion.item(payload, node, status == wire.Status.ITEMS)
                continue
            if status == wire.Status.RECALLED:
                _fail(completion, AbandonedError("the task was abandoned before it began: it never ran"))
                continue
            try:
                value = self._decoder.value(status, payload, node)
            except BaseException as error:
                completion.set_exception(error)
            else:
                completion.set_result(value)

    def _drain_node(self, node: _Node) -> None:
        while True:
            try:
                frames = node.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            node.last_heard = time.monotonic()
            kind = frames[0]
            if kind == wire.NOTICE:
                notice = wire.decode_json(frames[1])
                self._on_notice(node, notice)
                self._on_message(node.index, kind, notice)
            elif kind in (wire.LOG, wire.METRICS):
                self._on_message(node.index, kind, wire.decode_json(frames[1]))
            elif kind == wire.BYE:
                node.said_bye = True

    def _on_notice(self, node: _Node, notice: dict[str, Any]) -> None:
        if notice.get("kind") == "worker-died":
            worker = node.workers[int(notice["worker"])]
            self._close_worker_socket(worker)
            worker.functions.clear()
            with self._lock:
                lost = self._dispatcher.worker_died(worker.key)
                failed = [(t, self._completions.pop(t, None)) for t in lost]
                for task_id in lost:
                    self._forget(task_id)
            for position, (_, completion) in enumerate(failed):
                why = notice["message"] if position == 0 else (
                    f"worker {worker.key[1]} on node {node.index} died ({notice['cause']}) before this task, "
                    "queued on it, had started"
                )  # fmt: skip
                if completion is not None:
                    _fail(completion, WorkerDiedError(why))
            worker.last_death = str(notice["message"])
            worker.generation += 1
        elif notice.get("kind") == "worker-ready":
            worker = node.workers[int(notice["worker"])]
            worker.endpoint = self._worker_at(node, notice["endpoint"])
            self._close_worker_socket(worker)
            self._open_worker(worker)
            with self._lock:
                self._dispatcher.worker_ready(worker.key)

    # -- interrupted and replaced nodes (spot) -------------------------------------------------

    def _on_io_thread(self, call: Callable[[], None]) -> None:
        """Run ``call`` on the I/O thread (it owns the shared sockets). Dropped once the
        client is closed: there is nothing left to recall or install then."""
        with self._lock:
            if self._closed_reason is not None and not self._running:
                return
            self._calls.append(call)
            self._wake_pending = True
        try:
            self._wake()
        except zmq.ZMQError:
            pass  # closed meanwhile

    def drain_node(self, index: int) -> None:
        """The node will go away (a spot interruption notice): give it no new work and
        re-run its running and queued tasks on the other nodes. The first result of a
        task wins; a late one from the interrupted node is dropped. Tasks meant for that
        node alone (``@`` broadcasts) stay: they may still finish before it goes."""

        def drain() -> None:
            self._nodes[index].draining = True
            with self._lock:
                self._dispatcher.drain(index)

        self._on_io_thread(drain)

    def replace_node(
        self,
        index: int,
        endpoint: str,
        cluster: list[bytes],
        timeout: float,
        identity: handshake.NodeIdentity | None = None,
    ) -> dict[str, Any]:
        """Swap node ``index`` for a new agent at ``endpoint`` (the provider launched a
        replacement): the same handshake as ``connect``, with node ``index``'s current key
        and, when given, the replacement's ``identity``; then the I/O thread takes it."""
        endpoints = [endpoint if n.index == index else n.endpoint for n in self._nodes]
        shared = handshake.shared_endpoint(endpoints)
        if shared is not None:
            raise NodeIdentityError(f"the replacement of node {index}: {shared}")
        fresh = self._new_node(index, endpoint)
        sock = fresh.socket

        def describe(_silent: list[int]) -> str:
            return f"the replacement of node {index} ({endpoint}) did not answer within {timeout:g} s"

        try:
            expected = [identity] if identity is not None else None
            (info,) = handshake.hello([sock], describe, timeout, wheels=self._wheels, expected=expected)
        except BaseException:
            sock.close(linger=0)
            raise
        done = threading.Event()

        def install() -> None:
            old = self._nodes[index]
            for worker in old.workers:
                self._close_worker_socket(worker)
            self._poller.unregister(old.socket)
            self._by_socket.pop(old.socket, None)
            old.socket.close(linger=0)
            self._nodes[index] = fresh
            self._install(fresh, info)
            sock.send_multipart(cluster)
            done.set()

        self._on_io_thread(install)
        if not done.wait(timeout):
            raise ProvisioningError(f"could not install the replacement of node {index}")
        return info

    def _check_liveness(self, now: float) -> None:
        for node in self._nodes:
            if not node.lost and now - node.last_heard > self._node_timeout:
                self.fail_node(node.index, f"node {node.index} stopped answering for {self._node_timeout:g} s")

    def fail_node(self, index: int, reason: str) -> None:
        """Mark a node lost and fail what ran or waited on it (I/O thread only)."""
        node = self._nodes[index]
        node.lost = True
        for worker in node.workers:
            worker.last_death = reason
            worker.generation += 1
        with self._lock:
            failures = self._dispatcher.node_lost(index, reason)
            failed = [(f, self._completions.pop(f.task_id, None)) for f in failures]
            for failure in failures:
                self._forget(failure.task_id)
        for failure, completion in failed:
            if completion is not None:
                _fail(completion, NodeLostError(failure.reason))

    # -- shutdown -----------------------------------------------------------------------------

    def close(self, error: BaseException, stop_agents: bool = True, wait_for_logs: float = 2.0) -> None:
        """Fail what is still outstanding with ``error``, recall what workers have not begun,
        stop the agents and wait (briefly) for their goodbye, so the last lines workers
        printed are delivered, then close."""
        with self._lock:
            if self._closed_reason is not None:
                return
            self._closed_reason = error
            held = {k: self._dispatcher.inflight(k) for k in self._dispatcher.workers()}
            self._dispatcher.drop_all()
            completions, self._completions = self._completions, {}
            self._payloads.clear()
        for completion in completions.values():
            _fail(completion, error)
        if stop_agents and self._running:

            def recall_and_stop() -> None:
                for key, ids in held.items():
                    worker = self._worker(key)
                    if ids and worker.socket is not None:
                        worker.socket.send(wire.pack_recall(ids))
                for node in self._nodes:
                    if not node.lost:
                        node.socket.send(wire.STOP)

            self._on_io_thread(recall_and_stop)
            deadline = time.monotonic() + wait_for_logs
            while time.monotonic() < deadline and not all(n.said_bye or n.lost for n in self._nodes):
                time.sleep(0.01)
        self._running = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._context.destroy(linger=0)


def _claim(completion: Completion) -> bool:
    """Mark the completion running as its task is sent; False if it was cancelled. A task
    sent again (stolen from a busy worker, or re-run after an interruption) is running
    already."""
    if completion.done():
        return False
    if isinstance(completion, Future) and completion.running():
        return True
    return completion.set_running_or_notify_cancel()


def _fail(completion: Completion, error: BaseException) -> None:
    """Fail a completion unless it already finished or was cancelled."""
    if completion.done():
        return
    try:
        completion.set_exception(error)
    except InvalidStateError:
        pass  # cancelled (or resolved) on another thread meanwhile
