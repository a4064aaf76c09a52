"""A worker process: runs tasks sent straight from the pool's client.

The client talks to each worker directly (one hop, no relay), on a socket that admits
only the pool's client: an ipc socket in the node's private directory on one machine, or
tcp with CURVE and a ZAP policy accepting the pool's client key alone across machines.
The worker's keys arrive on stdin from its supervisor, never in the environment that
user code can read and print. Control (cluster info, stop) comes from the supervisor.
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib
import inspect
import json
import os
import signal
import sys
import threading
import time
import traceback
import types
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import zmq

from skyward.agent.listen import listen
from skyward.agent.watch import WATCH_AFTER, SocketWatch
from skyward.errors import AbandonedError, RemoteError
from skyward.runtime.context import InstanceInfo, set_instance_info
from skyward.transport import chunked, inputs, security, serialize, wire
from skyward.transport.bulk import BulkFrames
from skyward.transport.shm import SharedMemory

if TYPE_CHECKING:
    from skyward.transport.data_channel import DataChannel

FN_CACHE_SIZE = 64
_RESULT_FLUSH_SECONDS = 0.002  # quick results of a chunk travel together, slow ones at once
# Between two tasks the worker reads its socket (a RECALL must reach the tasks waiting
# here before they begin) only when it has not read it for this long. Asking the socket
# after every task (``getsockopt(EVENTS)``) was the worker's largest cost in a gather of
# 10,000 trivial tasks: py-spy put 29% of the worker's samples on that one line, and
# gather throughput fell 15-20% against the code before RECALL existed. A task this
# long or longer is still followed by a read, so only a run of sub-millisecond tasks can
# start one that was recalled less than 1 ms before; it then delivers its result, as a
# recalled task that had begun always does.
_RECALL_CHECK_SECONDS = 0.001
_CLUSTER_WAIT_SECONDS = 30.0  # the pool sends it right after connecting


def apply_env(env: Mapping[str, str], environ: MutableMapping[str, str], path: list[str]) -> None:
    """Set the pool's env in this running worker. ``PYTHONPATH`` is read when an
    interpreter starts, and this one started before the env arrived: its entries go onto
    ``path`` (``sys.path``) where the interpreter would have put them, right after the
    script's directory, so ``env={"PYTHONPATH": ...}`` still decides what tasks import.
    (Variables the dynamic loader reads at start, ``LD_LIBRARY_PATH`` and ``LD_PRELOAD``,
    reach the processes a task starts, not the worker itself.)"""
    environ.update(env)
    extra = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry and entry not in path]
    path[1:1] = extra
    if extra:
        importlib.invalidate_caches()


def enter_workdir(workdir: str | None, path: list[str]) -> None:
    """The project's files (``Image(includes=...)``): their directory becomes the current
    one and the first entry of ``path``, so a task opens ``data/x.csv`` and imports a
    shipped module as it did on the client."""
    if not workdir:
        return
    os.chdir(workdir)
    if workdir not in path:
        path.insert(0, workdir)
        importlib.invalidate_caches()


class _StreamOutput:
    """Results of the running stream not yet sent (one RESULTS message's worth). Small
    values (one frame) are packed into one ITEMS frame; others travel as ITEM."""

    __slots__ = ("client", "done", "frames", "packed", "task_id")

    _PACK_MAX = 64 * 1024  # a value this large keeps its own frame

    def __init__(self) -> None:
        self.client = b""
        self.task_id = 0
        self.done: list[tuple[int, wire.Status, int, float]] = []
        self.frames: list[serialize.Frame] = []
        self.packed: list[bytes] = []

    def value(self, task_id: int, frames: list[serialize.Frame]) -> None:
        if len(frames) == 1 and isinstance(frames[0], bytes) and len(frames[0]) < self._PACK_MAX:
            self.task_id = task_id
            self.packed.append(frames[0])
        else:
            self.add(task_id, wire.Status.ITEM, frames, 0.0)

    def add(self, task_id: int, status: wire.Status, frames: list[serialize.Frame], seconds: float) -> None:
        self.seal()
        self.done.append((task_id, status, len(frames), seconds))
        self.frames.extend(frames)

    def seal(self) -> None:
        """Close the pack of small values (in order, before what comes next)."""
        if self.packed:
            self.done.append((self.task_id, wire.Status.ITEMS, 1, 0.0))
            self.frames.append(wire.pack_values(self.packed))
            self.packed = []


def die_with_parent(name: bytes | None = None) -> None:
    """Ask Linux to SIGKILL us when the supervisor dies, so no worker outlives its node;
    with ``name``, also name this process (what ``ps -o comm`` and ``top`` show: a worker
    forked from its agent keeps the agent's command line)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            pr_set_pdeathsig, pr_set_name = 1, 15
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
            if name is not None:
                libc.prctl(pr_set_name, ctypes.c_char_p(name[:15]))
        except OSError:
            pass


class FunctionCache:
    """Recently used functions by key, so a batch unpickles its function once."""

    def __init__(self, size: int = FN_CACHE_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[bytes, Any] = OrderedDict()

    def load(self, key: bytes, raw: Any) -> Any:
        fn = self._items.get(key)
        if fn is not None:
            self._items.move_to_end(key)
            return fn
        if len(raw) == 0:
            raise LookupError("the client sent a function by reference that this worker does not hold")
        fn = serialize.loads([raw])
        self._items[key] = fn
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return fn


def _encode_exception(exc: BaseException) -> list[serialize.Frame]:
    tb = "".join(traceback.format_exception(exc))
    try:
        return serialize.dumps_result((exc, tb))
    except Exception:
        # The exception itself cannot travel (unpicklable attributes): send its text.
        return serialize.dumps_result((RemoteError(f"{type(exc).__qualname__}: {exc}"), tb))


def call_task(cache: FunctionCache, payload: list[Any]) -> tuple[Any, Any]:
    """Call one task's function (its frames, see ``wire.encode_task``): (function, what it
    returned); raises what loading or calling it raised."""
    fn: Any = None
    try:
        key, fn_bytes, arguments = wire.decode_task(payload)
        fn = cache.load(key, fn_bytes)
        args, kwargs = serialize.loads(arguments)
        return fn, fn(*args, **kwargs)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _inside(frame: types.FrameType | None, code: types.CodeType) -> bool:
    """Whether ``frame`` runs ``code`` or is called, however deeply, from it."""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def run_task(cache: FunctionCache, payload: list[Any]) -> tuple[wire.Status, list[serialize.Frame]]:
    """Run one task (its frames, see ``wire.encode_task``); never raises."""
    fn: Any = None
    try:
        fn, result = call_task(cache, payload)
    except BaseException as exc:  # user code may raise anything, SystemExit included
        return wire.Status.RAISED, _encode_exception(exc)
    try:
        return wire.Status.OK, serialize.dumps_result(result)
    except Exception as exc:
        error = TypeError(f"the result of {getattr(fn, '__qualname__', fn)} cannot be pickled: {exc}")
        return wire.Status.RAISED, _encode_exception(error)


class Worker:
    """One worker process's loop: receive tasks, input items, credits and recalls on the
    one socket, run each task, send its results.

    One class past 300 lines on purpose: the socket has a single owner at a time (this
    loop, or the watch thread while a long task runs: ``_with_socket``), and every path
    that reads or writes it (tasks, stream credits, input streams, recalls, result
    flushes) must see that handoff. Split into objects, each would need the socket, the
    client's identity and the flush clock passed around; kept together, the one-owner
    rule is visible in one place. The pure parts live beside it (``skyward.transport.wire``
    packs, ``skyward.agent.watch`` the handoff, ``skyward.transport.inputs`` the markers)."""

    def __init__(
        self,
        config: dict[str, Any],
        clock: Callable[[], float] = time.perf_counter,
        watch_after: float = WATCH_AFTER,
    ) -> None:
        # clock: run times, result flushes and socket reads between tasks (tests freeze it);
        # watch_after: when the watch thread takes the socket during a task (see ``watch``)
        self.clock = clock
        self.info = InstanceInfo(**config["info"])
        self.plugins: list[str] | None = config.get("plugins")  # see worker_startup_manager
        self.census: dict[str, list[str | bool]] | None = config.get("census")
        set_instance_info(self.info)
        # a Local pool's segments (skyward.transport.shm): read from the first task (the
        # client alone sends them, on a Local pool), written once CLUSTER says so
        self.shm = SharedMemory(self.info.job_id) if self.info.job_id else None
        self.shm_send = False
        # Tasks come straight from the client, cluster info through the supervisor: the
        # first task can overtake it. Tasks wait for it (see serve), or a distributed
        # backend would read head_port=0 and the real cluster's size too late.
        self.cluster_known = False
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.control = self.context.socket(zmq.DEALER)
        self.control.setsockopt(zmq.IDENTITY, f"w{self.info.worker}".encode())
        self.control.setsockopt(zmq.LINGER, 1000)
        self.control.connect(config["control"])
        self.tasks = self.context.socket(zmq.ROUTER)
        for option, value in ((zmq.ROUTER_MANDATORY, 1), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 1000)):
            self.tasks.setsockopt(option, value)
        self.auth: Any = None
        curve = config.get("curve")
        # results over tcp (CURVE) cut large buffers into chunks (skyward.transport.bulk)
        self.bulk = BulkFrames() if curve is not None else None
        if curve is not None:
            self.auth = security.start_server_auth(self.context, curve["client_public"].encode())
            security.configure_server(self.tasks, curve["server_secret"].encode())
        who = f"skyward worker {self.info.worker} (node {self.info.node})"
        self.data: DataChannel | None = None  # large buffers, sealed, on a port of their own (tcp)
        self.data_endpoint: str | None = None
        try:
            self.endpoint = listen(self.tasks, config["bind"], who)
            if curve is not None and config.get("data_bind"):
                self.data, self.data_endpoint = self._open_data(str(config["data_bind"]), who)
        except SystemExit:
            # without this the process never exits: the authenticator's socket would hold
            # the context's termination at interpreter exit
            if self.auth is not None:
                self.auth.stop()
            self.context.destroy(linger=0)
            raise
        self.reassembly = chunked.Reassembly(lambda: self.data)  # per client socket: messages whose chunks are arriving
        if self.endpoint.startswith("ipc://"):
            os.chmod(self.endpoint.removeprefix("ipc://"), 0o600)
        self.cache = FunctionCache()
        # (client, task id, frames, stream window: 0 for a plain task), not begun
        self.pending: deque[tuple[bytes, int, list[Any], int]] = deque()
        # the stream running now: its task id, the values it may still send, and whether
        # the client asked to stop it (set by ``_receive``, on either thread)
        self.stream_id: int | None = None
        self.stream_credit = 0
        self.stream_stop = False
        self.stopping = False  # STOP arrived while a stream waited for credit or input
        # the task running now (any kind), for RECALL and input streams
        self.running_id: int | None = None
        self.cancel_id: int | None = None  # the running task a CANCEL interrupts (``_cancel``)
        self.running_client = b""
        # input streams of the running task, by slot: items received, slots ended, items
        # read since the last WANT (see ``next_input``)
        self.inputs_task: int | None = None
        self.inputs: dict[int, deque[list[Any]]] = {}
        self.inputs_ended: set[int] = set()
        self.inputs_read: dict[int, int] = {}
        inputs.set_source(self)
        self.stream_out = _StreamOutput()
        self.last_read = 0.0  # ``clock()`` when ``_receive`` last read the task socket
        self.watch = SocketWatch(self.context, self.tasks, self._receive, self._flush_stream, watch_after)
        self.frees_on_sigterm = False  # see _free_segments_on_sigterm

    def serve(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._on_sigint)
        if self.plugins != []:
            # Only here, and only when some plugin implements the hook: the registry imports
            # pluggy and importlib.metadata, 27 ms of a Local node's start on this 2-core
            # machine (the node then has nothing to call: see worker_startup_manager).
            from skyward.plugins.registry import worker_startup_manager  # noqa: PLC0415

            worker_startup_manager(self.plugins, self.census).hook.skyward_worker_startup(info=self.info)
        started = {"pid": os.getpid(), "endpoint": self.endpoint, "data_endpoint": self.data_endpoint}
        self.control.send_multipart([wire.READY, wire.encode_json(started)])
        poller = zmq.Poller()
        poller.register(self.tasks, zmq.POLLIN)
        poller.register(self.control, zmq.POLLIN)
        while True:
            ready = dict(poller.poll())
            if self.control in ready and not self._on_control():
                return
            if self.tasks in ready:
                if not self.cluster_known and not self._await_cluster():
                    return
                self._on_tasks()
                if self.stopping:
                    return

    def _await_cluster(self) -> bool:
        """Handle control messages until the cluster info has arrived; False on STOP.

        No task runs before it: it carries the pool's env (secrets among them), and a task
        that read a missing ``HF_TOKEN`` would fail, or worse, run unauthenticated. A client
        that never sends it is gone, and the agent stops this worker then (its grace)."""
        deadline = time.monotonic() + _CLUSTER_WAIT_SECONDS
        warned = False
        while not self.cluster_known:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0 and not warned:
                print(
                    f"skyward worker: no cluster information after {_CLUSTER_WAIT_SECONDS:g} s; "
                    "tasks wait for it (it carries the pool's env)",
                    file=sys.stderr,
                    flush=True,
                )
                warned = True
            if self.control.poll(max(remaining_ms, 1000)) and not self._on_control():
                return False
        return True

    def _on_control(self) -> bool:
        frames = self.control.recv_multipart()
        if frames[0] == wire.STOP:
            return False
        if frames[0] == wire.CLUSTER:
            cluster = wire.decode_json(frames[1])
            # Image/ComputePool env: only here, in memory, never in this process's start-up
            # environment (readable in /proc/<pid>/environ) nor on disk (skyward.secrets)
            apply_env(cluster.pop("env", {}), os.environ, sys.path)
            self.shm_send = bool(cluster.pop("shared_memory", False)) and self.shm is not None
            enter_workdir(cluster.pop("workdir", None), sys.path)
            self.info = dataclasses.replace(self.info, **cluster)
            set_instance_info(self.info)
            self.cluster_known = True
        return True

    def _on_tasks(self) -> None:
        self._receive()
        self._run_pending()

    def _receive(self) -> None:
        """Take every waiting message: tasks join the local queue; a RECALL drops the
        tasks it names that have not begun, and each dropped one is answered RECALLED."""
        self.last_read = self.clock()
        while True:
            try:
                frames = wire.recv_frames(self.tasks, zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) < 2:
                continue
            client = frames[0].bytes
            message = self.reassembly.feed(frames[1:], client)
            if message is None:
                continue  # a chunk of a message still arriving (skyward.transport.chunked)
            header, parts = wire.open_message(message, self.shm)
            kind = header[:1]
            if kind == wire.TASKS:
                offset = 0
                for task_id, count, window in wire.unpack_tasks(header):
                    self.pending.append((client, task_id, parts[offset : offset + count], window))
                    offset += count
            elif kind == wire.RECALL:
                self._recall(client, set(wire.unpack_recall(header)))
            elif kind == wire.CANCEL:
                self._cancel(client, wire.unpack_recall(header)[0])
            elif kind == wire.INPUT:
                self._on_input(header, parts)
            elif kind == wire.CREDIT:
                task_id, count = wire.unpack_credit(header)
                if task_id == self.stream_id:
                    self.stream_credit += count

    def _on_input(self, header: bytes, parts: list[Any]) -> None:
        task_id, slot, ended, counts = wire.unpack_input(header)
        if task_id != self.running_id:
            return  # late: its task is over
        if self.inputs_task != task_id:
            self._reset_inputs(task_id)
        buffer = self.inputs.setdefault(slot, deque())
        offset = 0
        for count in counts:
            buffer.append(parts[offset : offset + count])
            offset += count
        if ended:
            self.inputs_ended.add(slot)

    def _reset_inputs(self, task_id: int | None) -> None:
        self.inputs_task = task_id
        self.inputs, self.inputs_ended, self.inputs_read = {}, set(), {}

    def next_input(self, slot: int) -> Any:
        """The next item of the running task's input stream ``slot`` (called by user code,
        through ``inputs.RemoteInput``): asks the client for a window of items the first
        time and for more each time half of it was read, and waits here when none is in.
        A RECALL (the client gave up on the task) or STOP ends the wait with
        ``AbandonedError``."""
        if self.inputs_task != self.running_id:
            self._reset_inputs(self.running_id)
        buffer = self.inputs.get(slot)
        if buffer is None:
            buffer = self.inputs[slot] = deque()
            self.inputs_read[slot] = 0
            self._with_socket(lambda: self._want(slot, inputs.INPUT_WINDOW))
        if not buffer and slot not in self.inputs_ended:
            self._with_socket(lambda: self._await_input(slot))
        if not buffer:
            raise StopIteration
        frames = buffer.popleft()
        self.inputs_read[slot] += 1
        if self.inputs_read[slot] * 2 >= inputs.INPUT_WINDOW and slot not in self.inputs_ended:
            count, self.inputs_read[slot] = self.inputs_read[slot], 0
            self._with_socket(lambda: self._want(slot, count))
        return serialize.loads(frames)

    def _with_socket(self, action: Any) -> None:
        """Run ``action`` with the task socket, from inside user code (which runs while
        the watch thread may hold it)."""
        self.watch.task_ends()
        try:
            action()
        finally:
            self.watch.task_begins()

    def _want(self, slot: int, count: int) -> None:
        if self.running_id is not None:
            want = wire.pack_want(slot, count)
            self._send(self.running_client, [(self.running_id, wire.Status.WANT, 1, 0.0)], [want])

    def _await_input(self, slot: int) -> None:
        poller = zmq.Poller()
        poller.register(self.tasks, zmq.POLLIN)
        poller.register(self.control, zmq.POLLIN)
        buffer = self.inputs[slot]
        while not buffer and slot not in self.inputs_ended:
            if self.stream_stop or self.stopping:
                raise AbandonedError("the client gave up on this task while it waited for input")
            ready = dict(poller.poll())
            if self.tasks in ready:
                self._receive()
            if self.control in ready and not self._on_control():
                self.stopping = True

    def _recall(self, client: bytes, task_ids: set[int]) -> None:
        if self.running_id in task_ids:
            self.stream_stop = True  # a stream closes its generator; a task waiting for input ends
        kept: deque[tuple[bytes, int, list[Any], int]] = deque()
        dropped: list[tuple[int, wire.Status, int, float]] = []
        for item in self.pending:
            if item[1] in task_ids:
                dropped.append((item[1], wire.Status.RECALLED, 0, 0.0))
            else:
                kept.append(item)
        self.pending = kept
        if dropped:
            self._send(client, dropped, [])

    def _cancel(self, client: bytes, task_id: int) -> None:
        """The caller stopped waiting for ``task_id`` (Ctrl-C, a notebook's interrupt): a
        task not begun is dropped as a recalled one is; the plain task running now gets a
        KeyboardInterrupt in its own code, as it would on the caller's machine, so the
        worker is free for the next call instead of finishing work nobody will read."""
        self._recall(client, {task_id})
        if task_id == self.running_id and task_id not in (self.stream_id, self.inputs_task):
            self.cancel_id = task_id
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    def _on_sigint(self, signum: int, frame: types.FrameType | None) -> None:
        """SIGINT in the worker: a cancel (``_cancel``) raises KeyboardInterrupt only inside
        the task's own call (``call_task``, whose caller turns any exception into the
        task's result), never in the loop around it, which must go on; any other SIGINT
        is ignored: the supervisor stops a worker (STOP, then a kill), and a SIGINT from a
        cancel that arrives after its task ended must not end the worker."""
        if self.cancel_id is not None and self.cancel_id == self.running_id and _inside(frame, call_task.__code__):
            self.cancel_id = None
            raise KeyboardInterrupt(f"task {self.running_id} cancelled: its caller was interrupted")

    def _free_segments_on_sigterm(self) -> None:
        """From this worker's first shared-memory segment on, SIGTERM removes its segments
        before it ends (``_on_sigterm``). Only then: a Python handler runs between
        bytecodes, so a worker inside one long C call (a large matrix product) would end
        only when that call returns or its agent kills it, where the default action ends
        it at once, and a worker without segments has nothing to remove."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)
            self.frees_on_sigterm = True

    def _on_sigterm(self, signum: int, frame: types.FrameType | None) -> None:
        """SIGTERM in the worker of a Local pool (whose provider stops a node by signalling
        its process group): remove this worker's shared-memory segments on the way out,
        so a pool that goes on (scaled down) keeps none of a node it no longer has, then
        end by the signal, as without this handler."""
        if self.shm is not None:
            self.shm.close(blocking=False)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def _run_pending(self) -> None:
        """Run the local queue in order. Between tasks, new messages are read when the
        socket was last read ``_RECALL_CHECK_SECONDS`` ago or more (a RECALL must reach
        the tasks after this one before they begin), and during a long task the watch
        thread reads them (see ``watch``); quick results travel together, at most
        ``_RESULT_FLUSH_SECONDS`` late, slow ones at once. One clock, read twice a task,
        serves the run time, the flush and the read."""
        done: list[tuple[int, wire.Status, int, float]] = []
        out: list[serialize.Frame] = []
        owner = b""
        clock = self.clock
        last_flush = clock()
        while self.pending:
            client, task_id, body, window = self.pending.popleft()
            if done and (client != owner or window):
                self._send(owner, done, out)
                done, out = [], []
            owner = client
            self.running_id, self.running_client, self.stream_stop = task_id, client, False
            if window:
                self._run_stream(client, task_id, body, window)
                if self.stopping:
                    return
                last_flush = clock()
                continue
            started = clock()
            self.watch.task_begins()
            try:
                status, frames = run_task(self.cache, body)
            finally:
                self.watch.task_ends()
            now = clock()
            self.running_id = None
            done.append((task_id, status, len(frames), now - started))
            out.extend(frames)
            if self.stopping:
                self._send(owner, done, out)
                return
            if self.pending and now - self.last_read >= _RECALL_CHECK_SECONDS:
                self._receive()  # a RECALL for what waits here must be read before it begins
            if not self.pending or now - last_flush > _RESULT_FLUSH_SECONDS:
                self._send(owner, done, out)
                done, out, last_flush = [], [], now

    def _run_stream(self, client: bytes, task_id: int, body: list[Any], window: int) -> None:
        """Run a generator task: each yielded value leaves as an ITEM, at most ``window``
        ahead of what the client has read (its CREDIT messages); when none is left the
        generator is paused here, waiting. A RECALL (the client closed the stream), or
        STOP, closes the generator, so its ``finally`` runs, and frees the worker.

        Values travel together while they come quickly (``_RESULT_FLUSH_SECONDS``); when
        the generator's next step runs long, the watch thread sends what waits
        (``_flush_stream``), so a value is never held back behind a slow step for longer
        than the watch takes to engage (``watch.WATCH_AFTER``)."""
        out = self.stream_out
        out.client = client
        self.stream_id, self.stream_credit = task_id, window
        started = self.clock()
        generator: Any = None
        final: tuple[wire.Status, list[serialize.Frame]] | None = None
        self.watch.task_begins()
        try:
            fn, generator = call_task(self.cache, body)
            if not inspect.isgenerator(generator):
                name = getattr(fn, "__qualname__", fn)
                raise TypeError(f"{name} was sent as a stream but returned {type(generator).__name__}, not a generator")
        except BaseException as exc:
            final = (wire.Status.RAISED, _encode_exception(exc))
        finally:
            self.watch.task_ends()
        last_flush = self.clock()
        while final is None:
            if self.stream_credit <= 0 or self.stream_stop:
                self._flush_stream()
                self._await_credit()
            if self.stream_stop or self.stopping:
                self.watch.task_begins()
                try:
                    generator.close()  # its finally runs here
                except BaseException:
                    pass  # nobody reads this stream any more
                finally:
                    self.watch.task_ends()
                final = (wire.Status.RECALLED, [])
                break
            self.watch.task_begins()
            try:
                value = next(generator)
            except StopIteration:
                final = (wire.Status.OK, serialize.dumps_result(None))
                break
            except BaseException as exc:
                final = (wire.Status.RAISED, _encode_exception(exc))
                break
            finally:
                self.watch.task_ends()
            try:
                frames = serialize.dumps_value(value)  # now: the generator may change it next
            except Exception as exc:
                error = TypeError(f"a value the stream yielded cannot be pickled: {exc}")
                generator.close()
                final = (wire.Status.RAISED, _encode_exception(error))
                break
            out.value(task_id, frames)
            self.stream_credit -= 1
            now = self.clock()
            if now - self.last_read >= _RECALL_CHECK_SECONDS:
                self._receive()  # credit, or a RECALL: the client closed the stream
            if now - last_flush > _RESULT_FLUSH_SECONDS:
                self._flush_stream()
                last_flush = now
        sys.stdout.flush()
        sys.stderr.flush()
        status, frames = final
        out.add(task_id, status, frames, self.clock() - started)
        self._flush_stream()
        self.stream_id = self.running_id = None

    def _await_credit(self) -> None:
        """Block until the client grants more values, recalls the stream, or STOP comes."""
        poller = zmq.Poller()
        poller.register(self.tasks, zmq.POLLIN)
        poller.register(self.control, zmq.POLLIN)
        while self.stream_credit <= 0 and not self.stream_stop:
            ready = dict(poller.poll())
            if self.tasks in ready:
                self._receive()
            if self.control in ready and not self._on_control():
                self.stopping = True
                return

    def _flush_stream(self) -> None:
        """Send the stream's waiting values (main thread between steps, or the watch
        thread while a step runs long: whoever holds the socket)."""
        out = self.stream_out
        out.seal()
        if out.done:
            self._send(out.client, out.done, out.frames)
            out.done, out.frames = [], []

    def _open_data(self, bind: str, who: str) -> tuple[DataChannel, str]:
        """This worker's data port: a plain ROUTER whose chunks are sealed one by one
        (skyward.transport.sealed), owned by its DataChannel's thread."""
        from skyward.transport.data_channel import DataChannel  # noqa: PLC0415 (cryptography: tcp workers only)

        router = self.context.socket(zmq.ROUTER)
        for option, value in ((zmq.ROUTER_MANDATORY, 1), (zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
            router.setsockopt(option, value)
        endpoint = listen(router, bind, who + " data port")
        return DataChannel(self.context, router), endpoint

    def _sealed_path(self, client: bytes) -> chunked.SealedPath | None:
        """Where ``client``'s large results go sealed, once its data connection works."""
        route = self.reassembly.route(client)
        if self.data is None or route is None or not self.data.has_route(route):
            return None
        return chunked.SealedPath(self.data, route)

    def _send(self, client: bytes, done: list[tuple[int, wire.Status, int, float]], out: list[serialize.Frame]) -> None:
        message = wire.pack_message([wire.pack_results(done), *out], self.shm if self.shm_send else None, self.bulk)
        if self.shm is not None and not self.frees_on_sigterm and self.shm.holds_segments:
            self._free_segments_on_sigterm()
        try:
            chunked.send_message(self.tasks, message, prefix=(client,), sealed=self._sealed_path(client))
        except zmq.ZMQError:
            if self.shm is not None:
                self.shm.discard(wire.shm_refs(message))  # nobody will read them
            # the client is gone; the node's grace period ends us

    def close(self) -> None:
        self.watch.close()
        if self.data is not None:
            self.data.close()
        if self.auth is not None:
            self.auth.stop()
        self.context.destroy(linger=500)
        if self.shm is not None:
            self.shm.close()  # a worker leaving a pool that goes on (scaled down, restarted) frees its segments


def main() -> None:
    """A worker started as its own interpreter (``python -m skyward.agent.worker``): its
    config is the first line of stdin."""
    die_with_parent()
    config = json.loads(sys.stdin.readline())
    sys.stdin.close()
    run(config)


def run(config: dict[str, Any]) -> None:
    """Serve tasks until told to stop: the worker's whole life once it has its config,
    whether it was started as an interpreter of its own (``main``) or forked from its
    agent (``skyward.agent.processes.fork_workers``)."""
    worker = Worker(config)
    try:
        worker.serve()
    finally:
        worker.close()


if __name__ == "__main__":
    main()
