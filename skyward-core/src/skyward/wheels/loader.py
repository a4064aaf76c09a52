"""The node side of a container's start command: fetch the bootstrap script from the client.

A container marketplace starts a node with one command it stores with the rental
(VastAI's ``args``, RunPod's ``dockerArgs``), and VastAI refuses one whose ``args``,
``args_str`` and ``onstart`` together pass 4,096 characters. A node's bootstrap script
is 5 KB for a bare ``Image()`` and grows with each package, apt name, env value and
plugin step (15.5 KB for a pool with a few pip packages from a checkout), so the
command carries a loader instead (``skyward.providers.cloud.marketplace_start.start_command``)
and the script travels the way a checkout's wheels already do
(``skyward.wheels.stage``): this program binds the agent's endpoint with the pool's
CURVE keys, admits only the pool's client, answers whatever the client sends with
``NEED_SCRIPT`` and the script's sha256 until the client answers ``SCRIPT`` with its
bytes, checks them against that sha256, writes them to PATH (mode 0700) and exits 0;
the start command then ``exec``s PATH.

Trust boundary:

* In the start command (stored by the marketplace, readable by whoever reads the
  rental through its API, and by the host that runs the container): the agent's bind
  address, the pool's CURVE keys for this endpoint (the node's server secret and the
  client's public key), the pool id, the node index, the script's sha256, and this
  program. The same keys were in the start command before, with the whole script; no
  cloud credential is in either.
* Over CURVE (encrypted, and only the pool's client key is admitted): the script.
* On the node, before anything of it runs: its sha256 equals the one the start command
  names. Other bytes are refused (``REFUSED``, the client told why), nothing is
  written, and the program exits 3 (the container ends).

No script arrives within WAIT seconds (the client is gone): exit 3, so a container
whose pool died never waits, and bills, past its pool's expiry. A container started again
(the host restarted it) whose PATH already holds the script, by the same sha256, runs it
without asking: the client is past its handshake by then, and the script is idempotent.

It may import only the standard library and pyzmq: it runs before skyward is installed,
exec'd from its compressed source (the start command embeds it). Usage:
``python loader.py PATH SHA256 WAIT < essentials`` where ``essentials`` is one line of
base64 JSON: ``bind``, ``server_secret``, ``client_public``, ``pool_id``, ``node``
(``$SKYWARD_BIND_HOST`` replaces the host of a tcp bind, as for the agent).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time

import zmq
from zmq.auth.thread import ThreadAuthenticator

NEED_SCRIPT = b"Y"  # node -> client [NEED_SCRIPT, JSON list holding the script's sha256]
SCRIPT = b"J"  # client -> node [SCRIPT, the script's bytes]
REFUSED = b"Z"  # node -> client [REFUSED, utf-8 reason]: the one skyward.wheels.stage sends
BIND_HOST_ENV = "SKYWARD_BIND_HOST"
_ZAP_DOMAIN = "skyward-loader"


class _OnlyTheClient:
    """ZAP credentials callback: the pool's client key, nothing else."""

    def __init__(self, client_public: bytes) -> None:
        self.key = client_public

    def callback(self, domain: str, key: bytes) -> bool:
        return key == self.key


def refusal(digest: str, data: bytes) -> str:
    """Why ``data`` is not the script the start command names ("" when it is)."""
    got = hashlib.sha256(data).hexdigest()
    if got == digest:
        return ""
    return (
        f"the bootstrap script that arrived (sha256 {got[:16]}...) is not the one this node's start command "
        f"names (sha256 {digest[:16]}...); refused, nothing run"
    )


def serve(socket: zmq.Socket[bytes], digest: str, wait: float) -> tuple[bytes, str]:
    """Answer the client until the script arrives: (its bytes, "") or (b"", why not)."""
    need = json.dumps([digest]).encode()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if not socket.poll(1000):
            continue
        frames = socket.recv_multipart()
        peer, kind = frames[0], frames[1:2]
        if kind != [SCRIPT]:
            socket.send_multipart([peer, NEED_SCRIPT, need])
            continue
        data = b"".join(frames[2:])
        reason = refusal(digest, data)
        if reason:
            socket.send_multipart([peer, REFUSED, reason.encode()])
        return (b"", reason) if reason else (data, "")
    return b"", f"no bootstrap script arrived from the pool's client within {wait:.0f} s"


def endpoint(essentials: dict[str, object]) -> str:
    """Where to listen: the agent's bind, its host replaced by ``$SKYWARD_BIND_HOST``."""
    bind = str(essentials["bind"])
    host = os.environ.get(BIND_HOST_ENV)
    if host and bind.startswith("tcp://"):
        return f"tcp://{host}:{bind.rsplit(':', 1)[1]}"
    return bind


def main(argv: list[str]) -> int:
    path, digest, wait = argv
    essentials = json.loads(base64.b64decode(sys.stdin.readline()))
    where = f"skyward loader (pool {essentials.get('pool_id')}, node {essentials.get('node')})"
    if os.path.isfile(path):
        with open(path, "rb") as f:
            if not refusal(digest, f.read()):
                return 0
    if not (essentials.get("server_secret") and essentials.get("client_public")):
        # as the agent: a network endpoint is never open without the pool's keys
        print(f"{where}: the start command holds no CURVE keys; refusing to listen", file=sys.stderr)
        return 3
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve_callback(
        domain=_ZAP_DOMAIN, credentials_provider=_OnlyTheClient(str(essentials["client_public"]).encode())
    )
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 2000)  # a REFUSED reaches the client before the exit
    socket.curve_server = True
    socket.curve_secretkey = str(essentials["server_secret"]).encode()
    socket.zap_domain = _ZAP_DOMAIN.encode()
    try:
        socket.bind(endpoint(essentials))
    except zmq.ZMQError as error:
        data, reason = b"", f"cannot listen on {endpoint(essentials)}: {error}"
    else:
        data, reason = serve(socket, digest, float(wait))
    finally:
        socket.close()
        auth.stop()
        context.term()
    if reason:
        print(f"{where}: {reason}", file=sys.stderr)
        return 3
    with open(f"{path}.part", "wb") as f:
        f.write(data)
    os.chmod(f"{path}.part", 0o700)
    os.replace(f"{path}.part", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
