"""What a stranger who reaches a node's endpoint gets: the probe behind the conformance
suite's "nothing open to everyone" check, for providers with a firewall and without.

A marketplace (VastAI, RunPod) or a host-process provider has no firewall to inspect, so
"no inbound rule admits 0.0.0.0/0" says nothing there; what does hold everywhere is that
the agent completes no handshake without the pool's CURVE keys (on tcp), or listens on a
socket only its user can open (on ipc). The probe speaks ZMTP without keys and reports
the handshake's outcome from the socket monitor: a refused handshake is an event, so the
answer comes as soon as the agent answers, not after a guessed wait.
"""

from __future__ import annotations

import enum
import os
import stat
import time

import zmq
from zmq.utils.monitor import recv_monitor_message

_FAILED = frozenset(
    {zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_AUTH}
)


class Handshake(enum.Enum):
    """A keyless client's outcome at an endpoint."""

    COMPLETED = "completed"  # the agent talks to anyone who reaches it
    REFUSED = "refused"  # the agent wants the pool's CURVE keys
    NO_ANSWER = "no answer"  # nothing answered within the wait (unreachable)


def keyless_handshake(endpoint: str, wait: float = 30.0) -> Handshake:
    """Connect to the ``tcp://`` ``endpoint`` without CURVE keys and report the ZMTP
    handshake's outcome (``wait``: the most seconds to wait for any)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        sock = context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        monitor = sock.get_monitor_socket()
        sock.connect(endpoint)
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0 and monitor.poll(int(left * 1000)):
            event = recv_monitor_message(monitor)["event"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                return Handshake.COMPLETED
            if event in _FAILED:
                return Handshake.REFUSED
        return Handshake.NO_ANSWER
    finally:
        context.destroy(linger=0)


def open_endpoint_problem(endpoint: str, wait: float = 30.0) -> str | None:
    """Why a stranger could use this agent ``endpoint`` (``None``: it could not): a tcp
    agent must refuse a keyless handshake, an ipc socket must sit in a directory only its
    user can open."""
    if endpoint.startswith("ipc://"):
        directory = os.path.dirname(endpoint.removeprefix("ipc://"))
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        return None if mode & 0o077 == 0 else f"{endpoint}: its directory is mode {mode:o}, open to other users"
    if not endpoint.startswith("tcp://"):
        return f"{endpoint}: neither tcp:// nor ipc://"
    outcome = keyless_handshake(endpoint, wait)
    if outcome is Handshake.REFUSED:
        return None
    if outcome is Handshake.COMPLETED:
        return f"{endpoint}: a client without the pool's CURVE keys completed a handshake"
    return f"{endpoint}: no handshake answer within {wait:g} s (is the endpoint the node's agent?)"
