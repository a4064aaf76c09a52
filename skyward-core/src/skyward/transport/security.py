"""Per-pool CURVE keys and the ZAP policy that admits only the pool's own client.

Across machines every connection is CURVE-encrypted and the agent accepts exactly one
client public key: the one made for this pool. On one machine an ipc socket inside a
directory only the user can open keeps other local users out, so CURVE's cost (it caps
bulk throughput) is paid only where it buys something.
"""

from __future__ import annotations

from dataclasses import dataclass

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

ZAP_DOMAIN = "skyward"


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """The keys of one pool. The server secret goes to nodes; the client secret never does."""

    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes

    @staticmethod
    def generate() -> CurveKeys:
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        return CurveKeys(server_public, server_secret, client_public, client_secret)


def configure_client(socket: zmq.Socket[bytes], keys: CurveKeys) -> None:
    socket.curve_serverkey = keys.server_public
    socket.curve_publickey = keys.client_public
    socket.curve_secretkey = keys.client_secret


class _OnlyThisClient:
    """ZAP credentials callback: admit the pool's client key, nothing else."""

    def __init__(self, client_public: bytes) -> None:
        self._allowed = client_public  # z85, as pyzmq hands keys to the callback

    def callback(self, domain: str, key: bytes) -> bool:
        return domain == ZAP_DOMAIN and key == self._allowed


def start_server_auth(context: zmq.Context[zmq.Socket[bytes]], client_public: bytes) -> ThreadAuthenticator:
    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve_callback(domain=ZAP_DOMAIN, credentials_provider=_OnlyThisClient(client_public))
    return auth


def configure_server(socket: zmq.Socket[bytes], server_secret: bytes) -> None:
    socket.curve_server = True
    socket.curve_secretkey = server_secret
    socket.zap_domain = ZAP_DOMAIN.encode()
