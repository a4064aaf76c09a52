"""A large buffer's chunks ride the pool's CURVE connection, as messages of their own
after their message (``skyward.transport.chunked``), so each is sealed and authenticated
as every frame is: a chunk changed on the wire, or replayed, breaks the connection and
its message is never completed; a peer without the pool's keys never gets a frame in
(``skyward.transport.bulk``, ``skyward.transport.security``).

A proxy sits on the tcp connection between the client's socket (``Links.socket``) and a
server socket set up as a worker's (``security.configure_server`` and the ZAP policy),
and parses ZMTP frames from the client: it forwards each, but changes one byte of one
chunk, or sends one chunk twice."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Literal

import numpy as np
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from skyward.transport import chunked, security, wire
from skyward.transport.bulk import BulkFrames
from skyward.transport.links import Links
from skyward.transport.security import Keypair, PoolKeys

_BULK = BulkFrames(threshold=4 * 2**20, chunk=2**20)
_WAIT_MS = 30_000  # a bound for what must happen, never a measured time
Mode = Literal["forward", "tamper", "replay"]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = sock.recv(n - len(data))
        if not more:
            raise ConnectionError("closed")
        data += more
    return data


class _Proxy:
    """Forwards one tcp connection; client -> server it reads ZMTP frames and, in
    ``tamper`` or ``replay`` mode, changes or repeats the ``target``-th CURVE MESSAGE."""

    def __init__(self, upstream: int, mode: Mode, target: int) -> None:
        self.mode, self.target = mode, target
        self.messages = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = upstream
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        client, _ = self.listener.accept()
        self.listener.close()  # one connection: no reconnect gets past the proxy
        server = socket.create_connection(("127.0.0.1", self.upstream))
        threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()
        try:
            greeting = 0
            while greeting < 64:  # the ZMTP greeting, as it comes: each end waits on the other's bytes
                data = client.recv(64 - greeting)
                if not data:
                    return
                server.sendall(data)
                greeting += len(data)
            while True:
                head = _read(client, 1)
                wide = head[0] & 0x02
                length_bytes = _read(client, 8 if wide else 1)
                (length,) = struct.unpack("!Q" if wide else "!B", length_bytes)
                body = _read(client, length)
                frame = head + length_bytes + body
                if body.startswith(b"\x07MESSAGE"):
                    self.messages += 1
                    if self.messages == self.target and self.mode == "tamper":
                        middle = len(frame) // 2
                        frame = frame[:middle] + bytes([frame[middle] ^ 0x01]) + frame[middle + 1 :]
                    elif self.messages == self.target and self.mode == "replay":
                        frame = frame + frame
                server.sendall(frame)
        except OSError:
            pass
        finally:
            client.close()
            server.close()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
        except OSError:
            pass


@pytest.fixture
def server() -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes], int, PoolKeys]]:
    """A ROUTER set up as a worker's task socket (CURVE server, ZAP admitting the pool's
    client alone), its monitor, its port and the pool's keys."""
    keys = PoolKeys()
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    auth = security.start_server_auth(context, keys.client.public)
    sock = context.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    security.configure_server(sock, keys.node(0).secret)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    monitor = sock.get_monitor_socket()
    yield sock, monitor, port, keys
    sock.disable_monitor()
    monitor.close(linger=0)
    auth.stop()
    context.destroy(linger=0)


def _large_message() -> list[object]:
    array = np.arange(6 * 2**20 // 8, dtype=np.float64)  # six chunks
    message = wire.pack_message([wire.pack_results([(2, wire.Status.OK, 1, 0.0)]), memoryview(array)], bulk=_BULK)
    assert len(message) == 7
    return message


def _await_event(monitor: zmq.Socket[bytes], events: int) -> None:
    while monitor.poll(_WAIT_MS):
        if recv_monitor_message(monitor)["event"] & events:
            return
    raise AssertionError("the server's socket never reported the event")


def _client(links: Links, port: int, keys: PoolKeys) -> zmq.Socket[bytes]:
    return links.socket(zmq.DEALER, f"tcp://127.0.0.1:{port}", keys.node(0).public)


def _send_through_proxy(
    server: tuple[zmq.Socket[bytes], zmq.Socket[bytes], int, PoolKeys], mode: Mode
) -> tuple[zmq.Socket[bytes], Links]:
    sock, _, port, keys = server
    # CURVE message 1 is a small one, 2 the large one's pack, then each chunk's marker and
    # bytes: 4 is the first chunk's bytes
    proxy = _Proxy(port, mode, target=4)
    links = Links(keys)
    client = _client(links, proxy.port, keys)
    client.send(b"first")
    assert sock.poll(_WAIT_MS), "a small message went through the proxy"
    assert sock.recv_multipart()[1] == b"first"
    chunked.send_message(client, _large_message())
    return client, links


def test_chunks_forwarded_unchanged_arrive_whole(
    server: tuple[zmq.Socket[bytes], zmq.Socket[bytes], int, PoolKeys],
) -> None:
    sock = server[0]
    _, links = _send_through_proxy(server, "forward")
    try:
        reassembly, whole = chunked.Reassembly(), None
        while whole is None:
            assert sock.poll(_WAIT_MS)
            frames = wire.recv_frames(sock)
            whole = reassembly.feed(frames[1:], frames[0].bytes)
        header, parts = wire.open_message(whole)
        assert header[:1] == wire.RESULTS
        assert np.array_equal(np.frombuffer(parts[0], dtype=np.float64), np.arange(6 * 2**20 // 8))
    finally:
        links.context.destroy(linger=0)


@pytest.mark.parametrize("mode", ["tamper", "replay"])
def test_a_chunk_changed_or_replayed_on_the_wire_breaks_the_connection_and_its_message_never_arrives(
    server: tuple[zmq.Socket[bytes], zmq.Socket[bytes], int, PoolKeys], mode: Mode
) -> None:
    sock, monitor = server[0], server[1]
    _, links = _send_through_proxy(server, mode)
    try:
        # libzmq reports a frame that fails CURVE's check (its box, or its nonce not above
        # the last one) as a protocol failure, and drops the connection
        _await_event(monitor, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_DISCONNECTED)
        reassembly = chunked.Reassembly()
        while sock.poll(0):  # the pack and the chunks before the changed one arrived
            frames = wire.recv_frames(sock)
            completed = reassembly.feed(frames[1:], frames[0].bytes)
            assert completed is None, f"a message with a {mode}ed chunk was completed"
        assert reassembly.pending() == 1
    finally:
        links.context.destroy(linger=0)


def test_a_client_without_the_pool_s_keys_gets_no_chunk_in(
    server: tuple[zmq.Socket[bytes], zmq.Socket[bytes], int, PoolKeys],
) -> None:
    sock, monitor, port, keys = server
    stranger = PoolKeys(Keypair.generate())
    stranger.node(0)  # knows nothing of the pool's node keys but the public one below
    links = Links(stranger)
    try:
        client = links.socket(zmq.DEALER, f"tcp://127.0.0.1:{port}", keys.node(0).public)
        # once the server refuses the handshake the DEALER has no peer, and a send waits for
        # one: the chunks sent after that moment are given up (the refusal is what is tested)
        client.setsockopt(zmq.SNDTIMEO, 1000)
        with contextlib.suppress(zmq.Again):
            chunked.send_message(client, _large_message())
        _await_event(monitor, zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        assert not sock.poll(0), "a stranger's message was delivered"
    finally:
        links.context.destroy(linger=0)
