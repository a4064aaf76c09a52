"""The client's side of the file exchange (``Image(includes=...)``; see ``receiver``).

Once a node's agent has answered the handshake, and before the pool sends it the
cluster message (so before any task), the client sends it the manifest, then each blob
it says it lacks in ``CHUNK`` frames, at most ``window`` unacknowledged per node (the
client holds at most ``window`` MiB per node; a node far away does not make it buffer a
whole file), then asks it to build its working directory. Nodes on different hosts are
served together; nodes that report one host (Local's nodes, which share one store) one
after the other, so the second finds the first's blobs and is sent none.

A node that refuses a blob, cannot build its directory or says nothing for ``silence``
seconds fails the pool's open with ``ProvisioningError`` (the pool then tears down
everything it started, as for any failed start).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from skyward.errors import ProvisioningError
from skyward.events import Notice
from skyward.files.manifest import CHUNK, Manifest
from skyward.transport import wire

__all__ = ["FileShipment", "ShippedFiles", "progress_message"]

WINDOW = 8
SILENCE = 120.0
PROGRESS_MIN_BYTES = 64 * CHUNK
"""A transfer this large says how it goes (a Notice every ``PROGRESS_INTERVAL`` s)."""
PROGRESS_INTERVAL = 2.0


@dataclass(frozen=True, slots=True)
class ShippedFiles:
    """What a pool shipped so far: its tree (``files_hash``: the manifest's sha256, its
    file count and bytes) and what actually crossed the wire to its nodes (blob bytes and
    blobs, summed over nodes: 0 when every node already had every file)."""

    files_hash: str
    files: int
    total_bytes: int
    sent_bytes: int
    sent_blobs: int


def progress_message(sent: int, total: int, nodes: Sequence[int]) -> str:
    """The Notice of a transfer under way (pure)."""
    where = ", ".join(str(n) for n in nodes)
    percent = 100 * sent // total if total else 100
    return f"files: {sent / CHUNK:.1f} of {total / CHUNK:.1f} MiB sent to node(s) {where} ({percent}%)"


@dataclass(slots=True)
class _Node:
    index: int
    socket: zmq.Socket[bytes]
    chunks: deque[tuple[str, int, int, bool]]  # (sha, offset, length, last)
    in_flight: int = 0
    heard: float = 0.0


class FileShipment:
    """Ships ``manifest`` (paths under ``root``) to nodes as they join the pool."""

    def __init__(
        self,
        manifest: Manifest,
        root: Path,
        emit: Callable[[Notice], None],
        silence: float = SILENCE,
        window: int = WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.manifest = manifest
        self.root = root
        self._emit = emit
        self._silence = silence
        self._window = window
        self._clock = clock
        self._payload = manifest.to_json()
        self._blobs = manifest.blobs()
        self._paths = {e.sha256: e.path for e in reversed(manifest.entries)}  # one path per content
        self._lock = threading.Lock()
        self._sent_bytes = 0
        self._sent_blobs = 0

    def stats(self) -> ShippedFiles:
        with self._lock:
            return ShippedFiles(
                self.manifest.sha256, len(self.manifest.entries), self.manifest.total_bytes, self._sent_bytes,
                self._sent_blobs,
            )  # fmt: skip

    def __call__(
        self, sockets: Sequence[zmq.Socket[bytes]], infos: Sequence[Mapping[str, Any]], indices: Sequence[int]
    ) -> None:
        """Ship the files to each node (``sockets[i]`` is node ``indices[i]``, which said
        ``infos[i]`` in its handshake); returns once every one has built its directory."""
        by_host: dict[str, list[_Node]] = {}
        for sock, info, index in zip(sockets, infos, indices, strict=True):
            by_host.setdefault(str(info.get("hostname", index)), []).append(_Node(index, sock, deque()))
        rounds = max((len(nodes) for nodes in by_host.values()), default=0)
        for turn in range(rounds):
            self._round([nodes[turn] for nodes in by_host.values() if turn < len(nodes)])

    def _round(self, nodes: list[_Node]) -> None:
        for node in nodes:
            node.socket.send_multipart([wire.FILES, self._payload])
        for node, answer in zip(nodes, self._answers(nodes, wire.FILES), strict=True):
            need = answer.get("need")
            if not isinstance(need, list) or any(sha not in self._blobs for sha in need):
                raise ProvisioningError(f"node {node.index} answered the file manifest with {answer!r}")
            for sha in need:
                size = self._blobs[sha]
                offsets = range(0, size, CHUNK) if size else range(1)
                node.chunks.extend((sha, o, min(CHUNK, size - o), o + CHUNK >= size) for o in offsets)
        total = sum(length for node in nodes for _, _, length, _ in node.chunks)
        self._stream(nodes, total)
        for node in nodes:
            node.socket.send_multipart([wire.PLACE])
        self._answers(nodes, wire.PLACE)

    def _stream(self, nodes: list[_Node], total: int) -> None:
        """Send every node its chunks, ``window`` in flight each, until all are acknowledged."""
        acked = 0
        loud = total >= PROGRESS_MIN_BYTES
        indices = [n.index for n in nodes]
        if loud:
            self._emit(Notice(message=progress_message(0, total, indices)))
        last_said = self._clock()
        poller = zmq.Poller()
        for node in nodes:
            poller.register(node.socket, zmq.POLLIN)
            node.heard = self._clock()
        by_socket = {node.socket: node for node in nodes}
        while any(node.chunks or node.in_flight for node in nodes):
            for node in nodes:
                while node.chunks and node.in_flight < self._window:
                    self._send_chunk(node, *node.chunks.popleft())
            for sock, _ in poller.poll(100):
                node = by_socket[sock]
                for answer in self._drain(node, wire.BLOB):
                    node.in_flight -= 1
                    acked += int(answer.get("n", 0))
            now = self._clock()
            self._check_silence(nodes, now, "a chunk of the project's files")
            if loud and now - last_said >= PROGRESS_INTERVAL:
                last_said = now
                self._emit(Notice(message=progress_message(acked, total, indices)))
        if loud:
            self._emit(Notice(message=progress_message(total, total, indices)))

    def _send_chunk(self, node: _Node, sha: str, offset: int, length: int, last: bool) -> None:
        with open(self.root / self._paths[sha], "rb") as f:
            f.seek(offset)
            data = f.read(length)
        head = wire.encode_json({"sha": sha, "offset": offset, "end": last})
        node.socket.send_multipart([wire.BLOB, head, data], copy=len(data) < wire.ZERO_COPY_MIN)
        node.in_flight += 1
        with self._lock:
            self._sent_bytes += len(data)
            self._sent_blobs += last

    def _answers(self, nodes: list[_Node], kind: bytes) -> list[dict[str, Any]]:
        """Each node's answer of ``kind``, in node order."""
        answers: dict[int, dict[str, Any]] = {}
        poller = zmq.Poller()
        for node in nodes:
            poller.register(node.socket, zmq.POLLIN)
            node.heard = self._clock()
        by_socket = {node.socket: node for node in nodes}
        while len(answers) < len(nodes):
            for sock, _ in poller.poll(100):
                node = by_socket[sock]
                for answer in self._drain(node, kind):
                    answers[node.index] = answer
            self._check_silence([n for n in nodes if n.index not in answers], self._clock(), "its answer")
        return [answers[node.index] for node in nodes]

    def _drain(self, node: _Node, kind: bytes) -> list[dict[str, Any]]:
        """The waiting messages of ``kind`` from ``node`` (others, a PING, are dropped);
        an answer that says ``error`` raises, naming the node."""
        out: list[dict[str, Any]] = []
        while True:
            try:
                frames = node.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return out
            node.heard = self._clock()
            if frames[0] != kind or len(frames) < 2:
                continue
            answer = wire.decode_json(frames[1])
            if not isinstance(answer, dict):
                raise ProvisioningError(f"node {node.index} answered the file exchange with {answer!r}")
            if "error" in answer:
                path = self._paths.get(str(answer.get("sha")), "")
                what = f" ({path}: did it change while the pool opened?)" if path else ""
                raise ProvisioningError(
                    f"node {node.index} could not take the project's files (Image(includes=...)): "
                    f"{answer['error']}{what}"
                )
            out.append(answer)

    def _check_silence(self, nodes: Sequence[_Node], now: float, waiting_for: str) -> None:
        silent = [n.index for n in nodes if now - n.heard > self._silence]
        if silent:
            raise ProvisioningError(
                f"node(s) {', '.join(map(str, silent))} said nothing for {self._silence:g} s while the client waited "
                f"for {waiting_for} (Image(includes=...)); the node is unreachable or its agent stopped"
            )
