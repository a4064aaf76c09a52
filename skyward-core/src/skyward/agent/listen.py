"""Binding a node's sockets, and saying why when it cannot.

A node that cannot listen where its provider told it to must stop, loudly: the address,
the system's reason, and what to do go to stderr, and the process exits non-zero, so the
bootstrap fails and the pool reports the node (Local: "failed to start" with the log's
tail; a cloud node's console holds the line). Left to a bare traceback, or worse to a
zmq ipc bind (which silently takes an ipc path over from a live listener), a second
agent on one host's port looked like a healthy node while the first answered for both.
"""

from __future__ import annotations

import errno
import os

import zmq


def ipc_in_use(path: str) -> bool:
    """Whether a process accepts connections on the unix socket at ``path``. zmq binds an
    ipc path by unlinking whatever is there, live listener included, so the agent asks
    first: the listener that was there would otherwise vanish for its own clients."""
    if not os.path.exists(path):
        return False
    import socket  # noqa: PLC0415  # a fresh node's path never exists; the import is ~3 ms of its start

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False  # a stale file: nobody listens, binding replaces it
        return True


def why_cannot_listen(who: str, endpoint: str, code: int | None, ports: int = 1) -> str:
    """The message of a node process that cannot bind ``endpoint`` (pure): the address,
    the system's reason (``code``: an errno, None when unknown) and what to do. ``ports``:
    how many consecutive tcp ports the node uses from the agent's (its workers follow)."""
    reason = f"{os.strerror(code)} ({errno.errorcode.get(code, code)})" if code is not None else "no free port"
    head = f"{who}: cannot listen on {endpoint}: {reason}."
    tcp = endpoint.startswith("tcp://")
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":") if tcp else ("", "", "")
    if code == errno.EADDRINUSE:
        span = f"ports {port}-{int(port) + ports - 1}" if tcp and port.isdigit() and ports > 1 else "this address"
        holder = f" (who holds it: ss -ltnp 'sport = :{port}')" if tcp else ""
        return (
            f"{head} Another process on this host already listens there{holder}: another node's agent, or one left "
            f"from an earlier pool. A provider that runs several nodes on one host gives each node its own address "
            f"or port (the bind it passes to the user-data factory); a node uses {span}."
        )
    if code == errno.EADDRNOTAVAIL:
        return (
            f"{head} {host} is not an address of this machine: bind one of its own addresses, or 0.0.0.0 for all "
            "of them (the bind a provider passes to the user-data factory)."
        )
    if code == errno.EACCES:
        advice = "ports below 1024 need root: use a higher agent port" if tcp else "the directory is not writable"
        return f"{head} {advice[0].upper()}{advice[1:]}."
    return f"{head} Check the address the provider passed to the user-data factory."


def listen(sock: zmq.Socket[bytes], endpoint: str, who: str, ports: int = 1) -> str:
    """Bind ``sock`` to ``endpoint`` (a tcp port 0: any free port) and return the endpoint
    as bound; exits the process with :func:`why_cannot_listen`'s message when it cannot."""
    if endpoint.startswith("ipc://") and ipc_in_use(endpoint.removeprefix("ipc://")):
        raise SystemExit(why_cannot_listen(who, endpoint, errno.EADDRINUSE, ports))
    try:
        if endpoint.startswith("tcp://") and endpoint.endswith(":0"):
            sock.bind_to_random_port(endpoint.rsplit(":", 1)[0])
        else:
            sock.bind(endpoint)
    except zmq.ZMQBindError:
        raise SystemExit(why_cannot_listen(who, endpoint, None, ports)) from None
    except zmq.ZMQError as error:
        raise SystemExit(why_cannot_listen(who, endpoint, error.errno, ports)) from None
    return sock.getsockopt_string(zmq.LAST_ENDPOINT)
