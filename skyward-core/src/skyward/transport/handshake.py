"""The one handshake with node agents, for the first nodes and for a replacement alike.

The client sends HELLO until each agent answers INFO (its versions, its workers' bound
endpoints, its own bound endpoint). Where to reach each worker is computed here, from
the endpoint the client uses for the agent and the agent's own bound endpoint: when the
client reaches the agent through a port mapping (an SSM tunnel, NAT), the workers keep
their offset from the agent's port. First nodes and replacements go through this one
computation: a path that skipped the offset would reach the wrong worker ports.

A node whose skyward arrives from this client (a checkout: ``skyward.wheels``) answers
HELLO with ``NEED`` and the sha256 of each wheel until they arrive; ``hello`` sends them
(``wheels``: sha256s -> bytes) and goes on saying HELLO until the agent answers INFO on
the same endpoint. A node that refuses them (``REFUSED``: not the bytes its user-data
names) ends the handshake with ``WheelRefusedError``.

A container node started by a loader (``skyward.wheels.loader``: a marketplace's start
command cannot hold the script) answers HELLO with ``NEED_SCRIPT`` and its bootstrap
script's sha256 until the script arrives: ``hello`` answers it like a wheel request,
from the same supply (the pool offers each node's script by its sha256), and the node
goes on to ask for its wheels, if any, and to start its agent on the same endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from skyward.errors import ProvisioningError, WheelRefusedError
from skyward.transport import wire
from skyward.wheels import loader, stage

HELLO_INTERVAL = 1.0
WHEEL_RESEND_INTERVAL = 10.0
"""A node still asking for wheels this long after they were sent gets them again (the
first copy was lost with a dropped connection); sooner, its NEED answers the HELLOs that
crossed the wheels on the wire and are ignored."""

WheelSupply = Callable[[Sequence[str]], list[bytes]]
"""The bytes of each wheel (or bootstrap script) named by its sha256, in order."""


def wheels_due(last_sent: float | None, now: float) -> bool:
    """Whether a node asking for wheels gets them now (pure)."""
    return last_sent is None or now - last_sent >= WHEEL_RESEND_INTERVAL


def worker_endpoint(agent_endpoint: str, bound: str, agent_bound: str | None = None) -> str:
    """Where to reach a worker: its ipc path, or its tcp port on the agent's host (a worker
    bound to 0.0.0.0 is reached at the address the client already uses for its node).

    ``agent_bound`` is the agent's own bound endpoint (from its INFO): agent 16789 reached
    at local 40000 puts worker 16790 at 40001."""
    if bound.startswith("ipc://"):
        return bound
    host, agent_port = agent_endpoint.rsplit(":", 1)
    port = int(bound.rsplit(":", 1)[1])
    if agent_bound and agent_bound.startswith("tcp://"):
        port = int(agent_port) + port - int(agent_bound.rsplit(":", 1)[1])
    return f"{host}:{port}"


def worker_endpoints(agent_endpoint: str, info: dict[str, Any]) -> list[str]:
    """Every worker's endpoint as this client reaches it, from an agent's INFO."""
    agent_bound = info.get("agent_endpoint")
    return [worker_endpoint(agent_endpoint, bound, agent_bound) for bound in info["endpoints"]]


def hello(
    sockets: Sequence[zmq.Socket[bytes]],
    describe: Callable[[list[int]], str],
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    wheels: WheelSupply | None = None,
) -> list[dict[str, Any]]:
    """Each agent's INFO, in the order of ``sockets``. Raises ``ProvisioningError`` with
    ``describe(silent indices)`` when some agent did not answer within ``timeout``."""
    infos: list[dict[str, Any] | None] = [None] * len(sockets)
    sent: dict[tuple[int, bytes], float] = {}  # (node index, what it asked) -> when it was sent
    last: dict[int, str] = {}  # node index -> what it was sent last, in words
    poller = zmq.Poller()
    for sock in sockets:
        poller.register(sock, zmq.POLLIN)
    deadline = clock() + timeout
    last_hello = -HELLO_INTERVAL
    while any(info is None for info in infos):
        now = clock()
        if now > deadline:
            raise ProvisioningError(describe([i for i, info in enumerate(infos) if info is None]))
        if now - last_hello >= HELLO_INTERVAL:
            last_hello = now
            for sock, info in zip(sockets, infos, strict=True):
                if info is None:
                    sock.send(wire.HELLO)
        for ready, _ in poller.poll(50):
            index = next(i for i, s in enumerate(sockets) if s is ready)
            while True:
                try:
                    frames = ready.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if frames[0] == wire.INFO and infos[index] is None:
                    infos[index] = wire.decode_json(frames[1])
                elif frames[0] in _ANSWERS and infos[index] is None:
                    if wheels_due(sent.get((index, frames[0])), clock()):
                        sent[index, frames[0]] = clock()
                        answer, last[index] = _ANSWERS[frames[0]]
                        ready.send_multipart([answer, *_wheels_for(wheels, index, frames[1])], copy=False)
                elif frames[0] == stage.REFUSED:
                    reason = frames[1].decode(errors="replace")
                    what = last.get(index, "wheels")
                    raise WheelRefusedError(f"node {index} refused the {what} this client sent: {reason}")
    return [info for info in infos if info is not None]


_ANSWERS = {stage.NEED: (stage.WHEELS, "wheels"), loader.NEED_SCRIPT: (loader.SCRIPT, "bootstrap script")}
"""What a node asks for before its agent runs -> how the client answers (wheels, or its
bootstrap script), each by sha256 from the pool's supply."""


def _wheels_for(wheels: WheelSupply | None, index: int, need: bytes) -> list[bytes]:
    if wheels is None:
        raise ProvisioningError(f"node {index} asks for wheels or its bootstrap script, and this client offered none")
    digests = wire.decode_json(need)
    return wheels([str(d) for d in digests])
