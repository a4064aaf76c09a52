"""Which nodes the client serves: the first ones, and nodes that join, leave or are
replaced while work runs.

Every node comes in through one path: the handshake (``handshake.hello``, wheels
included) and the project's files (``FileSync``) on the caller's thread, then
``_install`` on the I/O thread (it owns the poller), which registers the agent, connects
to each worker and declares the node to the dispatcher. The first nodes are installed
before the I/O thread starts; a replacement or a new node is handed to it and the caller
waits until it is in.

A node leaves by draining (no new work; its re-runnable tasks run elsewhere) and then
being forgotten: its sockets close and what it still held fails with ``NodeLostError``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import zmq

from skyward.errors import ConfigurationError, NodeIdentityError, NodeLostError, ProvisioningError
from skyward.transport import handshake, wire
from skyward.transport.dispatcher import Dispatcher
from skyward.transport.handshake import FileSync, NodeIdentity, WheelSupply
from skyward.transport.ledger import TaskLedger
from skyward.transport.links import Links, NodeInfo, NodeLink, WorkerLink, node_info
from skyward.transport.socket_loop import SocketLoop

__all__ = ["Membership"]

_DRAIN_POLL = 0.02  # how often a leaving node is asked whether its tasks are done
_STOP_LINGER_MS = 1000  # a leaving node's socket closes at once; its STOP still has this long to go out


class Membership:
    """Connects the first nodes; adds, replaces, drains and removes nodes afterwards."""

    def __init__(
        self,
        ledger: TaskLedger,
        links: Links,
        loop: SocketLoop,
        wheels: WheelSupply | None,
        identities: Sequence[NodeIdentity] | None = None,
        files: FileSync | None = None,
    ) -> None:
        self._ledger = ledger
        self._files = files  # the project's files, shipped after the handshake, before any task
        self._links = links
        self._loop = loop
        self._wheels = wheels  # what a node that asks gets in the handshake (skyward.wheels)
        # who must answer at each first endpoint (the handshake refuses any other agent); None: unchecked
        self._identities = list(identities) if identities is not None else None

    def connect(self, endpoints: Sequence[str], timeout: float) -> list[NodeInfo]:
        """Wait until every agent answers HELLO, connect to every worker, start the I/O
        thread. Returns the agents' INFO in node order."""

        def describe(silent: list[int]) -> str:
            names = ", ".join(f"node {i} ({endpoints[i]})" for i in silent)
            return (
                f"{names} did not answer within {timeout:g} s of starting; "
                "raise the provider's bootstrap timeout or check the node's bootstrap log"
            )

        shared = handshake.shared_endpoint(endpoints)
        if shared is not None:
            raise NodeIdentityError(shared)
        keys = [self._links.node_key(i) for i in range(len(endpoints))]
        sockets = [self._links.socket(zmq.DEALER, e, k) for e, k in zip(endpoints, keys, strict=True)]
        try:
            raw = handshake.hello(sockets, describe, timeout, wheels=self._wheels, expected=self._identities)
            infos = [node_info(r, f"node {i} ({endpoints[i]})") for i, r in enumerate(raw)]
            if self._files is not None:
                self._files(sockets, infos, list(range(len(sockets))))
        except BaseException:
            for sock in sockets:
                sock.close(linger=0)
            raise
        for index, (endpoint, sock, info) in enumerate(zip(endpoints, sockets, infos, strict=True)):
            self._install(NodeLink(index, endpoint, sock, info, keys[index]))
        self._loop.start()
        return infos

    def add_node(
        self,
        index: int,
        endpoint: str,
        timeout: float,
        cluster: list[bytes] | None = None,
        identity: NodeIdentity | None = None,
    ) -> NodeInfo:
        """A new node joins the pool as node ``index`` while work runs: the handshake, then
        the I/O thread connects to its workers and queued work starts going there.
        ``cluster`` (a CLUSTER message), when given, is sent to it once it is in."""
        if index < 0:
            raise ConfigurationError(f"add_node: index must be 0 or more, got {index}")
        if index in self._links.nodes:
            raise ConfigurationError(
                f"add_node: node {index} is already in the pool; replace_node swaps it, remove_node takes it out"
            )
        return self._join(index, endpoint, timeout, cluster, identity, replacing=False)

    def replace_node(
        self, index: int, endpoint: str, cluster: list[bytes], timeout: float, identity: NodeIdentity | None = None
    ) -> NodeInfo:
        """Swap node ``index`` for a new agent at ``endpoint`` (the provider launched a
        replacement): the same handshake as ``connect``, with node ``index``'s current key
        and, when given, the replacement's ``identity``; then the I/O thread takes it.
        What the old node still held or was meant to run alone fails."""
        return self._join(index, endpoint, timeout, cluster, identity, replacing=True)

    def _join(
        self,
        index: int,
        endpoint: str,
        timeout: float,
        cluster: list[bytes] | None,
        identity: NodeIdentity | None,
        replacing: bool,
    ) -> NodeInfo:
        self._ledger.check_open()
        if not self._loop.running:
            raise ProvisioningError(f"node {index} cannot join a client that is not connected yet (connect first)")
        what = "the replacement of node" if replacing else "the new node"
        others = [n.endpoint for i, n in sorted(self._links.nodes.items()) if i != index]
        shared = handshake.shared_endpoint([*others, endpoint])
        if shared is not None:
            raise NodeIdentityError(f"{what} {index}: {shared}")
        key = self._links.node_key(index)
        sock = self._links.socket(zmq.DEALER, endpoint, key)

        def describe(_silent: list[int]) -> str:
            return f"{what} {index} ({endpoint}) did not answer within {timeout:g} s"

        try:
            expected = [identity] if identity is not None else None
            (raw,) = handshake.hello([sock], describe, timeout, wheels=self._wheels, expected=expected)
            info = node_info(raw, f"{what} {index} ({endpoint})")
            if self._files is not None:
                self._files([sock], [info], [index])
        except BaseException:
            sock.close(linger=0)
            raise
        done = threading.Event()
        clash: list[str] = []

        def install() -> None:
            old = self._links.nodes.get(index)
            if old is not None and not replacing:
                clash.append(f"node {index} joined the pool meanwhile")
                sock.close(linger=0)
            else:
                if old is not None:
                    self._close_node(old)
                self._install(NodeLink(index, endpoint, sock, info, key))
                if cluster is not None:
                    sock.send_multipart(cluster)
            done.set()

        self._loop.call_soon(install)
        if not done.wait(timeout):
            raise ProvisioningError(f"could not install {what} {index}: the client's I/O thread did not take it")
        if clash:
            raise ConfigurationError(f"add_node: {clash[0]}")
        return info

    def drain_node(self, index: int) -> None:
        """The node will go away (a spot interruption notice, or it is leaving the pool):
        give it no new work and re-run its running and queued tasks on the other nodes.
        The first result of a task wins; a late one from the drained node is dropped.
        Tasks meant for that node alone (``@`` broadcasts) stay: they may still finish."""

        def drain() -> None:
            node = self._links.nodes.get(index)
            if node is None:
                return
            node.draining = True
            with self._ledger.lock:
                self._ledger.dispatcher.drain(index)

        self._loop.call_soon(drain)

    def remove_node(self, index: int, timeout: float) -> None:
        """Node ``index`` leaves the pool while work runs: drain it, wait up to ``timeout``
        seconds for what it is running to finish, then forget it (STOP to its agent, its
        sockets closed). What it still held then, or was meant to run alone, fails with
        ``NodeLostError``; queued work goes on on the other nodes."""
        if index not in self._links.nodes:
            raise ConfigurationError(
                f"remove_node: node {index} is not in the pool (nodes: {sorted(self._links.nodes)})"
            )
        if timeout < 0:
            raise ConfigurationError(f"remove_node: timeout must be 0 or more seconds, got {timeout!r}")
        self.drain_node(index)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._loop.running:
            with self._ledger.lock:
                if self._ledger.dispatcher.node_load(index) == 0:
                    break
            time.sleep(_DRAIN_POLL)
        done = threading.Event()

        def forget() -> None:
            node = self._links.nodes.pop(index, None)
            if node is not None:
                why = f"node {index} left the pool before this task ended"
                stopping = not node.lost and not node.said_bye
                node.lost = True
                for worker in node.workers:
                    worker.last_death = why
                    worker.generation += 1  # a direct caller waiting on it gives up
                if stopping:
                    node.socket.send(wire.STOP)  # its agent stops its workers and says goodbye
                self._close_node(node, linger_ms=_STOP_LINGER_MS if stopping else 0)

                def removed(dispatcher: Dispatcher) -> list[tuple[int, BaseException]]:
                    return [(f.task_id, NodeLostError(f.reason)) for f in dispatcher.remove_node(index)]

                self._ledger.fail_where(removed)
            done.set()

        self._loop.call_soon(forget)
        if self._loop.running and not done.wait(max(timeout, 5.0)):
            raise ProvisioningError(f"could not remove node {index}: the client's I/O thread did not take it")

    # -- the I/O thread (or before it starts) -------------------------------------------

    def _install(self, node: NodeLink) -> None:
        """Register an agent that answered the handshake, and connect to its workers."""
        self._links.nodes[node.index] = node
        self._loop.watch(node.socket, node)
        data_bound = node.info.get("data_endpoints") or []
        for position, bound in enumerate(node.info["endpoints"]):
            data = self._links.worker_data_at(node, data_bound[position] if position < len(data_bound) else None)
            worker = WorkerLink((node.index, position), self._links.worker_at(node, bound), data)
            node.workers.append(worker)
            self._loop.open_worker(worker)
        why = f"node {node.index} was replaced before this task, meant for it, ended"

        def declared(dispatcher: Dispatcher) -> list[tuple[int, BaseException]]:
            return [(t, NodeLostError(why)) for t in dispatcher.set_node(node.index, len(node.workers))]

        self._ledger.fail_where(declared)

    def _close_node(self, node: NodeLink, linger_ms: int = 0) -> None:
        for worker in node.workers:
            self._loop.close_worker(worker)
        self._loop.unwatch(node.socket)
        node.socket.close(linger=linger_ms)
