"""The pool's client: one I/O thread owns every socket; callers get futures.

Callers serialise in their own thread, queue the frames and wake the I/O thread through
an inproc socket. The I/O thread sends a task only while its node has credit
(``workers x inflight_per_worker``), so neither side ever queues more than that per
node: a burst of 100,000 tasks waits here, in order, and nothing is dropped.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import zmq

from skyward.errors import ProvisioningError, RemoteError, WorkerDiedError
from skyward.transport import security, serialize, wire
from skyward.transport.security import CurveKeys

# (node index, message kind, decoded JSON payload) for LOG, METRICS and NOTICE messages
MessageHandler = Callable[[int, bytes, Any], None]

_PING_INTERVAL = 1.0


class NodeLostError(WorkerDiedError):
    """The node running a task stopped answering (it was terminated or preempted)."""


class RemoteTraceback(Exception):
    """Carries the remote traceback text as the ``__cause__`` of a re-raised exception."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n\n" + self.tb


@dataclass
class _Task:
    future: Future[Any]
    frames: list[serialize.Frame] | None
    node: int | None = None
    worker: int = wire.ANY_WORKER


@dataclass
class _Node:
    index: int
    endpoint: str
    socket: zmq.Socket[bytes]
    capacity: int = 1
    inflight: set[int] = field(default_factory=set)
    targeted: deque[int] = field(default_factory=deque)
    info: dict[str, Any] | None = None
    last_heard: float = field(default_factory=time.monotonic)
    lost: bool = False


def rebuild_exception(frames: Sequence[Any], node: int) -> BaseException:
    """The remote exception as its original type, its remote traceback as ``__cause__``."""
    try:
        exc, tb = serialize.loads(frames)
    except Exception as load_error:
        return RemoteError(f"a task on node {node} raised an exception that cannot be rebuilt here: {load_error}")
    exc.__cause__ = RemoteTraceback(f"Traceback from node {node}:\n{tb}")
    return exc


class PoolClient:
    def __init__(
        self,
        endpoints: Sequence[str],
        keys: CurveKeys | None,
        on_message: MessageHandler,
        inflight_per_worker: int = 2,
        node_timeout: float = 20.0,
    ) -> None:
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._on_message = on_message
        self._inflight_per_worker = inflight_per_worker
        self._node_timeout = node_timeout
        self._nodes: list[_Node] = []
        for index, endpoint in enumerate(endpoints):
            sock = self._context.socket(zmq.DEALER)
            for option, value in ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
                sock.setsockopt(option, value)
            if endpoint.startswith("tcp://"):
                if keys is None:
                    raise ProvisioningError(f"refusing an unencrypted tcp connection to {endpoint}")
                security.configure_client(sock, keys)
            sock.connect(endpoint)
            self._nodes.append(_Node(index, endpoint, sock))
        self._wake_address = f"inproc://skyward-wake-{id(self)}"
        self._wake_pull = self._context.socket(zmq.PULL)
        self._wake_pull.bind(self._wake_address)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._incoming: deque[int] = deque()
        self._control: deque[tuple[int | None, list[bytes]]] = deque()
        self._wake_pending = False
        self._tasks: dict[int, _Task] = {}
        self._queue_any: deque[int] = deque()
        self._ids = itertools.count(1)
        self._running = False
        self._closed_reason: BaseException | None = None
        self._thread: threading.Thread | None = None

    # -- start-up ---------------------------------------------------------------------

    def connect(self, timeout: float) -> list[dict[str, Any]]:
        """Wait until every agent answers HELLO; returns their INFO dicts in node order."""
        poller = zmq.Poller()
        for node in self._nodes:
            poller.register(node.socket, zmq.POLLIN)
        deadline = time.monotonic() + timeout
        last_hello = 0.0
        while any(n.info is None for n in self._nodes):
            now = time.monotonic()
            if now > deadline:
                silent = [f"node {n.index} ({n.endpoint})" for n in self._nodes if n.info is None]
                raise ProvisioningError(
                    f"{', '.join(silent)} did not answer within {timeout:g} s of starting; "
                    "raise the provider's bootstrap timeout or check the node's bootstrap log"
                )
            if now - last_hello > 1.0:
                last_hello = now
                for node in self._nodes:
                    if node.info is None:
                        node.socket.send(wire.HELLO)
            for sock, _ in poller.poll(100):
                node = next(n for n in self._nodes if n.socket is sock)
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if frames[0] == wire.INFO:
                        node.info = wire.decode_json(frames[1])
                        node.capacity = max(1, int(node.info["workers"])) * self._inflight_per_worker
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="skyward-io", daemon=True)
        self._thread.start()
        return [n.info for n in self._nodes if n.info is not None]

    # -- caller side (any thread) -----------------------------------------------------

    def _wake(self) -> None:
        sock = getattr(self._local, "push", None)
        if sock is None:
            sock = self._context.socket(zmq.PUSH)
            sock.connect(self._wake_address)
            self._local.push = sock
        sock.send(b"")

    def submit(self, frames: list[serialize.Frame], node: int | None = None, worker: int = wire.ANY_WORKER) -> Future[Any]:
        return self.submit_many([frames], node=node, worker=worker)[0]

    def submit_many(
        self, payloads: Sequence[list[serialize.Frame]], node: int | None = None, worker: int = wire.ANY_WORKER
    ) -> list[Future[Any]]:
        futures: list[Future[Any]] = []
        with self._lock:
            if self._closed_reason is not None:
                raise self._closed_reason
            for frames in payloads:
                task_id = next(self._ids)
                future: Future[Any] = Future()
                self._tasks[task_id] = _Task(future, frames, node, worker)
                self._incoming.append(task_id)
                futures.append(future)
            wake = not self._wake_pending
            self._wake_pending = True
        if wake:
            self._wake()
        return futures

    def broadcast_control(self, frames: list[bytes]) -> None:
        with self._lock:
            self._control.append((None, frames))
            self._wake_pending = True
        self._wake()

    @property
    def node_infos(self) -> list[dict[str, Any]]:
        return [n.info or {} for n in self._nodes]

    def outstanding(self) -> int:
        with self._lock:
            return len(self._tasks)

    # -- the I/O thread -----------------------------------------------------------------

    def _loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._wake_pull, zmq.POLLIN)
        by_socket: dict[zmq.Socket[bytes], _Node] = {}
        for node in self._nodes:
            poller.register(node.socket, zmq.POLLIN)
            by_socket[node.socket] = node
        last_ping = 0.0
        while self._running:
            for sock, _ in poller.poll(250):
                if sock is self._wake_pull:
                    self._drain_wake()
                else:
                    self._drain_node(by_socket[sock])  # type: ignore[index]
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
            incoming, self._incoming = self._incoming, deque()
            control, self._control = self._control, deque()
        for _target, frames in control:
            for node in self._nodes:
                if not node.lost:
                    node.socket.send_multipart(frames)
        for task_id in incoming:
            task = self._tasks.get(task_id)
            if task is None:
                continue
            if task.node is None:
                self._queue_any.append(task_id)
            else:
                self._nodes[task.node].targeted.append(task_id)

    def _send(self, node: _Node, task_id: int) -> None:
        task = self._tasks.get(task_id)
        if task is None or task.future.cancelled() or task.frames is None:
            self._tasks.pop(task_id, None)
            return
        frames, task.frames = task.frames, None  # drop our reference: memory is ZeroMQ's now
        task.node = node.index
        node.socket.send_multipart([wire.TASK, wire.task_header(task_id, task.worker), *frames], copy=False)
        node.inflight.add(task_id)

    def _dispatch(self) -> None:
        live = [n for n in self._nodes if not n.lost]
        for node in live:
            while node.targeted and len(node.inflight) < node.capacity:
                self._send(node, node.targeted.popleft())
        while self._queue_any and live:
            node = max(live, key=lambda n: n.capacity - len(n.inflight))
            if len(node.inflight) >= node.capacity:
                break
            self._send(node, self._queue_any.popleft())

    def _drain_node(self, node: _Node) -> None:
        while True:
            try:
                frames = node.socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            node.last_heard = time.monotonic()
            kind = frames[0].bytes
            if kind == wire.RESULT:
                self._on_result(node, frames[1:])
            elif kind in (wire.LOG, wire.METRICS, wire.NOTICE):
                self._on_message(node.index, kind, wire.decode_json(frames[1].bytes))

    def _on_result(self, node: _Node, frames: list[Any]) -> None:
        task_id, status = wire.parse_result_header(frames[0].bytes)
        node.inflight.discard(task_id)
        with self._lock:
            task = self._tasks.pop(task_id, None)
        if task is None or task.future.done():
            return
        payload = frames[1:]
        try:
            if status == wire.Status.OK:
                task.future.set_result(serialize.loads(payload))
            elif status == wire.Status.RAISED:
                task.future.set_exception(rebuild_exception(payload, node.index))
            else:
                detail = wire.decode_json(payload[0].bytes)
                task.future.set_exception(WorkerDiedError(detail["message"]))
        except Exception as exc:  # a result that cannot be unpickled here
            if not task.future.done():
                task.future.set_exception(RemoteError(f"cannot read the result from node {node.index}: {exc!r}"))

    def _check_liveness(self, now: float) -> None:
        for node in self._nodes:
            if not node.lost and now - node.last_heard > self._node_timeout:
                self.fail_node(node.index, f"node {node.index} stopped answering for {self._node_timeout:g} s")

    def fail_node(self, index: int, reason: str) -> None:
        """Mark a node lost and fail what ran or waited for it (I/O thread only)."""
        node = self._nodes[index]
        node.lost = True
        for task_id in [*node.inflight, *node.targeted]:
            with self._lock:
                task = self._tasks.pop(task_id, None)
            if task is not None and not task.future.done():
                task.future.set_exception(NodeLostError(reason))
        node.inflight.clear()
        node.targeted.clear()
        if all(n.lost for n in self._nodes):
            self._fail_all(NodeLostError(f"every node of the pool is gone ({reason})"))

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            tasks, self._tasks = self._tasks, {}
            self._queue_any.clear()
        for task in tasks.values():
            if not task.future.done():
                task.future.set_exception(error)

    # -- shutdown ---------------------------------------------------------------------

    def close(self, error: BaseException, stop_agents: bool = True) -> None:
        """Fail everything still outstanding with ``error``, tell agents to stop, close."""
        with self._lock:
            if self._closed_reason is not None:
                return
            self._closed_reason = error
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._fail_all(error)
        if stop_agents:
            for node in self._nodes:
                try:
                    node.socket.send(wire.STOP, zmq.NOBLOCK)
                except zmq.ZMQError:
                    pass
        time.sleep(0.05)  # let STOP leave before the sockets close
        self._context.destroy(linger=0)
