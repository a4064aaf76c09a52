"""The pool's client: one I/O thread owns every socket; callers get futures.

Tasks go straight to workers (one hop). Each worker has a credit of
``MAX_INFLIGHT_PER_WORKER`` tasks; the rest wait here, in order, so a burst of 100,000
tasks neither drops (no high-water-mark drops anywhere) nor floods a node. When many
tasks wait, several travel to a worker in one message (a chunk, at most the worker's
free credit and never more than its fair share of the queue), which is what makes
small tasks cheap. Node agents are the control plane: liveness, logs, metrics, and the
news that a worker died or came back.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import zmq

from skyward.errors import ProvisioningError, RemoteError, WorkerDiedError
from skyward.transport import security, serialize, wire
from skyward.transport.security import CurveKeys

# (node index, message kind, decoded JSON payload) for LOG, METRICS and NOTICE messages
MessageHandler = Callable[[int, bytes, Any], None]

MAX_INFLIGHT_PER_WORKER = 16
_PING_INTERVAL = 1.0
_KNOWN_FUNCTIONS = 32  # fewer than the worker's cache (64): what we skip re-sending is still there


class NodeLostError(WorkerDiedError):
    """The node running a task stopped answering (it was terminated or preempted)."""


class RemoteTraceback(Exception):
    """Carries the remote traceback text as the ``__cause__`` of a re-raised exception."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return "\n\n" + self.tb


class _Completion(Protocol):
    """What the I/O thread needs of whatever waits for a task: a Future, or a batch slot."""

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
        if size == 0:
            self._changed.set()

    def slot(self, index: int) -> _Slot:
        return _Slot(self, index)

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
        every task before it has finished (what has not been sent yet is then cancelled,
        as with a Future per task)."""
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
        except BaseException:
            self._cancelled = True
            raise


class _Slot:
    """One task's place in a BatchResult (quacks like the part of a Future the I/O thread uses)."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: BatchResult, index: int) -> None:
        self._batch = batch
        self._index = index

    def set_result(self, result: Any, /) -> None:
        self._batch._finish(self._index, result, None)

    def set_exception(self, exception: BaseException | None, /) -> None:
        self._batch._finish(self._index, None, exception or RemoteError("a task failed without an exception"))

    def done(self) -> bool:
        return self._batch._finished[self._index]

    def cancelled(self) -> bool:
        return self._batch._cancelled and not self._batch._finished[self._index]


@dataclass
class _Task:
    future: _Completion
    frames: list[serialize.Frame] | None  # [fn_key, fn_bytes, *argument frames]
    node: int | None = None
    worker: int | None = None
    retry: list[serialize.Frame] | None = None  # kept after sending when tasks may re-run
    reruns: int = 0


@dataclass
class _Worker:
    node: int
    index: int
    endpoint: str
    socket: zmq.Socket[bytes] | None = None
    inflight: dict[int, None] = field(default_factory=dict)  # ordered: send order
    targeted: deque[int] = field(default_factory=deque)
    available: bool = True
    functions: OrderedDict[bytes, None] = field(default_factory=OrderedDict)
    reserved: int = 0  # tasks callers run directly on their own sockets (see PoolClient.call)
    generation: int = 0  # bumped when the worker dies: direct callers notice
    last_death: str = ""

    @property
    def free(self) -> int:
        return MAX_INFLIGHT_PER_WORKER - len(self.inflight) - self.reserved if self.available else 0


@dataclass
class _Node:
    index: int
    endpoint: str
    socket: zmq.Socket[bytes]
    info: dict[str, Any] | None = None
    workers: list[_Worker] = field(default_factory=list)
    last_heard: float = field(default_factory=time.monotonic)
    lost: bool = False
    said_bye: bool = False
    draining: bool = False  # interrupted: no new work; its running tasks re-run elsewhere


def rebuild_exception(frames: Sequence[Any], node: int) -> BaseException:
    """The remote exception as its original type, its remote traceback as ``__cause__``."""
    try:
        exc, tb = serialize.loads(frames)
    except Exception as load_error:
        return RemoteError(f"a task on node {node} raised an exception that cannot be rebuilt here: {load_error}")
    if not isinstance(exc, BaseException):
        return RemoteError(f"a task on node {node} failed with a non-exception {exc!r}")
    exc.__cause__ = RemoteTraceback(f"Traceback from node {node}:\n{tb}")
    return exc


def worker_endpoint(agent_endpoint: str, bound: str, agent_bound: str | None = None) -> str:
    """Where to reach a worker: its ipc path, or its tcp port on the agent's host (a worker
    bound to 0.0.0.0 is reached at the address the client already uses for its node).

    ``agent_bound`` is the agent's own bound endpoint (from its INFO). When the client
    reaches the agent through a port mapping (an SSM tunnel, NAT), the workers keep their
    offset from the agent's port: agent 16789 -> local 40000 puts worker 16790 at 40001."""
    if bound.startswith("ipc://"):
        return bound
    host, agent_port = agent_endpoint.rsplit(":", 1)
    port = int(bound.rsplit(":", 1)[1])
    if agent_bound and agent_bound.startswith("tcp://"):
        port = int(agent_port) + port - int(agent_bound.rsplit(":", 1)[1])
    return f"{host}:{port}"


class PoolClient:
    def __init__(
        self,
        endpoints: Sequence[str],
        keys: CurveKeys | None,
        on_message: MessageHandler,
        node_timeout: float = 20.0,
        rerun_interrupted: bool = False,
        port_map: Callable[[int, int], str] | None = None,
    ) -> None:
        # port_map(node, container_port): where the client reaches that port of a node
        # whose host maps container ports to other ports (the PortMapping ability of
        # container clouds: VastAI hands out random host ports, so the workers' ports
        # keep no fixed offset from the agent's); None: worker_endpoint's rule
        self._port_map = port_map
        # rerun_interrupted: keep each task's frames until its result arrives, so the
        # tasks of a node that gets an interruption notice can run again elsewhere (costs
        # the memory of the payloads in flight; the pool turns it on for spot pools)
        self._rerun_interrupted = rerun_interrupted
        self._calls: deque[Callable[[], None]] = deque()
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._keys = keys
        self._on_message = on_message
        self._node_timeout = node_timeout
        self._nodes = [_Node(i, e, self._socket(zmq.DEALER, e)) for i, e in enumerate(endpoints)]
        self._wake_address = f"inproc://skyward-wake-{id(self)}"
        self._wake_pull = self._context.socket(zmq.PULL)
        self._wake_pull.bind(self._wake_address)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._incoming: deque[int] = deque()
        self._control: deque[list[bytes]] = deque()
        self._wake_pending = False
        self._tasks: dict[int, _Task] = {}
        self._queue_any: deque[int] = deque()
        self._ids = itertools.count(1)
        self._running = False
        self._closed_reason: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._poller = zmq.Poller()
        self._by_socket: dict[zmq.Socket[bytes], _Node | _Worker] = {}

    def _socket(self, kind: int, endpoint: str) -> zmq.Socket[bytes]:
        sock = self._context.socket(kind)
        for option, value in ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
            sock.setsockopt(option, value)
        if endpoint.startswith("tcp://"):
            if self._keys is None:
                raise ProvisioningError(f"refusing an unencrypted tcp connection to {endpoint}")
            security.configure_client(sock, self._keys)
        sock.connect(endpoint)
        return sock

    # -- start-up -----------------------------------------------------------------------

    def connect(self, timeout: float) -> list[dict[str, Any]]:
        """Wait until every agent answers HELLO, connect to every worker, start the I/O thread.
        Returns the agents' INFO dicts in node order."""
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
            for sock, _ in poller.poll(50):
                node = next(n for n in self._nodes if n.socket is sock)
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if frames[0] == wire.INFO and node.info is None:
                        node.info = wire.decode_json(frames[1])
        for node in self._nodes:
            assert node.info is not None
            self._poller.register(node.socket, zmq.POLLIN)
            self._by_socket[node.socket] = node
            for index, bound in enumerate(node.info["endpoints"]):
                worker = _Worker(node.index, index, self._worker_at(node, bound))
                node.workers.append(worker)
                self._open_worker(worker)
        self._poller.register(self._wake_pull, zmq.POLLIN)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="skyward-io", daemon=True)
        self._thread.start()
        return [n.info for n in self._nodes if n.info is not None]

    def _worker_at(self, node: _Node, bound: str) -> str:
        """Where to reach a worker of ``node`` that bound ``bound`` (through the port map
        when there is one)."""
        if self._port_map is not None and bound.startswith("tcp://"):
            return self._port_map(node.index, int(bound.rsplit(":", 1)[1]))
        return worker_endpoint(node.endpoint, bound, node.info.get("agent_endpoint") if node.info else None)

    def _open_worker(self, worker: _Worker) -> None:
        worker.socket = self._socket(zmq.DEALER, worker.endpoint)
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

    # -- caller side (any thread) ---------------------------------------------------------

    def _wake(self) -> None:
        sock = getattr(self._local, "push", None)
        if sock is None:
            sock = self._context.socket(zmq.PUSH)
            sock.connect(self._wake_address)
            self._local.push = sock
        sock.send(b"")

    def submit(self, frames: list[serialize.Frame]) -> Future[Any]:
        return self.submit_many([frames])[0]

    def submit_many(
        self, payloads: Sequence[list[serialize.Frame]], node: int | None = None, worker: int | None = None
    ) -> list[Future[Any]]:
        """Queue tasks (for one particular worker when ``node`` and ``worker`` are given)."""
        futures: list[Future[Any]] = [Future() for _ in payloads]
        self._enqueue(payloads, futures, node, worker)
        return futures

    def submit_batch(
        self, payloads: Sequence[list[serialize.Frame]], on_finish: Callable[[bool], None] | None = None
    ) -> BatchResult:
        """Queue tasks that complete together (``gather``): one BatchResult, no Future each."""
        batch = BatchResult(len(payloads), on_finish)
        self._enqueue(payloads, [batch.slot(i) for i in range(len(payloads))], None, None)
        return batch

    def _enqueue(
        self,
        payloads: Sequence[list[serialize.Frame]],
        completions: Sequence[_Completion],
        node: int | None,
        worker: int | None,
    ) -> None:
        with self._lock:
            if self._closed_reason is not None:
                raise self._closed_reason
            for frames, completion in zip(payloads, completions, strict=True):
                task_id = next(self._ids)
                self._tasks[task_id] = _Task(completion, frames, node, worker)
                self._incoming.append(task_id)
            wake = not self._wake_pending
            self._wake_pending = True
        if wake:
            self._wake()

    # -- the direct path: one synchronous call, no thread hand-off ---------------------------

    def _reserve(self) -> _Worker | None:
        with self._lock:
            if self._closed_reason is not None:
                raise self._closed_reason
            idle = [w for n in self._nodes if not n.lost and not n.draining for w in n.workers if w.free > 0]
            if not idle:
                return None
            worker = max(idle, key=lambda w: w.free)
            worker.reserved += 1
            return worker

    def _direct_socket(self, worker: _Worker) -> zmq.Socket[bytes]:
        """This thread's own socket to ``worker`` (remade after the worker restarts)."""
        sockets: dict[tuple[int, int], tuple[int, zmq.Socket[bytes]]] = self._local.__dict__.setdefault("direct", {})
        key = (worker.node, worker.index)
        known = sockets.get(key)
        if known is not None and known[0] == worker.generation:
            return known[1]
        if known is not None:
            known[1].close(linger=0)
        sock = self._socket(zmq.DEALER, worker.endpoint)
        sockets[key] = (worker.generation, sock)
        return sock

    def call(self, frames: list[serialize.Frame]) -> tuple[bool, Any]:
        """Run one task on an idle worker from the calling thread itself, over the thread's
        own socket to that worker: no hand-off to the I/O thread and back, which is most
        of a quick call's cost in Python. Returns (False, None) when no worker has room:
        the caller then queues the task as usual."""
        worker = self._reserve()
        if worker is None:
            return False, None
        try:
            generation = worker.generation
            sock = self._direct_socket(worker)
            task_id = next(self._ids)
            task_frames = wire.encode_task(bytes(frames[0]), bytes(frames[1]), frames[2:])
            wire.send_frames(sock, [wire.pack_tasks([(task_id, len(task_frames))]), *task_frames])
            while True:
                if sock.poll(100):
                    reply = sock.recv_multipart(copy=False)
                    if reply[0].bytes[:1] != wire.RESULTS:
                        continue
                    for tid, status, count in wire.unpack_results(reply[0].bytes):
                        if tid != task_id:
                            continue
                        payload = reply[1 : 1 + count]
                        if status == wire.Status.OK:
                            return True, serialize.loads(payload)
                        raise rebuild_exception(payload, worker.node)
                if self._closed_reason is not None:
                    raise self._closed_reason
                node = self._nodes[worker.node]
                if self._rerun_interrupted and (node.draining or worker not in node.workers):
                    # the node got an interruption notice (or was replaced since): run the
                    # task again elsewhere, through the queue; a late reply here is ignored
                    return False, None
                if worker.generation != generation:
                    raise (NodeLostError if node.lost else WorkerDiedError)(worker.last_death)
        finally:
            with self._lock:
                worker.reserved -= 1

    def call_all(self, frames: list[serialize.Frame]) -> tuple[bool, list[Any]]:
        """Run one task on every worker of every node from the calling thread, over its own
        sockets (as ``call`` does for one): every task is sent before any reply is read,
        with no hand-off to the I/O thread and no Future per worker. Results come in node,
        then worker order; the first failure in that order is raised once all have
        answered. Returns (False, []) when a node is lost or a worker has no room: the
        caller then queues the tasks as usual."""
        with self._lock:
            if self._closed_reason is not None:
                raise self._closed_reason
            if any(n.lost for n in self._nodes):
                return False, []
            workers = [w for n in self._nodes for w in n.workers]
            if not workers or any(w.free <= 0 for w in workers):
                return False, []
            for worker in workers:
                worker.reserved += 1
        try:
            generations = [w.generation for w in workers]
            task_frames = wire.encode_task(bytes(frames[0]), bytes(frames[1]), frames[2:])
            poller = zmq.Poller()
            pending: dict[int, int] = {}  # task id -> position
            for position, worker in enumerate(workers):
                sock = self._direct_socket(worker)
                task_id = next(self._ids)
                wire.send_frames(sock, [wire.pack_tasks([(task_id, len(task_frames))]), *task_frames])
                pending[task_id] = position
                poller.register(sock, zmq.POLLIN)
            results: list[Any] = [None] * len(workers)
            errors: dict[int, BaseException] = {}
            while pending:
                for sock, _ in poller.poll(100):
                    while True:
                        try:
                            reply = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        if reply[0].bytes[:1] != wire.RESULTS:
                            continue
                        for task_id, status, count in wire.unpack_results(reply[0].bytes):
                            if task_id not in pending:
                                continue  # a late reply to an earlier call on this socket
                            position = pending.pop(task_id)
                            payload = reply[1 : 1 + count]
                            if status == wire.Status.OK:
                                results[position] = serialize.loads(payload)
                            else:
                                errors[position] = rebuild_exception(payload, workers[position].node)
                if self._closed_reason is not None:
                    raise self._closed_reason
                for position in pending.values():
                    worker = workers[position]
                    if worker.generation != generations[position]:
                        lost = self._nodes[worker.node].lost
                        raise (NodeLostError if lost else WorkerDiedError)(worker.last_death)
            if errors:
                raise errors[min(errors)]
            return True, results
        finally:
            with self._lock:
                for worker in workers:
                    worker.reserved -= 1

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
            return len(self._tasks)

    # -- the I/O thread ---------------------------------------------------------------------

    def _loop(self) -> None:
        last_ping = 0.0
        while self._running:
            for sock, _ in self._poller.poll(250):
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
            incoming, self._incoming = self._incoming, deque()
            control, self._control = self._control, deque()
            calls, self._calls = self._calls, deque()
        for call in calls:
            call()
        for frames in control:
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
                self._nodes[task.node].workers[task.worker or 0].targeted.append(task_id)

    def _live_workers(self) -> list[_Worker]:
        return [w for n in self._nodes if not n.lost and not n.draining for w in n.workers if w.free > 0]

    def _dispatch(self) -> None:
        for node in self._nodes:
            for worker in node.workers:
                if worker.targeted and worker.free > 0:
                    self._send_chunk(worker, worker.targeted, worker.free)
        if not self._queue_any:
            return
        live = self._live_workers()
        if not live:
            return
        share = math.ceil(len(self._queue_any) / len(live))
        for worker in sorted(live, key=lambda w: -w.free):
            if not self._queue_any:
                break
            self._send_chunk(worker, self._queue_any, min(worker.free, share))

    def _send_chunk(self, worker: _Worker, queue: deque[int], limit: int) -> None:
        entries: list[tuple[int, int]] = []
        frames: list[serialize.Frame] = []
        while queue and len(entries) < limit:
            task_id = queue.popleft()
            task = self._tasks.get(task_id)
            if task is None or task.frames is None or task.future.cancelled():
                self._tasks.pop(task_id, None)
                continue
            payload, task.frames = task.frames, None  # ZeroMQ owns the memory from here
            if self._rerun_interrupted:
                task.retry = payload
            task.node, task.worker = worker.node, worker.index
            fn_key = bytes(payload[0])
            fn_bytes = bytes(payload[1])
            if fn_key in worker.functions:
                worker.functions.move_to_end(fn_key)
                fn_bytes = b""
            else:
                worker.functions[fn_key] = None
                if len(worker.functions) > _KNOWN_FUNCTIONS:
                    worker.functions.popitem(last=False)
            task_frames = wire.encode_task(fn_key, fn_bytes, payload[2:])
            entries.append((task_id, len(task_frames)))
            frames.extend(task_frames)
            worker.inflight[task_id] = None
        if entries and worker.socket is not None:
            wire.send_frames(worker.socket, [wire.pack_tasks(entries), *frames])

    def _drain_worker(self, worker: _Worker) -> None:
        while worker.socket is not None:
            try:
                frames = worker.socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if frames[0].bytes[:1] != wire.RESULTS:
                continue
            offset = 1
            for task_id, status, count in wire.unpack_results(frames[0].bytes):
                self._resolve(worker, task_id, status, frames[offset : offset + count])
                offset += count

    def _resolve(self, worker: _Worker, task_id: int, status: wire.Status, payload: list[Any]) -> None:
        worker.inflight.pop(task_id, None)
        with self._lock:
            task = self._tasks.pop(task_id, None)
        if task is None or task.future.done():
            return
        try:
            if status == wire.Status.OK:
                task.future.set_result(serialize.loads(payload))
            else:
                task.future.set_exception(rebuild_exception(payload, worker.node))
        except Exception as exc:  # a result that cannot be unpickled here
            if not task.future.done():
                task.future.set_exception(RemoteError(f"cannot read a result from node {worker.node}: {exc!r}"))

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
            worker.available = False
            worker.functions.clear()
            lost = list(worker.inflight)
            worker.inflight.clear()
            for position, task_id in enumerate(lost):
                if self._moved_away(task_id, node.index):
                    continue
                why = notice["message"] if position == 0 else (
                    f"worker {worker.index} on node {node.index} died ({notice['cause']}) before this task, "
                    "queued on it, had started"
                )  # fmt: skip
                self._fail(task_id, WorkerDiedError(why))
            worker.last_death = str(notice["message"])
            worker.generation += 1
        elif notice.get("kind") == "worker-ready":
            worker = node.workers[int(notice["worker"])]
            worker.endpoint = self._worker_at(node, notice["endpoint"])
            self._close_worker_socket(worker)
            self._open_worker(worker)
            worker.available = True

    # -- interrupted nodes (spot) ------------------------------------------------------------

    def _on_io_thread(self, call: Callable[[], None]) -> None:
        with self._lock:
            self._calls.append(call)
            self._wake_pending = True
        self._wake()

    def drain_node(self, index: int) -> None:
        """The node will go away (a spot interruption notice): give it no new work and
        re-run its running and queued tasks on the other nodes. The first result of a
        task wins; a late one from the interrupted node is dropped. Tasks meant for that
        node alone (``@`` broadcasts) stay: they may still finish before it goes."""
        self._on_io_thread(lambda: self._drain(index))

    def _drain(self, index: int) -> None:
        node = self._nodes[index]
        node.draining = True
        for worker in node.workers:
            worker.available = False
            for task_id in list(worker.inflight):
                task = self._tasks.get(task_id)
                if task is None or task.retry is None or task.reruns >= 1 or task.node is None:
                    continue
                if task_id in worker.targeted:
                    continue
                task.frames, task.reruns = task.retry, task.reruns + 1
                task.node = task.worker = None
                self._queue_any.appendleft(task_id)

    def replace_node(self, index: int, endpoint: str, cluster: list[bytes], timeout: float) -> dict[str, Any]:
        """Swap node ``index`` for a new agent at ``endpoint`` (the provider launched a
        replacement): handshake here, then hand the sockets to the I/O thread."""
        sock = self._socket(zmq.DEALER, endpoint)
        deadline = time.monotonic() + timeout
        info: dict[str, Any] | None = None
        while info is None:
            if time.monotonic() > deadline:
                sock.close(linger=0)
                raise ProvisioningError(
                    f"the replacement of node {index} ({endpoint}) did not answer within {timeout:g} s"
                )
            sock.send(wire.HELLO)
            if sock.poll(1000):
                frames = sock.recv_multipart()
                if frames[0] == wire.INFO:
                    info = wire.decode_json(frames[1])
        done = threading.Event()

        def install() -> None:
            old = self._nodes[index]
            for worker in old.workers:
                self._close_worker_socket(worker)
            self._poller.unregister(old.socket)
            self._by_socket.pop(old.socket, None)
            old.socket.close(linger=0)
            node = _Node(index, endpoint, sock, info=info)
            self._nodes[index] = node
            self._poller.register(sock, zmq.POLLIN)
            self._by_socket[sock] = node
            for w, bound in enumerate(info["endpoints"]):
                worker = _Worker(index, w, self._worker_at(node, bound))
                node.workers.append(worker)
                self._open_worker(worker)
            sock.send_multipart(cluster)
            done.set()

        self._on_io_thread(install)
        if not done.wait(timeout):
            raise ProvisioningError(f"could not install the replacement of node {index}")
        return info

    def _moved_away(self, task_id: int, index: int) -> bool:
        """Whether a task sent to node ``index`` has since been re-queued or re-sent to
        another node (after an interruption notice): its loss there is not a failure."""
        with self._lock:
            task = self._tasks.get(task_id)
        return task is not None and task.node != index

    def _fail(self, task_id: int, error: BaseException) -> None:
        with self._lock:
            task = self._tasks.pop(task_id, None)
        if task is not None and not task.future.done():
            task.future.set_exception(error)

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
            for task_id in [*worker.inflight, *worker.targeted]:
                if self._moved_away(task_id, index):
                    continue  # re-queued elsewhere after an interruption notice
                self._fail(task_id, NodeLostError(reason))
            worker.inflight.clear()
            worker.targeted.clear()
            worker.available = False
        if all(n.lost for n in self._nodes):
            self._fail_all(NodeLostError(f"every node of the pool is gone ({reason})"))

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            tasks, self._tasks = self._tasks, {}
            self._queue_any.clear()
        for task in tasks.values():
            if not task.future.done():
                task.future.set_exception(error)

    # -- shutdown -----------------------------------------------------------------------------

    def close(self, error: BaseException, stop_agents: bool = True, wait_for_logs: float = 2.0) -> None:
        """Fail what is still outstanding with ``error``, stop the agents and wait (briefly)
        for their goodbye, so the last lines workers printed are delivered, then close."""
        with self._lock:
            if self._closed_reason is not None:
                return
            self._closed_reason = error
        self._fail_all(error)
        if stop_agents and self._running:
            self.broadcast_control([wire.STOP])
            deadline = time.monotonic() + wait_for_logs
            while time.monotonic() < deadline and not all(n.said_bye or n.lost for n in self._nodes):
                time.sleep(0.01)
        self._running = False
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._context.destroy(linger=0)
