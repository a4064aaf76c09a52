"""The pool's client: what the pool calls to run work on its nodes.

``PoolClient`` is a facade over parts with one job each:

- ``ledger.TaskLedger``: the book of tasks in flight (what waits for each, its frames),
  over the pure ``dispatcher.Dispatcher``, under the one lock of the client;
- ``socket_loop.SocketLoop``: the I/O thread, the only owner of the shared sockets;
- ``direct.DirectPath``: ``>>`` and ``@`` from the caller's thread on idle workers;
- ``streaming.Streams``: generator tasks and input streams;
- ``liveness.Liveness``: heartbeats, and what a lost node costs;
- ``membership.Membership``: the first nodes, and nodes that join, leave or are replaced;
- ``links.Links``: the table of nodes and workers, and the one factory of sockets.

Tasks go straight to workers (one hop); node agents are the control plane: liveness,
logs, metrics, and the news that a worker died or came back. The pool asks the client
to run something and gets a result or an exception: ``run`` (``>>``), ``run_on_all``
(``@``), ``submit`` (a Future), ``submit_batch`` (``gather``), ``stream``.

Nodes come and go while work runs. With ``rerun_lost``, a lost node costs only what it
was running, which runs again on the other nodes (up to each function's ``retries``);
with ``wait_for_nodes``, work queued while the client has no node waits for one to join
(``add_node``) instead of failing, until the pool gives up (``fail_waiting``). The pool
learns of each lost node (``on_node_lost``) and reads the load (``load``) to decide how
many nodes it needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from skyward.errors import NodeLostError
from skyward.transport import serialize, wire
from skyward.transport.completion import BatchResult
from skyward.transport.direct import DirectPath
from skyward.transport.dispatcher import WorkerKey
from skyward.transport.handshake import FileSync, NodeIdentity, WheelSupply, worker_endpoint
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, NodeInfo, PortMap
from skyward.transport.liveness import NODE_TIMEOUT, Liveness, NodeLost
from skyward.transport.load import ClientLoad
from skyward.transport.membership import Membership
from skyward.transport.results import RemoteTraceback, ResultDecoder
from skyward.transport.security import PoolKeys
from skyward.transport.shm import SharedMemory
from skyward.transport.socket_loop import MessageHandler, SocketLoop
from skyward.transport.stream import STREAM_WINDOW, FinishHandler, RemoteStream
from skyward.transport.streaming import Inputs, Streams

__all__ = [
    "NODE_TIMEOUT",
    "BatchResult",
    "ClientLoad",
    "MessageHandler",
    "NodeInfo",
    "NodeLost",
    "NodeLostError",
    "PoolClient",
    "RemoteStream",
    "RemoteTraceback",
    "worker_endpoint",
]


class PoolClient:
    """Runs tasks on the pool's nodes and hands back results, futures and streams."""

    def __init__(
        self,
        endpoints: Sequence[str],
        keys: PoolKeys | None,
        on_message: MessageHandler,
        node_timeout: float = NODE_TIMEOUT,
        rerun_lost: bool = False,
        on_node_lost: NodeLost | None = None,
        wait_for_nodes: bool = False,
        decoder: ResultDecoder | None = None,
        port_map: PortMap | None = None,
        wheels: WheelSupply | None = None,
        identities: Sequence[NodeIdentity] | None = None,
        files: FileSync | None = None,
        shm: SharedMemory | None = None,
    ) -> None:
        # shm: a Local pool's shared memory for large buffers (skyward.transport.shm)
        # files: ships the project's files to each node after its handshake (skyward.files)
        # node_timeout: seconds of silence after which a node is lost (see NODE_TIMEOUT)
        # rerun_lost: what a lost node (silent, failed by the pool, or whose agent left
        #   unasked) or a drained one was running goes back to the front of the queue and
        #   runs elsewhere, up to its function's retries (sky.compute(retries=...), default
        #   one re-run); a task for one worker (@) still fails, and a stream runs again
        #   only while its reader has had none of its values
        # on_node_lost(index, reason): told once per node declared lost, whatever the
        #   reason, on the I/O thread: it must return at once (hand off to a thread)
        # wait_for_nodes: with no node left (every one lost or removed, or connected to
        #   none), queued work waits for add_node instead of failing; fail_waiting ends it
        # port_map(node, container_port): where the client reaches that port of a node
        #   behind a host's port mapping (see Links); None: worker_endpoint's rule
        self._endpoints = list(endpoints)
        decoder = decoder or ResultDecoder()
        self._ledger = TaskLedger(rerun_lost, wait_for_nodes)
        self._links = Links(keys, port_map, shm)
        self._liveness = Liveness(self._ledger, self._links, node_timeout, on_node_lost)
        self._loop = SocketLoop(
            self._ledger, self._links, decoder, on_message, self._liveness.heartbeat, self._liveness.goodbye
        )
        self._membership = Membership(self._ledger, self._links, self._loop, wheels, identities, files)
        self._direct = DirectPath(
            self._ledger, self._links, decoder, self.submit_many, rerun_lost, self._loop.unreadable
        )
        self._streams = Streams(self._ledger, self._links, self._loop, decoder)

    # -- nodes ----------------------------------------------------------------------------

    def connect(self, timeout: float) -> list[NodeInfo]:
        """Wait until every agent answers HELLO, connect to every worker, start the I/O
        thread. Returns the agents' INFO in node order. With no endpoints the client
        starts with no node (a pool born empty): nodes join with ``add_node``."""
        return self._membership.connect(self._endpoints, timeout)

    def add_node(
        self,
        index: int,
        endpoint: str,
        timeout: float,
        cluster: list[bytes] | None = None,
        identity: NodeIdentity | None = None,
    ) -> NodeInfo:
        """A new node joins as node ``index`` while work runs (see ``Membership.add_node``)."""
        return self._membership.add_node(index, endpoint, timeout, cluster, identity)

    def replace_node(
        self, index: int, endpoint: str, cluster: list[bytes], timeout: float, identity: NodeIdentity | None = None
    ) -> NodeInfo:
        """Swap node ``index`` for a new agent at ``endpoint`` (the provider launched a
        replacement): the same handshake as ``connect``, then the I/O thread takes it."""
        return self._membership.replace_node(index, endpoint, cluster, timeout, identity)

    def drain_node(self, index: int) -> None:
        """The node will go away: no new work for it; its re-runnable tasks run elsewhere."""
        self._membership.drain_node(index)

    def remove_node(self, index: int, timeout: float) -> None:
        """Node ``index`` leaves while work runs: drained, then forgotten (see
        ``Membership.remove_node``)."""
        self._membership.remove_node(index, timeout)

    def fail_node(self, index: int, reason: str) -> None:
        """The pool knows node ``index`` is gone (its provider says so, its process
        exited): it is lost at once, as if it had gone silent (see ``rerun_lost``) and
        ``on_node_lost`` hears of it. Any thread; the I/O thread does it."""
        if self._loop.running and not self._loop.on_io_thread():
            self._loop.call_soon(lambda: self._liveness.fail_node(index, reason))
        else:
            self._liveness.fail_node(index, reason)

    def fail_waiting(self, reason: str) -> None:
        """No node will come back (the pool could not get one: quota, no offer, a
        timeout): the tasks waiting for a node fail with ``NodeLostError(reason)``.
        Nothing fails while a live node can run them; work queued afterwards waits again
        (the pool may yet get a node). Any thread."""
        self._ledger.fail_where(
            lambda dispatcher: [(f.task_id, NodeLostError(f.reason)) for f in dispatcher.fail_waiting(reason)]
        )

    def load(self) -> ClientLoad:
        """The client's work now, for an autoscaler (see ``ClientLoad``): one look under
        the client's lock."""
        with self._ledger.lock:
            return self._ledger.dispatcher.load(time.monotonic())

    def broadcast_width(self) -> int:
        """How many results ``@`` gives now: one per worker of every live node."""
        with self._ledger.lock:
            return len(self._ledger.dispatcher.live_workers())

    def live_nodes(self) -> list[int]:
        """The nodes ``@`` runs on now: neither lost nor draining, in index order."""
        with self._ledger.lock:
            return sorted({node for node, _ in self._ledger.dispatcher.live_workers()})

    @property
    def node_infos(self) -> list[NodeInfo]:
        return [node.info for node in self._links.ordered()]

    def worker_endpoints(self, node: int) -> list[str]:
        """Where this client reaches each worker of ``node`` (after any replacement)."""
        return [w.endpoint for w in self._links.nodes[node].workers]

    def broadcast_control(self, frames: list[bytes]) -> None:
        """Send a control message (e.g. CLUSTER) to every live agent."""
        self._loop.broadcast(frames)

    def outstanding(self) -> int:
        with self._ledger.lock:
            return self._ledger.dispatcher.pending()

    # -- queued tasks -----------------------------------------------------------------------

    def submit(self, frames: list[serialize.Frame], retries: int | None = None) -> Future[Any]:
        """Queue one task: a ``concurrent.futures.Future`` that enters the running state
        when the task is sent to a worker. ``cancel()`` before that succeeds and the task
        never starts; after it, ``cancel()`` returns False (the task may be running).
        ``retries``: its function's ``sky.compute(retries=...)`` (None: the default)."""
        return self.submit_many([frames], retries=retries)[0]

    def submit_many(
        self,
        payloads: Sequence[list[serialize.Frame]],
        target: WorkerKey | None = None,
        retries: int | None = None,
    ) -> list[Future[Any]]:
        futures: list[Future[Any]] = [Future() for _ in payloads]
        each = None if retries is None else [retries] * len(payloads)
        ids = self._ledger.enqueue(payloads, futures, target, retries=each)
        self._ledger.track(futures, ids)
        for task_id, future in zip(ids, futures, strict=True):
            future.add_done_callback(self._cancel_hook(task_id))
        self._loop.nudge()
        return futures

    def submit_batch(
        self,
        payloads: Sequence[list[serialize.Frame]],
        on_finish: FinishHandler | None = None,
        retries: Sequence[int | None] | None = None,
    ) -> BatchResult:
        """Queue tasks that complete together (``gather``): one BatchResult, no Future each.
        When the batch is abandoned (its first failure raised), what has not begun never does.
        ``retries``: each task's function's ``sky.compute(retries=...)`` (None: the default)."""
        batch = BatchResult(len(payloads), on_finish)
        ids = self._ledger.enqueue(payloads, batch.slots(), None, retries=retries)
        batch.on_abandon = lambda: self.abandon([ids[i] for i in batch.unfinished()])
        batch.on_interrupt = lambda: self.abandon([ids[i] for i in batch.unfinished()], interrupt=True)
        self._loop.nudge()
        return batch

    def abandon(self, task_ids: Sequence[int], interrupt: bool = False) -> None:
        """Nobody wants these results any more: drop what is queued, recall what was sent
        (``interrupt``: the caller was interrupted, so what runs is interrupted too)."""
        self._loop.call_soon(lambda: self._ledger.abandon(task_ids, interrupt))

    def abandon_futures(self, futures: Sequence[Future[Any]]) -> None:
        """Nobody wants these futures' results (joblib's ``abort_everything``): those still
        queued are cancelled, those sent but not begun are recalled and never start (they
        end cancelled-by-error, ``AbandonedError``), those running finish unread."""
        ids = []
        for future in futures:
            if not future.cancel():
                task_id = self._ledger.task_of(future)
                if task_id is not None:
                    ids.append(task_id)
        if ids:
            self.abandon(ids)

    def _cancel_hook(self, task_id: int) -> Callable[[Future[Any]], None]:
        def on_done(future: Future[Any]) -> None:
            self._ledger.future_ids.pop(future, None)
            if not future.cancelled():
                return
            if self._loop.running:  # cancel() succeeded: the task was still queued here
                self._loop.call_soon(lambda: self._cancelled(task_id, future))
            else:
                try:
                    future.set_running_or_notify_cancel()  # no I/O thread: notify waiters here
                except RuntimeError:
                    pass

        return on_done

    def _cancelled(self, task_id: int, future: Future[Any]) -> None:
        self._ledger.cancelled(task_id)
        future.set_running_or_notify_cancel()  # CANCELLED -> notified: wait() and as_completed() count it

    # -- direct calls and streams -------------------------------------------------------------

    def run(self, frames: list[serialize.Frame], retries: int | None = None) -> Any:
        """Run one task and return its result or raise its exception (``>>``)."""
        return self._direct.run(frames, retries)

    def run_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        """Run one task on every worker of every node live when it is called (neither
        lost nor draining): ``@``. Results in node, then worker order."""
        return self._direct.run_on_all(frames)

    def stream(
        self,
        frames: list[serialize.Frame],
        target: WorkerKey | None = None,
        window: int = STREAM_WINDOW,
        on_finish: FinishHandler | None = None,
        inputs: Inputs | None = None,
        retries: int | None = None,
    ) -> RemoteStream[Any]:
        """Queue a generator task: an iterator over what it yields (see ``Streams.stream``)."""
        return self._streams.stream(frames, target, window, on_finish, inputs, retries)

    def stream_on_all(self, frames: list[serialize.Frame]) -> list[RemoteStream[Any]]:
        """A generator task on every worker of every live node (``@``): one stream each,
        in node, then worker order."""
        return self._streams.stream_on_all(frames)

    def submit_with_inputs(self, frames: list[serialize.Frame], inputs: Inputs) -> Future[Any]:
        """Queue a task whose input streams the worker pulls as it reads them."""
        return self._streams.submit_with_inputs(frames, inputs)

    # -- shutdown -------------------------------------------------------------------------------

    def close(self, error: BaseException, stop_agents: bool = True, wait_for_logs: float = 2.0) -> None:
        """Fail what is still outstanding with ``error``, recall what workers have not begun,
        stop the agents and wait (briefly) for their goodbye, so the last lines workers
        printed are delivered, then close."""
        held = self._ledger.close(error)
        if held is None:
            return
        links, loop = self._links, self._loop
        if loop.running:
            sent = threading.Event()

            def recall_and_stop() -> None:
                for key, ids in held.items():
                    worker = links.find_worker(key)
                    if ids and worker is not None and worker.socket is not None:
                        worker.socket.send(wire.pack_recall(ids))
                if stop_agents:
                    for node in links.ordered():
                        if not node.lost:
                            node.socket.send(wire.STOP)
                sent.set()

            loop.call_soon(recall_and_stop)
            if stop_agents:
                deadline = time.monotonic() + wait_for_logs
                while time.monotonic() < deadline and not all(n.said_bye or n.lost for n in links.ordered()):
                    time.sleep(0.01)
            else:  # a client detaching from a kept pool: its recalls go out, the agents stay
                sent.wait(wait_for_logs)
        loop.stop()
        links.close_data()
        links.context.destroy(linger=0 if stop_agents else 200)  # a detaching client's recalls still go out
        if links.shm is not None:
            links.shm.close()  # this process's segments: unmapped, so their memory goes with the pool
