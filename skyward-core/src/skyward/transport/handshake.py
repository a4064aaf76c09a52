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

Each INFO says which agent answered (its node index, pool id and instance id); the client
refuses one that is not the node it expects (``NodeIdentityError``), and refuses two nodes
given one endpoint before connecting. Over tcp the per-node CURVE keys (``security``) make
that identity cryptographic: a connection meant for node 1 cannot even complete against
node 0's agent. Such a node never answers; when the timeout passes, the error says how
often its address refused the node's key, which is the mark of another agent (or a proxy
with nothing behind it yet) listening there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from skyward.errors import (
    BootstrapTimeoutError,
    KeyRefusedError,
    NodeIdentityError,
    ProvisioningError,
    WheelRefusedError,
)
from skyward.transport import wire
from skyward.wheels import loader, stage

HELLO_INTERVAL = 1.0
WHEEL_RESEND_INTERVAL = 10.0
"""A node still asking for wheels this long after they were sent gets them again (the
first copy was lost with a dropped connection); sooner, its NEED answers the HELLOs that
crossed the wheels on the wire and are ignored."""

WheelSupply = Callable[[Sequence[str]], list[bytes]]
"""The bytes of each wheel (or bootstrap script) named by its sha256, in order."""

FileSync = Callable[[Sequence[zmq.Socket[bytes]], Sequence[Mapping[str, Any]], Sequence[int]], None]
"""Ships the project's files (``Image(includes=...)``, ``skyward.files.sender``) to nodes
that answered the handshake: (their agents' sockets, their INFO, their indices); returns
once each has built its working directory, raises ``ProvisioningError`` otherwise."""


_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
LIKELY_CAUSE = (
    "Two agents likely share one address and port (or one ipc path): a provider that runs several nodes on one "
    "host must give each node its own address or port (the bind it passes to the user-data factory; a node also "
    "listens on the ports right after its agent's: one per worker, then one data port per worker)"
)


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """Which agent must answer at a node's endpoint: the pool id, node index and instance
    id that the pool put into that node's user-data (``instance_id`` "" accepts any)."""

    pool_id: str
    node: int
    instance_id: str = ""

    def describe(self) -> str:
        instance = f", instance {self.instance_id}" if self.instance_id else ""
        return f"node {self.node} of pool {self.pool_id}{instance}"


def identity_mismatch(expected: NodeIdentity, info: Mapping[str, Any], endpoint: str) -> str | None:
    """Why the agent whose INFO is ``info`` is not the node ``expected`` (pure), or None."""
    node = info.get("node")
    answered = NodeIdentity(
        str(info.get("pool_id", "?")), node if isinstance(node, int) else -1, str(info.get("instance_id", ""))
    )
    if (answered.pool_id, answered.node) == (expected.pool_id, expected.node) and (
        not expected.instance_id or answered.instance_id == expected.instance_id
    ):
        return None
    where = f"pid {info.get('pid', '?')} on host {info.get('hostname', '?')}"
    return (
        f"node {expected.node}'s endpoint {endpoint} was answered by the agent of {answered.describe()} ({where}), "
        f"not by the agent of {expected.describe()}: refused. {LIKELY_CAUSE}"
    )


def shared_endpoint(endpoints: Sequence[str]) -> str | None:
    """Why these node endpoints cannot all be right (pure): two nodes with one endpoint
    would reach one agent, which can be only one of them. None when all differ."""
    first: dict[str, int] = {}
    for index, endpoint in enumerate(endpoints):
        if endpoint in first:
            return (
                f"nodes {first[endpoint]} and {index} were both given the endpoint {endpoint}: one agent listens "
                f"there, and it can be only one of them. {LIKELY_CAUSE}"
            )
        first[endpoint] = index
    return None


def refusal_note(refusals: Sequence[int]) -> str:
    """What silent nodes' silence means when their addresses refused their keys (pure):
    ``refusals`` holds, for each silent node, the failed CURVE handshakes at its address."""
    refused = [count for count in refusals if count > 0]
    if not refused:
        return ""
    where = "its address" if len(refusals) == 1 else f"the address of {len(refused)} of them"
    return (
        f". Something at {where} refused the node's CURVE key ({sum(refused)} handshakes): another agent listens "
        f"there (another node's, or another pool's), or a proxy or tunnel with no agent behind it yet. If it is "
        f"another agent: {LIKELY_CAUSE}"
    )


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
    expected: Sequence[NodeIdentity] | None = None,
) -> list[dict[str, Any]]:
    """Each agent's INFO, in the order of ``sockets``. Raises ``ProvisioningError`` with
    ``describe(silent indices)`` when some agent did not answer within ``timeout``, and
    ``NodeIdentityError`` when an agent is not the one ``expected`` names for its socket."""
    if expected is not None and len(expected) != len(sockets):
        raise ValueError(f"hello: {len(expected)} expected identities for {len(sockets)} sockets")
    monitors = [sock.get_monitor_socket(_HANDSHAKE_FAILED) for sock in sockets]
    try:
        return _hello(sockets, monitors, describe, timeout, clock, wheels, expected)
    finally:
        for sock, monitor in zip(sockets, monitors, strict=True):
            sock.disable_monitor()
            monitor.close(linger=0)


def _hello(
    sockets: Sequence[zmq.Socket[bytes]],
    monitors: Sequence[zmq.Socket[bytes]],
    describe: Callable[[list[int]], str],
    timeout: float,
    clock: Callable[[], float],
    wheels: WheelSupply | None,
    expected: Sequence[NodeIdentity] | None,
) -> list[dict[str, Any]]:
    infos: list[dict[str, Any] | None] = [None] * len(sockets)
    sent: dict[tuple[int, bytes], float] = {}  # (node index, what it asked) -> when it was sent
    last: dict[int, str] = {}  # node index -> what it was sent last, in words
    refusals = [0] * len(sockets)  # failed handshakes at each node's address
    poller = zmq.Poller()
    for sock in (*sockets, *monitors):
        poller.register(sock, zmq.POLLIN)
    deadline = clock() + timeout
    last_hello = -HELLO_INTERVAL
    while any(info is None for info in infos):
        now = clock()
        if now > deadline:
            silent = [i for i, info in enumerate(infos) if info is None]
            refused = [refusals[i] for i in silent]
            error = KeyRefusedError if any(refused) else BootstrapTimeoutError
            raise error(describe(silent) + refusal_note(refused))
        if now - last_hello >= HELLO_INTERVAL:
            last_hello = now
            for sock, info in zip(sockets, infos, strict=True):
                if info is None:
                    try:
                        sock.send(wire.HELLO, zmq.NOBLOCK)
                    except zmq.Again:
                        # no connection to queue it on: the node refused this client's key
                        # (an auth failure is final, zmq does not reconnect); the deadline says so
                        pass
        for ready, _ in poller.poll(50):
            if ready in monitors:
                refusals[monitors.index(ready)] += _handshake_failures(ready)
                continue
            index = next(i for i, s in enumerate(sockets) if s is ready)
            while True:
                try:
                    frames = ready.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if frames[0] == wire.INFO and infos[index] is None:
                    info = wire.decode_json(frames[1])
                    if expected is not None:
                        endpoint = ready.getsockopt_string(zmq.LAST_ENDPOINT)
                        problem = identity_mismatch(expected[index], info, endpoint)
                        if problem is not None:
                            raise NodeIdentityError(problem)
                    infos[index] = info
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


def _handshake_failures(monitor: zmq.Socket[bytes]) -> int:
    """How many failed-handshake events wait on ``monitor`` (read them all)."""
    count = 0
    while monitor.poll(0):
        event = recv_monitor_message(monitor)
        count += bool(event["event"] & _HANDSHAKE_FAILED)
    return count


def _wheels_for(wheels: WheelSupply | None, index: int, need: bytes) -> list[bytes]:
    if wheels is None:
        raise ProvisioningError(f"node {index} asks for wheels or its bootstrap script, and this client offered none")
    digests = wire.decode_json(need)
    return wheels([str(d) for d in digests])
