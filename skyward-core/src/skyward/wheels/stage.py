"""The node side of the wheel exchange: a listener that runs before skyward is installed.

The bootstrap builds the node's environment with skyward's dependencies (from the index),
then runs this file with that environment's Python: it may import only the standard
library and pyzmq. It binds the agent's endpoint with the pool's CURVE keys (the agent's
config, read from stdin: nothing new reaches the node), admits only the pool's client,
answers whatever the client sends with ``NEED`` and the sha256 of each wheel the user-data
names, and checks each wheel that arrives against those digests: all match, it writes
them to DIR and exits 0 (the bootstrap installs them and starts the agent on the same
endpoint); any other bytes are refused, the client told why (``REFUSED``), nothing
installed, and it exits 3 (the bootstrap fails, the node shuts down).

Usage: ``python stage.py DIR BIND_HOST SHA256=FILENAME ... < agent-config-line``
(``BIND_HOST`` non-empty replaces a wildcard host, 0.0.0.0, as ``SKYWARD_BIND_HOST`` does
for the agent on an emulated machine). Its keys are the node's own (every node has its
own server keypair), so only a client that meant to reach this node completes a handshake.
A bind that fails ends it with status 3 and the address and reason on stderr.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sys

import zmq
from zmq.auth.thread import ThreadAuthenticator

NEED = b"U"  # node -> client [NEED, JSON list of sha256]: send these wheels
WHEELS = b"V"  # client -> node [WHEELS, wheel bytes, ...]
REFUSED = b"Z"  # node -> client [REFUSED, utf-8 reason]: not the wheels the user-data names
_ZAP_DOMAIN = "skyward-wheels"


class _OnlyTheClient:
    """ZAP credentials callback: the pool's client key, nothing else."""

    def __init__(self, client_public: bytes) -> None:
        self.key = client_public

    def callback(self, domain: str, key: bytes) -> bool:
        return key == self.key


def check(expected: dict[str, str], arrived: list[bytes]) -> str:
    """Why the wheels that ``arrived`` are refused ("" when they are exactly ``expected``:
    sha256 -> file name)."""
    got = sorted(hashlib.sha256(data).hexdigest() for data in arrived)
    if got == sorted(expected):
        return ""
    wanted = ", ".join(f"{name} (sha256 {sha[:16]}...)" for sha, name in sorted(expected.items()))
    sent = ", ".join(f"{sha[:16]}..." for sha in got) or "nothing"
    return (
        f"the wheels that arrived (sha256 {sent}) are not the ones this node's user-data names: "
        f"{wanted}; refused, nothing installed"
    )


def serve(socket: zmq.Socket[bytes], expected: dict[str, str], directory: str) -> str:
    """Answer the client until its wheels arrive; write them and return "", or return
    why they were refused."""
    need = json.dumps(sorted(expected)).encode()
    while True:
        frames = socket.recv_multipart()
        peer, kind = frames[0], frames[1:2]
        if kind != [WHEELS]:
            socket.send_multipart([peer, NEED, need])
            continue
        reason = check(expected, frames[2:])
        if reason:
            socket.send_multipart([peer, REFUSED, reason.encode()])
            return reason
        by_sha = {hashlib.sha256(data).hexdigest(): data for data in frames[2:]}
        os.makedirs(directory, mode=0o700, exist_ok=True)
        for sha, name in expected.items():
            path = os.path.join(directory, os.path.basename(name))
            with open(f"{path}.part", "wb") as f:
                f.write(by_sha[sha])
            os.replace(f"{path}.part", path)
        return ""


def main(argv: list[str]) -> int:
    directory, bind_host, *wanted = argv
    expected = dict(item.split("=", 1) for item in wanted)
    config = json.loads(sys.stdin.readline())
    bind = config["bind"]
    if bind.startswith("tcp://") and not (config.get("server_secret") and config.get("client_public")):
        # as the agent: a network endpoint is never open without the pool's keys
        print("skyward bootstrap: the wheel stage's tcp endpoint needs CURVE keys", file=sys.stderr)
        return 3
    if bind_host and bind.startswith("tcp://0.0.0.0:"):
        bind = f"tcp://{bind_host}:{bind.rsplit(':', 1)[1]}"
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    auth: ThreadAuthenticator | None = None
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 2000)  # a REFUSED reaches the client before the exit
    if config.get("server_secret"):
        auth = ThreadAuthenticator(context)
        auth.start()
        auth.configure_curve_callback(
            domain=_ZAP_DOMAIN, credentials_provider=_OnlyTheClient(config["client_public"].encode())
        )
        socket.curve_server = True
        socket.curve_secretkey = config["server_secret"].encode()
        socket.zap_domain = _ZAP_DOMAIN.encode()
    try:
        socket.bind(bind)
    except zmq.ZMQError as error:
        hint = (
            "; another process on this host listens there (another node's agent?): a provider that runs several "
            "nodes on one host gives each node its own address or port"
            if error.errno == errno.EADDRINUSE
            else ""
        )
        print(
            f"skyward bootstrap: the wheel stage of node {config.get('node', '?')} cannot listen on {bind}: "
            f"{os.strerror(error.errno or 0)} ({errno.errorcode.get(error.errno or 0, error.errno)}){hint}",
            file=sys.stderr,
        )
        socket.close(linger=0)
        if auth is not None:
            auth.stop()
        context.term()
        return 3
    try:
        reason = serve(socket, expected, directory)
    finally:
        socket.close()
        if auth is not None:
            auth.stop()
        context.term()
    if reason:
        print(f"skyward bootstrap: {reason}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
