"""The one handshake with node agents, for the first nodes and for a replacement alike.

The client sends HELLO until each agent answers INFO (its versions, its workers' bound
endpoints, its own bound endpoint). Where to reach each worker is computed here, from
the endpoint the client uses for the agent and the agent's own bound endpoint: when the
client reaches the agent through a port mapping (an SSM tunnel, NAT), the workers keep
their offset from the agent's port. A replacement used to skip that offset and
connected to the wrong worker ports (issue 15).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from skyward.errors import ProvisioningError
from skyward.transport import wire

HELLO_INTERVAL = 1.0


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
) -> list[dict[str, Any]]:
    """Each agent's INFO, in the order of ``sockets``. Raises ``ProvisioningError`` with
    ``describe(silent indices)`` when some agent did not answer within ``timeout``."""
    infos: list[dict[str, Any] | None] = [None] * len(sockets)
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
    return [info for info in infos if info is not None]
