"""The pool's client: what the pool calls to run work on its nodes.

``PoolClient`` is a facade over parts with one job each:

- ``ledger.TaskLedger``: the book of tasks in flight (what waits for each, its frames),
  over the pure ``dispatcher.Dispatcher``, under the one lock of the client;
- ``socket_loop.SocketLoop``: the I/O thread, the only owner of the shared sockets;
- ``direct.DirectPath``: ``>>`` and ``@`` from the caller's thread on idle workers;
- ``streaming.Streams``: generator tasks and input streams;
- ``liveness.Liveness``: heartbeats, and what a silent node costs;
- ``membership.Membership``: the first nodes, and nodes that join, leave or are replaced;
- ``links.Links``: the table of nodes and workers, and the one factory of sockets.

Tasks go straight to workers (one hop); node agents are the control plane: liveness,
logs, metrics, and the news that a worker died or came back. The pool asks the client
to run something and gets a result or an exception: ``run`` (``>>``), ``run_on_all``
(``@``), ``submit`` (a Future), ``submit_batch`` (``gather``), ``stream``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from skyward.errors import NodeLostError
from skyward.transport import serialize, wire
from skyward.transport.completion import BatchResult
from skyward.transport.direct import DirectPath
from skyward.transport.dispatcher import WorkerKey
from skyward.transport.handshake import NodeIdentity, WheelSupply, worker_endpoint
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, NodeInfo, PortMap
from skyward.transport.liveness import Liveness
from skyward.transport.membership import Membership
from skyward.transport.results import RemoteTraceback, ResultDecoder
from skyward.transport.security import PoolKeys
from skyward.transport.socket_loop import MessageHandler, SocketLoop
from skyward.transport.stream import STREAM_WINDOW, FinishHandler, RemoteStream
from skyward.transport.streaming import Inputs, Streams

__all__ = [
    "BatchResult",
    "MessageHandler",
    "NodeInfo",
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
        node_timeout: float = 20.0,
        rerun_interrupted: bool = False,
        decoder: ResultDecoder | None = None,
        port_map: PortMap | None = None,
        wheels: WheelSupply | None = None,
        identities: Sequence[NodeIdentity] | None = None,
    ) -> None:
        # rerun_interrupted: the tasks of a node that gets an interruption notice run
        # again elsewhere (the pool turns it on for spot pools)
        # port_map(node, container_port): where the client reaches that port of a node
        # behind a host's port mapping (see Links); None: worker_endpoint's rule
        self._endpoints = list(endpoints)
        decoder = decoder or ResultDecoder()
        self._ledger = TaskLedger(rerun_interrupted)
        self._links = Links(keys, port_map)
        self._liveness = Liveness(self._ledger, self._links, node_timeout)
        self._loop = SocketLoop(self._ledger, self._links, decoder, on_message, self._liveness.heartbeat)
        self._membership = Membership(self._ledger, self._links, self._loop, wheels, identities)
        self._direct = DirectPath(self._ledger, self._links, decoder, self.submit_many, rerun_interrupted)
        self._streams = Streams(self._ledger, self._links, self._loop, decoder)

    # -- nodes ----------------------------------------------------------------------------

    def connect(self, timeout: float) -> list[NodeInfo]:
        """Wait until every agent answers HELLO, connect to every worker, start the I/O
        thread. Returns the agents' INFO in node order."""
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
        """Mark a node lost and fail what ran or waited on it (I/O thread only)."""
        self._liveness.fail_node(index, reason)

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

    def submit(self, frames: list[serialize.Frame]) -> Future[Any]:
        """Queue one task: a ``concurrent.futures.Future`` that enters the running state
        when the task is sent to a worker. ``cancel()`` before that succeeds and the task
        never starts; after it, ``cancel()`` returns False (the task may be running)."""
        return self.submit_many([frames])[0]

    def submit_many(
        self, payloads: Sequence[list[serialize.Frame]], target: WorkerKey | None = None
    ) -> list[Future[Any]]:
        futures: list[Future[Any]] = [Future() for _ in payloads]
        ids = self._ledger.enqueue(payloads, futures, target)
        self._ledger.track(futures, ids)
        for task_id, future in zip(ids, futures, strict=True):
            future.add_done_callback(self._cancel_hook(task_id))
        self._loop.nudge()
        return futures

    def submit_batch(
        self, payloads: Sequence[list[serialize.Frame]], on_finish: FinishHandler | None = None
    ) -> BatchResult:
        """Queue tasks that complete together (``gather``): one BatchResult, no Future each.
        When the batch is abandoned (its first failure raised), what has not begun never does."""
        batch = BatchResult(len(payloads), on_finish)
        ids = self._ledger.enqueue(payloads, batch.slots(), None)
        batch.on_abandon = lambda: self.abandon([ids[i] for i in batch.unfinished()])
        self._loop.nudge()
        return batch

    def abandon(self, task_ids: Sequence[int]) -> None:
        """Nobody wants these results any more: drop what is queued, recall what was sent."""
        self._loop.call_soon(lambda: self._ledger.abandon(task_ids))

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

    def run(self, frames: list[serialize.Frame]) -> Any:
        """Run one task and return its result or raise its exception (``>>``)."""
        return self._direct.run(frames)

    def run_on_all(self, frames: list[serialize.Frame]) -> list[Any]:
        """Run one task on every worker of every node (``@``), results in node, then worker order."""
        return self._direct.run_on_all(frames)

    def stream(
        self,
        frames: list[serialize.Frame],
        target: WorkerKey | None = None,
        window: int = STREAM_WINDOW,
        on_finish: FinishHandler | None = None,
        inputs: Inputs | None = None,
    ) -> RemoteStream[Any]:
        """Queue a generator task: an iterator over what it yields (see ``Streams.stream``)."""
        return self._streams.stream(frames, target, window, on_finish, inputs)

    def stream_on_all(self, frames: list[serialize.Frame]) -> list[RemoteStream[Any]]:
        """A generator task on every worker (``@``): one stream each, in node, then worker order."""
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
        if stop_agents and loop.running:

            def recall_and_stop() -> None:
                for key, ids in held.items():
                    worker = links.find_worker(key)
                    if ids and worker is not None and worker.socket is not None:
                        worker.socket.send(wire.pack_recall(ids))
                for node in links.ordered():
                    if not node.lost:
                        node.socket.send(wire.STOP)

            loop.call_soon(recall_and_stop)
            deadline = time.monotonic() + wait_for_logs
            while time.monotonic() < deadline and not all(n.said_bye or n.lost for n in links.ordered()):
                time.sleep(0.01)
        loop.stop()
        links.context.destroy(linger=0)
