"""CURVE keys of a pool, and the ZAP policy that admits only the pool's own client.

Across machines every connection is CURVE-encrypted. A pool has one client keypair, whose
secret never leaves the client, and one server keypair per node (and a fresh one for each
replacement of a node): a node's user-data carries only its own server secret, and the
client connects to node ``i`` (its agent and its workers) with node ``i``'s public key. So
a connection meant for node 1 cannot complete against node 0's agent (two agents on one
port, an address reused), and a marketplace host that runs one node holds the key of that
node only, not one that every node of the pool answers to. Each agent accepts exactly one
client public key: the pool's.

On one machine an ipc socket inside a directory only the user can open keeps other local
users out, so CURVE's cost (it caps bulk throughput) is paid only where it buys something.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zmq

if TYPE_CHECKING:
    from zmq.auth.thread import ThreadAuthenticator

ZAP_DOMAIN = "skyward"


@dataclass(frozen=True, slots=True)
class Keypair:
    """One CURVE keypair, both halves z85-encoded (40 bytes each)."""

    public: bytes
    secret: bytes

    @staticmethod
    def generate() -> Keypair:
        public, secret = zmq.curve_keypair()
        return Keypair(public, secret)


class PoolKeys:
    """The keys of one pool: its client keypair, and a server keypair per node.

    ``node(i)`` is node ``i``'s keypair, made the first time anyone asks (the pool, when it
    renders node ``i``'s user-data) and the same on every later call, so rendering a node's
    user-data twice gives it one key. ``renew(i)`` gives node ``i`` a new keypair, for a
    replacement: from then on ``node(i)`` is the new one, and a connection made with it
    cannot complete against the node it replaces. Thread-safe: drivers may render user-data
    from several threads."""

    def __init__(self, client: Keypair | None = None) -> None:
        self.client = client or Keypair.generate()
        self._nodes: dict[int, Keypair] = {}
        self._lock = threading.Lock()

    @staticmethod
    def known(client: Keypair, node_public: Mapping[int, bytes]) -> PoolKeys:
        """The keys of a pool that already runs, as a client that attaches to it holds
        them: the client keypair and each node's public key (a client never needs a
        node's secret: ``Keypair.secret`` is empty there)."""
        keys = PoolKeys(client)
        keys._nodes.update({index: Keypair(public, b"") for index, public in node_public.items()})
        return keys

    def node(self, index: int) -> Keypair:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"PoolKeys.node({index!r}): a node index is an int >= 0")
        with self._lock:
            keys = self._nodes.get(index)
            if keys is None:
                keys = self._nodes[index] = Keypair.generate()
            return keys

    def renew(self, index: int) -> Keypair:
        self.node(index)  # validates the index
        with self._lock:
            keys = self._nodes[index] = Keypair.generate()
            return keys


def configure_client(socket: zmq.Socket[bytes], server_public: bytes, client: Keypair) -> None:
    """A client socket that completes a handshake only with the holder of ``server_public``'s
    secret (one node's agent or workers)."""
    socket.curve_serverkey = server_public
    socket.curve_publickey = client.public
    socket.curve_secretkey = client.secret


class _OnlyThisClient:
    """ZAP credentials callback: admit the pool's client key, nothing else."""

    def __init__(self, client_public: bytes) -> None:
        self._allowed = client_public  # z85, as pyzmq hands keys to the callback

    def callback(self, domain: str, key: bytes) -> bool:
        return domain == ZAP_DOMAIN and key == self._allowed


def start_server_auth(context: zmq.Context[zmq.Socket[bytes]], client_public: bytes) -> ThreadAuthenticator:
    """The ZAP handler admitting ``client_public`` alone (see ``_OnlyThisClient``)."""
    # zmq.auth.thread imports asyncio: 17 ms of every agent's and worker's start-up
    # (python -X importtime), for a handler only a tcp endpoint (CURVE) needs
    from zmq.auth.thread import ThreadAuthenticator  # noqa: PLC0415  # see above

    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve_callback(domain=ZAP_DOMAIN, credentials_provider=_OnlyThisClient(client_public))
    return auth


def configure_server(socket: zmq.Socket[bytes], server_secret: bytes) -> None:
    socket.curve_server = True
    socket.curve_secretkey = server_secret
    socket.zap_domain = ZAP_DOMAIN.encode()
