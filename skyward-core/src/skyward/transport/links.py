"""The client's table of nodes and workers, and the one place its sockets are made.

Each node the client talks to is a ``NodeLink`` (the agent's socket, what the agent said
in its handshake, when it was last heard from) holding a ``WorkerLink`` per worker (the
I/O thread's socket to it, the functions it already caches, a generation that a death
bumps). Nodes are kept by index in a dict, not a list: a pool whose nodes join and leave
while work runs has gaps in its indices, and node order is index order.

Every socket the client opens comes from ``Links.socket``: the same options, and CURVE
on every tcp connection (a plain tcp connection is refused outright).
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict, cast

import zmq

from skyward.errors import ProvisioningError
from skyward.transport import security, wire
from skyward.transport.bulk import BulkFrames
from skyward.transport.chunked import SealedPath
from skyward.transport.dispatcher import WorkerKey
from skyward.transport.handshake import worker_endpoint
from skyward.transport.security import PoolKeys
from skyward.transport.shm import SharedMemory

if TYPE_CHECKING:
    from skyward.transport.data_channel import DataChannel

__all__ = ["Links", "NodeInfo", "NodeLink", "PortMap", "WorkerLink", "node_info"]

PortMap = Callable[[int, int], str]
"""(node, container port) -> where this client reaches that port of the node."""


class NodeInfo(TypedDict, total=False):
    """What an agent says about itself in its handshake (INFO)."""

    node: int
    workers: int
    endpoints: list[str]  # each worker's bound endpoint, in worker order
    data_endpoints: list[str | None]  # each worker's bound data port (tcp), in worker order
    agent_endpoint: str  # the agent's own bound endpoint
    python: str
    cloudpickle: str
    skyward: str
    pid: int
    hostname: str
    executable: str
    bootstrap_steps: list[str]


def node_info(raw: Mapping[str, object], where: str) -> NodeInfo:
    """An agent's INFO, checked for what the client relies on (its workers' endpoints):
    a malformed answer fails the handshake saying so, not later with a KeyError."""
    endpoints = raw.get("endpoints")
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise ProvisioningError(f"the agent of {where} answered the handshake without a list of worker endpoints")
    agent = raw.get("agent_endpoint")
    if agent is not None and not isinstance(agent, str):
        raise ProvisioningError(f"the agent of {where} answered the handshake with a malformed agent_endpoint")
    return cast(NodeInfo, dict(raw))


class WorkerLink:
    """The I/O thread's socket to one worker and what it knows of it (the dispatcher
    holds its work)."""

    __slots__ = ("data_endpoint", "endpoint", "functions", "generation", "key", "last_death", "restart_asked", "socket")

    def __init__(self, key: WorkerKey, endpoint: str, data_endpoint: str | None = None) -> None:
        self.key = key
        self.endpoint = endpoint
        self.data_endpoint = data_endpoint  # its data port as this client reaches it (tcp only)
        self.socket: zmq.Socket[bytes] | None = None
        self.functions: dict[bytes, None] = {}  # insertion ordered: oldest first
        self.generation = 0  # bumped when the worker dies: direct callers notice
        self.last_death = ""
        self.restart_asked = -1  # the generation whose restart this client asked for (SocketLoop.unreadable)


class NodeLink:
    """One node's agent: its socket, its handshake, its workers and its liveness."""

    def __init__(
        self, index: int, endpoint: str, socket: zmq.Socket[bytes], info: NodeInfo, server_public: bytes | None = None
    ) -> None:
        self.index = index
        self.endpoint = endpoint
        self.socket = socket
        self.info = info
        self.server_public = server_public  # this node's CURVE key: its agent's and its workers'
        self.workers: list[WorkerLink] = []
        self.last_heard = time.monotonic()
        self.lost = False
        self.said_bye = False
        self.draining = False


class Links:
    """The nodes this client talks to, by index, and the factory of its sockets."""

    def __init__(
        self,
        keys: PoolKeys | None,
        port_map: PortMap | None = None,
        shm: SharedMemory | None = None,
        bulk: BulkFrames | None = None,
    ) -> None:
        # shm: a Local pool's shared memory for large buffers (skyward.transport.shm), both ways
        # bulk: how large buffers to a worker over tcp (CURVE) are cut (skyward.transport.bulk)
        # port_map(node, container_port): where the client reaches that port of a node
        # whose host maps container ports to other ports (the PortMapping ability of
        # container clouds: VastAI hands out random host ports, so the workers' ports
        # keep no fixed offset from the agent's); None: worker_endpoint's rule
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._keys = keys
        self._port_map = port_map
        self.nodes: dict[int, NodeLink] = {}
        self.shm = shm
        self._bulk = bulk if bulk is not None else BulkFrames()
        # made with the first worker that has a data port (tcp): a Local ipc pool never pays for
        # its thread or for importing cryptography (25 ms)
        self.data: DataChannel | None = None
        self._announced: weakref.WeakKeyDictionary[zmq.Socket[bytes], bytes] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def connect_data(self, worker: WorkerLink) -> None:
        """Open the data connection to ``worker``'s data port, when it has one."""
        if worker.data_endpoint is None:
            return
        with self._lock:
            if self.data is None:
                from skyward.transport.data_channel import DataChannel  # noqa: PLC0415 (see __init__)

                self.data = DataChannel(self.context)
        self.data.connect(worker.data_endpoint)

    def disconnect_data(self, worker: WorkerLink) -> None:
        if self.data is not None and worker.data_endpoint is not None:
            self.data.disconnect(worker.data_endpoint)

    def sealed_path(self, worker: WorkerLink, sock: zmq.Socket[bytes]) -> SealedPath | None:
        """How large buffers sent on ``sock`` (a CURVE socket to ``worker``) travel: sealed
        on the worker's data connection once it works, which ``sock`` then announces to
        the worker (SEALED_ROUTE, once per socket and route: the worker sends its results
        to this socket's messages that way too); None: chunked over CURVE."""
        if self.data is None or worker.data_endpoint is None:
            return None
        route = self.data.ready(worker.data_endpoint)
        if route is None:
            return None
        with self._lock:
            announce = self._announced.get(sock) != route
            if announce:
                self._announced[sock] = route
        if announce:
            sock.send_multipart([wire.SEALED_ROUTE, route])
        return SealedPath(self.data, worker.data_endpoint.encode())

    def data_channel(self) -> DataChannel | None:
        """The data channel, once made (what ``chunked.Reassembly`` asks, as sealed parts come)."""
        return self.data

    def close_data(self) -> None:
        if self.data is not None:
            self.data.close()

    def bulk(self, endpoint: str) -> BulkFrames | None:
        """How large buffers sent on a connection to ``endpoint`` are cut: into chunk
        frames over tcp, whose CURVE encryption then overlaps at both ends; None over ipc
        (no encryption: one zero-copy frame is best there)."""
        return self._bulk if endpoint.startswith("tcp://") else None

    def node_key(self, index: int) -> bytes | None:
        """Node ``index``'s current CURVE server key (a replacement has a new one:
        ``PoolKeys.renew``); None without keys (ipc on this machine)."""
        return self._keys.node(index).public if self._keys is not None else None

    def socket(self, kind: int, endpoint: str, server_public: bytes | None) -> zmq.Socket[bytes]:
        """A connected socket with no high-water marks and no linger; CURVE over tcp, with
        the key of the node it reaches (``server_public``): a connection meant for one
        node cannot complete against another node's agent."""
        sock = self.context.socket(kind)
        for option, value in ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
            sock.setsockopt(option, value)
        if endpoint.startswith("tcp://"):
            if self._keys is None or server_public is None:
                sock.close(linger=0)
                raise ProvisioningError(f"refusing an unencrypted tcp connection to {endpoint}")
            security.configure_client(sock, server_public, self._keys.client)
        sock.connect(endpoint)
        return sock

    def worker_data_at(self, node: NodeLink, bound: str | None) -> str | None:
        """Where to reach a worker's data port (``bound``; None without one, or where the
        node's port mapping has none for it: its large buffers then stay on CURVE)."""
        if bound is None:
            return None
        try:
            return self.worker_at(node, bound)
        except ProvisioningError as error:
            print(f"skyward: {error}: large buffers to node {node.index} go chunked over CURVE", file=sys.stderr)
            return None

    def worker_at(self, node: NodeLink, bound: str) -> str:
        """Where to reach a worker of ``node`` that bound ``bound`` (through the port map
        when there is one)."""
        if self._port_map is not None and bound.startswith("tcp://"):
            return self._port_map(node.index, int(bound.rsplit(":", 1)[1]))
        return worker_endpoint(node.endpoint, bound, node.info.get("agent_endpoint"))

    def ordered(self) -> list[NodeLink]:
        """Every node, in index order (a snapshot: nodes may join or leave meanwhile; the
        copy is one step under the GIL, so the I/O thread changing the table cannot break it)."""
        nodes = self.nodes.copy()
        return [nodes[i] for i in sorted(nodes)]

    def worker(self, key: WorkerKey) -> WorkerLink:
        return self.nodes[key[0]].workers[key[1]]

    def find_worker(self, key: WorkerKey) -> WorkerLink | None:
        """The worker, or None when its node left (or was replaced by one with fewer)."""
        node = self.nodes.get(key[0])
        if node is None or key[1] >= len(node.workers):
            return None
        return node.workers[key[1]]
