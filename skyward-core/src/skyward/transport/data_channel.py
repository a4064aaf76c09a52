"""The data connections that carry sealed chunks (``skyward.transport.sealed``).

Each tcp worker binds one more port, its data port, with a plain ZeroMQ ROUTER; the
client connects one DEALER to each worker's data port. Both ends' sockets belong to one
thread per process (``DataChannel``), which forwards the chunks other threads seal and
opens the chunks that arrive into the buffers of their transfers. The messages
themselves never take this path: they stay on the CURVE connection, in order.

The client announces a data connection only once it works both ways: its DEALER says
``HELLO`` when its ZeroMQ handshake completes (again after every reconnect), the worker
records the DEALER's routing id and answers ``HELLO``, and only then does the client
send large buffers that way and tell the worker, over CURVE, which routing id its
results go to (``SEALED_ROUTE``). Until then, or with a data port the firewall does not
open, large buffers are chunked over CURVE as before (``skyward.transport.chunked``),
and the pool says so once (``DataChannel.unreachable``).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import zmq
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from skyward.transport.bulk import fresh_buffer
from skyward.transport.sealed import STALL, Inbound, TransferKey, seal_chunk, sealed_size, transfer_of
from skyward.transport.wire import send_frames

__all__ = ["DATA_HELLO", "DataChannel"]

DATA_HELLO = b"?"
"""A data connection's greeting, both ways (never a chunk: a chunk is at least 36 bytes)."""

EARLY_KEEP = 600.0
"""Seconds a chunk whose key has not arrived yet is kept. The key comes first on the CURVE
connection, but a busy worker reads that connection only between tasks, or every few
seconds during one (``skyward.agent.watch``)."""

EARLY_TRANSFERS = 64
"""Transfers whose chunks may be held waiting for their key at once: far more than a
client ever has on the way to one process, few enough that frames nobody announced
cannot fill memory."""

UNREACHABLE_AFTER = 30.0
"""Seconds a data port may take to answer before the pool says it is unreachable."""

_EVENT = struct.Struct("=HI")
_FINISHED_KEEP = 4096
_SEND_HWM = 256  # sealed chunks a sending thread may queue ahead of the wire (256 MiB)


class DataChannel:
    """This process's data connections: a bound ROUTER (``router``, on a worker) or one
    DEALER per worker data port (on the client, ``connect``)."""

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        router: zmq.Socket[bytes] | None = None,
        clock: Callable[[], float] = time.monotonic,
        unreachable_after: float = UNREACHABLE_AFTER,
        stall: float = STALL,
    ) -> None:
        self._context = context
        self._unreachable_after = unreachable_after
        self._stall = stall
        self._router = router
        self._clock = clock
        self._lock = threading.Lock()
        self._inbound: dict[bytes, Inbound] = {}
        self._early: dict[bytes, tuple[float, list[zmq.Frame]]] = {}
        self._finished: dict[bytes, None] = {}  # the latest transfers done: their replays are refused
        self._ready: dict[str, bytes] = {}  # client: data endpoint -> its DEALER's routing id, once answered
        self._routes: set[bytes] = set()  # worker: the routing ids of DEALERs that said HELLO
        self.refused = 0  # chunks refused (sealed.Inbound.open), for tests and logs
        self.sent = 0  # transfers sent and received whole, for tests and logs
        self.received = 0
        self._connected: dict[str, float] = {}  # client: data endpoint -> when its connection was asked for
        self._address = f"inproc://skyward-data-{os.getpid()}-{id(self):x}"
        self._pull = context.socket(zmq.PULL)
        self._pull.setsockopt(zmq.LINGER, 0)
        self._pull.bind(self._address)
        self._local = threading.local()
        self._pushes: list[zmq.Socket[bytes]] = []
        self._thread = threading.Thread(target=self._run, name="skyward-data", daemon=True)
        self._thread.start()

    # -- any thread ----------------------------------------------------------------------

    def connect(self, endpoint: str) -> None:
        """Open (client) a data connection to a worker's data port."""
        self._push([b"C", endpoint.encode()])

    def disconnect(self, endpoint: str) -> None:
        self._push([b"D", endpoint.encode()])

    def ready(self, endpoint: str) -> bytes | None:
        """The routing id of the working data connection to ``endpoint``, or None."""
        return self._ready.get(endpoint)

    def has_route(self, route: bytes) -> bool:
        """Whether a client's data connection with routing id ``route`` said HELLO (worker)."""
        return route in self._routes

    def send(self, address: bytes, key: TransferKey, chunks: Sequence[memoryview]) -> None:
        """Seal a buffer's ``chunks`` (``key.chunk`` bytes each, the last one shorter) under
        ``key`` in this thread, one by one, and queue each for ``address`` (a data endpoint
        on the client, a routing id on a worker)."""
        aead = AESGCM(key.key)
        # one buffer for every sealed chunk (huge pages where Linux has them) rather than a
        # zeroed bytearray per chunk: sending 256 MB took 0.12-0.20 s of the caller's time
        # this way and 0.13-0.19 s with bytearrays (7 warm round trips each): no measurable
        # difference, and one mapping for the whole sealed copy
        out = fresh_buffer(sealed_size(key))
        offset = 0
        for index, piece in enumerate(chunks):
            frame = seal_chunk(aead, key, index, piece, out[offset:])
            offset += frame.nbytes
            self._push([b"S", address, frame])
        self.sent += 1

    def expect(self, key: TransferKey) -> Inbound:
        """Register a transfer announced on the CURVE connection; chunks of it that came
        first are opened now."""
        inbound = Inbound(key, self._clock)
        with self._lock:
            self._inbound[key.transfer] = inbound
            early = self._early.pop(key.transfer, (0.0, []))[1]
        for frame in early:
            self._open(inbound, frame)
        return inbound

    def wait(self, inbound: Inbound, gone: Callable[[], bool] | None = None) -> memoryview:
        """The transfer's buffer once whole (``Inbound.wait``), then forgotten."""
        try:
            buffer = inbound.wait(self._stall, gone=gone)
        finally:
            self.forget(inbound)
        self.received += 1
        return buffer

    def forget(self, inbound: Inbound) -> None:
        """Stop receiving ``inbound``: later chunks of it are refused."""
        with self._lock:
            self._inbound.pop(inbound.key.transfer, None)
            self._finished[inbound.key.transfer] = None
            if len(self._finished) > _FINISHED_KEEP:
                del self._finished[next(iter(self._finished))]

    def close(self) -> None:
        if self._thread.is_alive():
            self._push([b"X"])
            self._thread.join(5.0)
        for push in self._pushes:
            push.close(linger=0)
        self._pull.close(linger=0)

    def _push(self, frames: list[Any]) -> None:
        push: zmq.Socket[bytes] | None = getattr(self._local, "push", None)
        if push is None or push.closed:
            push = self._context.socket(zmq.PUSH)
            push.setsockopt(zmq.SNDHWM, _SEND_HWM)
            push.setsockopt(zmq.LINGER, 0)
            push.connect(self._address)
            self._local.push = push
            with self._lock:
                self._pushes.append(push)
        send_frames(push, frames)

    # -- the channel's own thread -------------------------------------------------------

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._pull, zmq.POLLIN)
        if self._router is not None:
            poller.register(self._router, zmq.POLLIN)
        dealers: dict[str, zmq.Socket[bytes]] = {}
        owners: dict[zmq.Socket[bytes], str] = {}  # DEALER or its monitor -> endpoint
        try:
            while True:
                try:
                    events = poller.poll(1000)
                except zmq.ZMQError:
                    return  # the context was destroyed under this thread: the pool is closing
                for sock, _ in events:
                    if sock is self._pull:
                        if not self._on_command(poller, dealers, owners):
                            return
                    elif sock is self._router:
                        self._on_router()
                    elif sock in owners:
                        self._on_dealer(sock, owners[sock], dealers)
                self._expire()
                self._say_unreachable(dealers)
        except zmq.ZMQError:
            return
        finally:
            for dealer in dealers.values():
                dealer.close(linger=0)
            for sock in owners:
                if not sock.closed:
                    sock.close(linger=0)
            if self._router is not None:
                self._router.close(linger=0)

    def _on_command(
        self, poller: zmq.Poller, dealers: dict[str, zmq.Socket[bytes]], owners: dict[zmq.Socket[bytes], str]
    ) -> bool:
        while True:
            try:
                frames = self._pull.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return True
            kind = frames[0].bytes
            if kind == b"S":
                self._forward(frames[1].bytes, frames[2], dealers)
            elif kind == b"C":
                endpoint = frames[1].bytes.decode()
                if endpoint not in dealers:
                    self._connected[endpoint] = self._clock()
                    dealer, monitor = self._dealer(endpoint)
                    dealers[endpoint] = dealer
                    owners[dealer] = owners[monitor] = endpoint
                    poller.register(dealer, zmq.POLLIN)
                    poller.register(monitor, zmq.POLLIN)
            elif kind == b"D":
                endpoint = frames[1].bytes.decode()
                self._ready.pop(endpoint, None)
                self._connected.pop(endpoint, None)
                gone = dealers.pop(endpoint, None)
                for sock in [s for s, e in owners.items() if e == endpoint]:
                    poller.unregister(sock)
                    del owners[sock]
                    if sock is not gone:
                        sock.close(linger=0)
                if gone is not None:
                    gone.disable_monitor()
                    gone.close(linger=0)
            elif kind == b"X":
                return False

    def _dealer(self, endpoint: str) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
        dealer = self._context.socket(zmq.DEALER)
        # a routing id of 16 random bytes, never starting with 0 (ZeroMQ keeps those for itself)
        dealer.setsockopt(zmq.ROUTING_ID, b"d" + os.urandom(15))
        for option, value in ((zmq.SNDHWM, 0), (zmq.RCVHWM, 0), (zmq.LINGER, 0)):
            dealer.setsockopt(option, value)
        events = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
        monitor = dealer.get_monitor_socket(events)
        dealer.connect(endpoint)
        return dealer, monitor

    def _forward(self, address: bytes, frame: zmq.Frame, dealers: dict[str, zmq.Socket[bytes]]) -> None:
        try:
            if self._router is not None:
                self._router.send_multipart([address, frame], copy=False)
            else:
                dealer = dealers.get(address.decode())
                if dealer is not None:
                    dealer.send(frame, copy=False)
        except zmq.ZMQError as error:  # the peer went away: its transfer stalls, and says so
            _stderr_line(f"skyward: a sealed chunk could not be sent on its data connection: {error}")

    def _on_router(self) -> None:
        assert self._router is not None
        while True:
            try:
                route, payload = self._router.recv_multipart(zmq.NOBLOCK, copy=False)[:2]
            except zmq.Again:
                return
            except ValueError:
                continue  # a message without a payload: nothing of ours
            if len(payload) == len(DATA_HELLO) and payload.bytes == DATA_HELLO:
                self._routes.add(route.bytes)
                try:
                    self._router.send_multipart([route, DATA_HELLO])
                except zmq.ZMQError:
                    self._routes.discard(route.bytes)
            else:
                self._receive(payload)

    def _on_dealer(self, sock: zmq.Socket[bytes], endpoint: str, dealers: dict[str, zmq.Socket[bytes]]) -> None:
        dealer = dealers.get(endpoint)
        if dealer is None:
            return
        if sock is not dealer:  # its monitor
            while True:
                try:
                    # a monitor event: 2 bytes of event and 4 of value, in the machine's order,
                    # then the address (zmq.utils.monitor would import zmq.asyncio: 120 ms)
                    event = _EVENT.unpack_from(sock.recv_multipart(zmq.NOBLOCK)[0])[0]
                except zmq.Again:
                    return
                if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    dealer.send(DATA_HELLO)
                elif event == zmq.EVENT_DISCONNECTED:
                    self._ready.pop(endpoint, None)
        while True:
            try:
                frame = dealer.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if len(frame) == len(DATA_HELLO) and frame.bytes == DATA_HELLO:
                self._ready[endpoint] = cast(bytes, dealer.getsockopt(zmq.ROUTING_ID))
                self._connected.pop(endpoint, None)
            else:
                self._receive(frame)

    def _receive(self, frame: zmq.Frame) -> None:
        view = memoryview(frame.buffer)
        transfer = transfer_of(view)
        if transfer is None:
            self._refuse()
            return
        with self._lock:
            inbound = self._inbound.get(transfer)
            keep = transfer in self._early or len(self._early) < EARLY_TRANSFERS
            if inbound is None and transfer not in self._finished and keep:
                self._early.setdefault(transfer, (self._clock(), []))[1].append(frame)
                return
        if inbound is None:
            self._refuse()  # more unannounced transfers than a client ever has on the way
            return
        self._open(inbound, frame)

    def _open(self, inbound: Inbound, frame: zmq.Frame) -> None:
        if not inbound.open(memoryview(frame.buffer)):
            self._refuse()

    def _refuse(self) -> None:
        with self._lock:
            self.refused += 1
        _stderr_line("skyward: refused a chunk on a data connection (not sealed for a transfer this process expects)")

    def _say_unreachable(self, dealers: dict[str, zmq.Socket[bytes]]) -> None:
        """Say once per endpoint that a data port did not answer: its worker's large
        buffers still arrive, chunked over CURVE, at a third of the speed."""
        now = self._clock()
        for endpoint, since in list(self._connected.items()):
            if now - since > self._unreachable_after and endpoint in dealers:
                del self._connected[endpoint]
                _stderr_line(
                    f"skyward: the worker data port {endpoint} did not answer within {self._unreachable_after:g} s: "
                    "large buffers to and from that worker go chunked over its CURVE connection instead "
                    "(slower); open the node's data ports (skyward.agent.config.node_ports) to the client"
                )

    def _expire(self) -> None:
        now = self._clock()
        with self._lock:
            for transfer in [t for t, (since, _) in self._early.items() if now - since > EARLY_KEEP]:
                del self._early[transfer]


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
