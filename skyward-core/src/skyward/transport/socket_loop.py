"""The client's I/O thread: the one owner of the shared sockets.

It waits on every agent's and worker's socket and on a wake pipe (an inproc PUSH/PULL
pair: a caller on any thread that queued work, a call to run here or a control message
nudges it). Each turn it drains what arrived (results from workers, logs, metrics and
notices from agents), asks the dispatcher what to send and recall, sends it, and once a
second lets the heartbeat ping the agents and check who went silent.

Results are settled in the ledger under its lock and resolved outside it (user
callbacks may run there). A stream's values are only queued here, never unpickled: the
reader's thread does that (see ``stream``).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import zmq

from skyward.errors import PoolClosedError, WorkerDiedError
from skyward.transport import chunked, serialize, wire
from skyward.transport.completion import Completion
from skyward.transport.dispatcher import Dispatcher, WorkerKey
from skyward.transport.ledger import TaskLedger, claim, ended_by_recall
from skyward.transport.links import Links, NodeLink, WorkerLink
from skyward.transport.results import ResultDecoder
from skyward.transport.stream import StreamChannel

__all__ = ["MessageHandler", "SocketLoop"]

MessageHandler = Callable[[int, bytes, Mapping[str, Any]], None]
"""(node index, message kind, decoded JSON object) for LOG, METRICS and NOTICE messages."""

_PING_INTERVAL = 1.0
_KNOWN_FUNCTIONS = 32  # fewer than the worker's cache (64): what we skip re-sending is still there

TaskToSend = tuple[int, Completion | None, list[serialize.Frame] | None]


class SocketLoop:
    """The I/O thread, its poller and its wake pipe."""

    def __init__(
        self,
        ledger: TaskLedger,
        links: Links,
        decoder: ResultDecoder,
        on_message: MessageHandler,
        heartbeat: Callable[[float], None],
        goodbye: Callable[[NodeLink], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._links = links
        self._decoder = decoder
        self._on_message = on_message
        self._heartbeat = heartbeat  # once a second on this thread: ping agents, check who is silent
        self._goodbye = goodbye  # an agent said goodbye (BYE): lost, unless this client stopped it
        self._wake_address = f"inproc://skyward-wake-{id(self)}"
        self._wake_pull = links.context.socket(zmq.PULL)
        self._wake_pull.bind(self._wake_address)
        self._local = threading.local()
        self._wake_pending = False  # under the ledger's lock
        self._calls: list[Callable[[], None]] = []
        self._control: list[list[bytes]] = []
        self._poller = zmq.Poller()
        self._by_socket: dict[zmq.Socket[bytes], NodeLink | WorkerLink] = {}
        self._reassembly = chunked.Reassembly(links.data_channel)  # per worker socket
        # per worker socket: a result whose sealed parts are still arriving (waited for on
        # a thread of its own, ``_await_sealed``), then what that socket sent after it, in order
        self._held: dict[zmq.Socket[bytes], deque[list[Any] | chunked.SealedMessage]] = {}
        self._thread: threading.Thread | None = None
        self.running = False

    def start(self) -> None:
        self._poller.register(self._wake_pull, zmq.POLLIN)
        self.running = True
        self._thread = threading.Thread(target=self._loop, name="skyward-io", daemon=True)
        self._thread.start()

    def on_io_thread(self) -> bool:
        return self._thread is threading.current_thread()

    def stop(self) -> None:
        """End the thread and wait for it, unless this is it. It is woken: left to its
        poll's timeout, every pool's close waited up to 250 ms for it (0.25 of a 2-node
        Local pool's 0.32 s close on the 2-core development machine)."""
        self.running = False
        if self._thread is not None and self._thread is not threading.current_thread():
            try:
                self.wake()
            except zmq.ZMQError:
                pass  # its context is gone: the thread's poll ends with it
            self._thread.join(timeout=5)

    # -- any thread ---------------------------------------------------------------------

    def wake(self) -> None:
        sock: zmq.Socket[bytes] | None = self._local.__dict__.get("push")
        if sock is None:
            sock = self._links.context.socket(zmq.PUSH)
            sock.connect(self._wake_address)
            self._local.push = sock
        sock.send(b"")

    def nudge(self) -> None:
        """New work is queued: wake the thread unless a wake is already on its way."""
        with self._ledger.lock:
            wake = not self._wake_pending
            self._wake_pending = True
        if wake:
            self.wake()

    def call_soon(self, call: Callable[[], None]) -> None:
        """Run ``call`` on the I/O thread (it owns the shared sockets). Dropped once the
        client is closed: there is nothing left to recall or install then."""
        with self._ledger.lock:
            if self._ledger.closed_reason is not None and not self.running:
                return
            self._calls.append(call)
            self._wake_pending = True
        try:
            self.wake()
        except zmq.ZMQError:
            pass  # closed meanwhile

    def unreadable(self, worker: WorkerLink, error: BaseException) -> None:
        """``worker`` sent a message this client cannot read (a bug, or memory gone bad on
        either side): say so on stderr and ask its agent to restart it, once per worker
        generation. What the worker holds fails at once, and it takes no task until its
        agent says it is back, so nothing waits for an answer that cannot come."""
        generation = worker.generation
        with self._ledger.lock:
            if worker.restart_asked == generation:
                return
            worker.restart_asked = generation
        node_index, index = worker.key
        reason = wire.describe_malformed(error)
        print(
            f"skyward: worker {index} on node {node_index} sent a message this client cannot read ({reason}); "
            "its node restarts it",
            file=sys.stderr,
            flush=True,
        )

        def ask() -> None:
            node = self._links.nodes.get(node_index)
            if node is None or node.lost:
                return
            # out of the pool's view until it is back (the agent's worker-ready): what it holds
            # fails now, and no new task is sent to a worker about to be killed
            death = (
                f"worker {index} on node {node_index} sent a message the client cannot read ({reason}) "
                "while it held this task; its node restarts it"
            )

            def dead(dispatcher: Dispatcher) -> list[tuple[int, BaseException]]:
                return [(task_id, WorkerDiedError(death)) for task_id in dispatcher.worker_died(worker.key)]

            self._ledger.fail_where(dead)
            worker.last_death = death
            worker.generation += 1
            node.socket.send_multipart([wire.RESTART, str(index).encode(), reason.encode()])

        self.call_soon(ask)

    def broadcast(self, frames: list[bytes]) -> None:
        """Send a control message to every live agent."""
        with self._ledger.lock:
            self._control.append(frames)
            self._wake_pending = True
        self.wake()

    # -- sockets (the I/O thread, or before it starts) ----------------------------------

    def watch(self, sock: zmq.Socket[bytes], owner: NodeLink | WorkerLink) -> None:
        self._poller.register(sock, zmq.POLLIN)
        self._by_socket[sock] = owner

    def unwatch(self, sock: zmq.Socket[bytes]) -> None:
        self._poller.unregister(sock)
        self._by_socket.pop(sock, None)
        self._reassembly.drop(sock)
        for item in self._held.pop(sock, ()):
            if isinstance(item, chunked.SealedMessage):
                item.forget()

    def open_worker(self, worker: WorkerLink) -> None:
        worker.socket = self._links.socket(zmq.DEALER, worker.endpoint, self._links.nodes[worker.key[0]].server_public)
        self.watch(worker.socket, worker)
        self._links.connect_data(worker)

    def close_worker(self, worker: WorkerLink) -> None:
        """Drop the socket and whatever it still queues, so a restarted worker can never
        receive a task that was already failed."""
        if worker.socket is not None:
            self.unwatch(worker.socket)
            worker.socket.close(linger=0)
            worker.socket = None
        self._links.disconnect_data(worker)

    # -- the loop ---------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._serve()
        except Exception as error:  # a bug here must not leave every caller waiting for ever
            traceback.print_exc(file=sys.stderr)
            self.running = False
            self._ledger.close(
                PoolClosedError(f"the pool's I/O thread stopped ({type(error).__name__}: {error}); see stderr")
            )

    def _serve(self) -> None:
        last_ping = 0.0
        dispatcher = self._ledger.dispatcher
        while self.running:
            # while tasks are out, look again at least every 50 ms: a worker may become
            # stuck on a long task (see Dispatcher.steal) without any message arriving
            for sock, _ in self._poller.poll(50 if dispatcher.pending() else 250):
                if sock is self._wake_pull:
                    self._drain_wake()
                    continue
                owner = self._by_socket.get(sock)
                if isinstance(owner, WorkerLink):
                    self._drain_worker(owner)
                elif isinstance(owner, NodeLink):
                    self._drain_node(owner)
            self._dispatch()
            now = time.monotonic()
            if now - last_ping >= _PING_INTERVAL:
                last_ping = now
                self._heartbeat(now)

    def _drain_wake(self) -> None:
        while True:
            try:
                self._wake_pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
        with self._ledger.lock:
            self._wake_pending = False
            control, self._control = self._control, []
            calls, self._calls = self._calls, []
        for call in calls:
            call()
        for frames in control:
            for node in self._links.ordered():
                if not node.lost:
                    node.socket.send_multipart(frames)

    def _dispatch(self) -> None:
        ledger = self._ledger
        ledger.abandon_stopped_streams()
        now = time.monotonic()
        with ledger.lock:
            ledger.dispatcher.steal(now)
            assignments = ledger.dispatcher.assign(now)
            recalls = ledger.dispatcher.recalls()
            cancels = ledger.dispatcher.cancels()
            sends = [
                (key, [(t, ledger.completions.get(t), ledger.payloads.get(t)) for t in ids]) for key, ids in assignments
            ]
        for key, ids in recalls.items():
            worker = self._links.find_worker(key)
            if worker is not None and worker.socket is not None:
                worker.socket.send(wire.pack_recall(ids))
        for key, ids in cancels.items():
            worker = self._links.find_worker(key)
            if worker is not None and worker.socket is not None:
                for task_id in ids:
                    worker.socket.send(wire.pack_cancel(task_id))
        for key, tasks in sends:
            self._send_chunk(key, tasks)

    def _send_chunk(self, key: WorkerKey, tasks: list[TaskToSend]) -> None:
        ledger = self._ledger
        worker = self._links.find_worker(key)
        entries: list[tuple[int, int, int]] = []
        frames: list[serialize.Frame] = []
        for task_id, completion, payload in tasks:
            if completion is None or payload is None or worker is None or not claim(completion):
                with ledger.lock:  # cancelled after it was assigned: it never leaves
                    ledger.dispatcher.cancel(task_id)
                    ledger.dispatcher.recalled(key, task_id)
                    ledger.forget(task_id)
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
        if entries and worker is not None and worker.socket is not None:
            message = [wire.pack_tasks(entries), *frames]
            bulk = self._links.bulk(worker.endpoint)
            sealed = self._links.sealed_path(worker, worker.socket)
            chunked.send_message(worker.socket, wire.pack_message(message, self._links.shm, bulk), sealed=sealed)

    def _drain_worker(self, worker: WorkerLink) -> None:
        while (sock := worker.socket) is not None:
            try:
                frames = wire.recv_frames(sock, zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                message = self._reassembly.feed_nowait(frames, sock)
            except wire.MALFORMED as error:
                self.unreadable(worker, error)
                continue
            if message is None:
                continue  # a chunk of a result still arriving (skyward.transport.chunked)
            held = self._held.get(sock)
            if held is not None:
                held.append(message)  # behind a sealed result still arriving: a stream's values keep their order
            elif isinstance(message, chunked.SealedMessage):
                self._held[sock] = deque([message])
                self._await_sealed(worker, sock, message)
            else:
                self._take(worker, message)

    def _take(self, worker: WorkerLink, message: list[Any]) -> None:
        """Settle what a whole message from ``worker`` says."""
        try:
            results = wire.open_results(message, self._links.shm)
        except wire.MALFORMED as error:
            self.unreadable(worker, error)
            return
        if results is not None:
            self._resolve(worker, *results, time.monotonic())

    def _await_sealed(self, worker: WorkerLink, sock: zmq.Socket[bytes], sealed: chunked.SealedMessage) -> None:
        """Wait for ``sealed``'s parts on a thread of its own, then settle it here. Waiting
        on this thread, a large result over tcp held every other worker's results, the
        dispatch and the heartbeat (the agents' grace period) for as long as its transfer
        took: seconds for a 2 GB array on a 10 Gbit link, up to a stall's 60 s."""

        held = self._held[sock]

        def wait() -> None:
            try:
                # stops waiting once the socket is closed (its worker died or left): nobody reads it
                whole: list[Any] | BaseException | None = sealed.complete(lambda: self._held.get(sock) is not held)
            except Exception as error:  # an inconsistent message: reported as any unreadable one
                whole = error
            if whole is not None:
                self.call_soon(lambda: self._release(worker, sock, sealed, whole))

        threading.Thread(target=wait, name="skyward-sealed", daemon=True).start()

    def _release(
        self,
        worker: WorkerLink,
        sock: zmq.Socket[bytes],
        sealed: chunked.SealedMessage,
        whole: list[Any] | BaseException,
    ) -> None:
        """``sealed`` arrived whole: settle it, then what its socket sent after it, up to
        the next sealed result still arriving. Nothing when the socket was closed meanwhile
        (its worker died or left: what it held failed then)."""
        held = self._held.get(sock)
        if not held or held[0] is not sealed:
            return
        held.popleft()
        if isinstance(whole, BaseException):
            self.unreadable(worker, whole)
        else:
            self._take(worker, whole)
        while held:
            item = held[0]
            if isinstance(item, chunked.SealedMessage):
                self._await_sealed(worker, sock, item)
                return
            held.popleft()
            self._take(worker, item)
        if self._held.get(sock) is held:  # (a result settled above may have closed the socket)
            del self._held[sock]

    def _resolve(
        self,
        worker: WorkerLink,
        entries: list[tuple[int, wire.Status, int, float]],
        frames: list[serialize.Frame],
        now: float,
    ) -> None:
        """Results of one RESULTS message: the bookkeeping under the ledger's lock, then
        each completion resolved outside it (user callbacks may run there)."""
        node = worker.key[0]
        for completion, status, payload in self._ledger.settle(worker.key, entries, frames, now):
            if completion.done():
                continue
            if status > wire.Status.RECALLED:
                if isinstance(completion, StreamChannel):
                    completion.item(payload, node, status == wire.Status.ITEMS)
                continue
            if status == wire.Status.RECALLED:
                ended_by_recall(completion)
                continue
            try:
                value = self._decoder.value(status, payload, node)
            except BaseException as error:
                completion.set_exception(error)
            else:
                completion.set_result(value)

    def _drain_node(self, node: NodeLink) -> None:
        while True:
            try:
                frames = node.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            node.last_heard = time.monotonic()
            kind = frames[0]
            try:
                if kind == wire.NOTICE:
                    notice = wire.decode_json(frames[1])
                    self._on_notice(node, notice)
                    self._on_message(node.index, kind, notice)
                elif kind in (wire.LOG, wire.METRICS):
                    self._on_message(node.index, kind, wire.decode_json(frames[1]))
            except wire.MALFORMED as error:
                print(
                    f"skyward: node {node.index} sent a message this client cannot read "
                    f"({wire.describe_malformed(error)}); it was dropped",
                    file=sys.stderr,
                    flush=True,
                )
            if kind == wire.BYE:
                node.said_bye = True
                if self._goodbye is not None:
                    self._goodbye(node)
                return  # a node lost here has nothing more to say

    def _on_notice(self, node: NodeLink, notice: Mapping[str, Any]) -> None:
        """A worker died (what it held fails) or came back (a fresh socket to it)."""
        if notice.get("kind") == "worker-died":
            worker = node.workers[int(notice["worker"])]
            self.close_worker(worker)
            worker.functions.clear()
            cause = notice.get("cause")

            def died(dispatcher: Dispatcher) -> list[tuple[int, BaseException]]:
                lost = dispatcher.worker_died(worker.key)
                queued = (
                    f"worker {worker.key[1]} on node {node.index} died ({cause}) before this task, "
                    "queued on it, had started"
                )  # fmt: skip
                # the first was running: it gets the agent's own account of the death
                return [(t, WorkerDiedError(str(notice["message"]) if i == 0 else queued)) for i, t in enumerate(lost)]

            self._ledger.fail_where(died)
            worker.last_death = str(notice["message"])
            worker.generation += 1
        elif notice.get("kind") == "worker-ready":
            worker = node.workers[int(notice["worker"])]
            self.close_worker(worker)
            worker.endpoint = self._links.worker_at(node, str(notice["endpoint"]))
            data = notice.get("data_endpoint")
            worker.data_endpoint = self._links.worker_data_at(node, data if isinstance(data, str) else None)
            self.open_worker(worker)
            with self._ledger.lock:
                self._ledger.dispatcher.worker_ready(worker.key)
