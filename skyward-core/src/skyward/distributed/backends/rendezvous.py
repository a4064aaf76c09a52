"""A one-shot exchange of small records between every worker of a pool, through the head.

TensorFlow's ``TF_CONFIG`` lists every worker's ``host:port``, but a worker only knows
the head's address (``instance_info().head_addr``), not its peers'. So rank 0 listens on
the head's port, every other rank connects, says who it is and what it offers (the
address it reached the head from, which is its address on the pool's network, and the
port its TensorFlow server will use), and once all ``world_size`` ranks have spoken,
rank 0 sends everyone the full table in rank order and closes the port.

The protocol is one JSON line each way. A record names the job and the world size, so
a stray connection (another pool, an earlier call that timed out) is refused instead of
being counted as a peer.
"""

from __future__ import annotations

import errno
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skyward.errors import SkywardError

_MAX_LINE = 1 << 20
_RETRY_SECONDS = 0.05


class RendezvousError(SkywardError):
    """The workers of a distributed call could not all meet at the head."""


@dataclass(frozen=True, slots=True)
class Peer:
    """What one rank told the others: its address on the pool's network and its record."""

    rank: int
    addr: str
    record: Mapping[str, Any]


def exchange(
    *,
    head_addr: str,
    head_port: int,
    rank: int,
    world_size: int,
    job_id: str,
    record: Mapping[str, Any],
    timeout: float,
) -> list[Peer]:
    """Every rank's :class:`Peer`, in rank order, the same list on every rank.

    ``record`` must be JSON-serialisable. ``timeout`` bounds the whole exchange; a rank
    that does not arrive in time fails everyone with a :class:`RendezvousError` naming
    the missing ranks.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise RendezvousError(f"rank {rank} is not in a world of {world_size}")
    deadline = time.monotonic() + timeout
    if rank == 0:
        return _serve(head_addr, head_port, world_size, job_id, dict(record), deadline)
    return _join(head_addr, head_port, rank, world_size, job_id, dict(record), deadline)


def _hello(rank: int, world_size: int, job_id: str, record: dict[str, Any]) -> bytes:
    message = {"job": job_id, "world": world_size, "rank": rank, "record": record}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out reading from a peer")
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > _MAX_LINE:
            raise ValueError("record too large")
    return bytes(data)


def _parse_table(line: bytes, world_size: int) -> list[Peer]:
    try:
        table = json.loads(line)
        peers = [Peer(int(p["rank"]), str(p["addr"]), dict(p["record"])) for p in table]
    except (ValueError, TypeError, KeyError) as exc:
        raise RendezvousError(f"rank 0 answered with a malformed table: {exc}") from exc
    if [p.rank for p in peers] != list(range(world_size)):
        raise RendezvousError(f"rank 0 answered with ranks {[p.rank for p in peers]}, expected 0..{world_size - 1}")
    return peers


def _listen(head_addr: str, head_port: int) -> socket.socket:
    server = socket.socket(socket.AF_INET6 if ":" in head_addr else socket.AF_INET)
    # the previous call's socket on this port may linger in TIME_WAIT
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((head_addr, head_port))
    except OSError as exc:
        if exc.errno != errno.EADDRNOTAVAIL:
            server.close()
            raise RendezvousError(
                f"rank 0 cannot listen on {head_addr}:{head_port}: {exc} (is another "
                "distributed call of this pool still running?)"
            ) from exc
        # head_addr is not an address of this machine (a NATed public address): peers
        # reach it through the NAT, so listen on every interface instead
        server.close()
        server = socket.socket(socket.AF_INET6 if ":" in head_addr else socket.AF_INET)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", head_port))
    server.listen(1024)
    return server


def _serve(
    head_addr: str, head_port: int, world_size: int, job_id: str, record: dict[str, Any], deadline: float
) -> list[Peer]:
    peers: dict[int, Peer] = {0: Peer(0, head_addr, record)}
    connections: dict[int, socket.socket] = {}
    server = _listen(head_addr, head_port)
    try:
        while len(peers) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(set(range(world_size)) - set(peers))
                raise RendezvousError(
                    f"ranks {missing} of {world_size} did not reach the head at {head_addr}:{head_port} in time"
                )
            server.settimeout(remaining)
            try:
                conn, (addr, *_rest) = server.accept()
            except TimeoutError:
                continue
            try:
                message = json.loads(_read_line(conn, deadline))
                peer_rank = int(message["rank"])
                valid = (
                    message.get("job") == job_id
                    and message.get("world") == world_size
                    and 0 < peer_rank < world_size
                    and peer_rank not in peers
                    and isinstance(message.get("record"), dict)
                )
            except (OSError, ValueError, KeyError, TypeError):
                valid = False
            if not valid:
                conn.close()  # not one of ours: keep waiting for the real peers
                continue
            peers[peer_rank] = Peer(peer_rank, addr, message["record"])
            connections[peer_rank] = conn
        ordered = [peers[r] for r in range(world_size)]
        table = json.dumps(
            [{"rank": p.rank, "addr": p.addr, "record": dict(p.record)} for p in ordered],
            separators=(",", ":"),
        ).encode()
        for conn in connections.values():
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            conn.sendall(table + b"\n")
        return ordered
    finally:
        for conn in connections.values():
            conn.close()
        server.close()


def _join(
    head_addr: str,
    head_port: int,
    rank: int,
    world_size: int,
    job_id: str,
    record: dict[str, Any],
    deadline: float,
) -> list[Peer]:
    last_error: OSError | None = None
    while time.monotonic() < deadline:
        try:
            # rank 0 may not be listening yet: retry until the deadline
            sock = socket.create_connection((head_addr, head_port), timeout=max(0.1, deadline - time.monotonic()))
        except OSError as exc:
            last_error = exc
            time.sleep(_RETRY_SECONDS)
            continue
        with sock:
            if sock.getsockname() == sock.getpeername():
                # TCP self-connect: with nobody listening on a port of the ephemeral
                # range, a retried connect can pick that port as its own source and
                # connect to itself; it would then read back its own hello
                last_error = ConnectionRefusedError(f"nobody listens on {head_addr}:{head_port} yet")
                time.sleep(_RETRY_SECONDS)
                continue
            try:
                sock.sendall(_hello(rank, world_size, job_id, record))
                line = _read_line(sock, deadline)
            except (OSError, ValueError) as exc:
                last_error = exc if isinstance(exc, OSError) else OSError(str(exc))
                time.sleep(_RETRY_SECONDS)
                continue
        if not line:
            # closed without a table: refused (e.g. an earlier call's server); retry
            time.sleep(_RETRY_SECONDS)
            continue
        return _parse_table(line, world_size)
    raise RendezvousError(
        f"rank {rank} could not meet rank 0 at {head_addr}:{head_port} in time"
        + (f" (last error: {last_error})" if last_error else "")
    )
