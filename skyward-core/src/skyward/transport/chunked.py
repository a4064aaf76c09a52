"""A message's chunked parts sent as messages of their own, and put back together.

(Once a worker's data connection works, the chunks go sealed on it instead, their keys
on this socket as ``SEALED_KEY`` messages before the message: ``SealedPath``, and
``skyward.transport.sealed`` for the construction. What follows is the path until then.)

A chunked part (``skyward.transport.bulk``: a buffer of 4 MiB or more on a CURVE link) is
a run of 1 MiB chunks. Sent as frames of one multipart message, nothing of it reaches the
receiver before the last chunk has arrived (ZeroMQ delivers a message whole), and only
then can the receiver copy the chunks into one buffer: a copy that waits for the transfer
and that the transfer waits for, on both ends of a round trip. ``send_message`` sends the
message's own frames first, then each chunk as a message of its own (``[CHUNK, bytes]``
on the same socket, after it), and ``Reassembly`` copies each chunk into its place as it
arrives, while the sockets' I/O threads open the next ones.

Measured (raw pyzmq, 32 MB echoed over tcp loopback with CURVE, 1 MiB chunks, medians of
7 round trips, 3 runs each on the 2-core development machine): chunk frames of one
message, joined by each receiver, 0.63-0.70 GB/s; chunks as messages copied into place as
they arrive, 0.80-0.92 GB/s.

Nothing about trust changes: the chunks ride the same CURVE connection as every frame
(sealed, authenticated, each frame's nonce above the last: one tampered, replayed,
reordered or dropped breaks the connection, and the message is never completed), from
the one peer that holds the pool's keys. A receiver keeps one unfinished message per
sender (the socket, or a ROUTER's peer): ZeroMQ keeps one peer's messages in order, and
a sender never starts a message before its last one is out (one thread per socket). A
new head from a sender abandons that sender's unfinished message, and a chunk with none
to join is dropped, so a sender that gave up half-way (its socket closed) leaves nothing
behind but that message.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from skyward.errors import TransferError
from skyward.transport import wire
from skyward.transport.bulk import fresh_buffer

if TYPE_CHECKING:  # both import cryptography (25 ms): only processes with a data connection need it
    from skyward.transport.data_channel import DataChannel
    from skyward.transport.sealed import Inbound, TransferKey

__all__ = ["Reassembly", "SealedMessage", "SealedPath", "send_message"]


@dataclass(frozen=True, slots=True)
class SealedPath:
    """Where a message's chunked parts go instead of the CURVE socket: sealed
    (``skyward.transport.sealed``) on ``channel``'s data connection to ``address`` (the
    worker's data endpoint, from the client; the client's routing id, from a worker)."""

    channel: DataChannel
    address: bytes


_CHUNK_BYTE = wire.CHUNK[0]
_ROUTE_BYTE = wire.SEALED_ROUTE[0]
_SEALED_BYTES = (wire.SEALED_KEY[0], _ROUTE_BYTE)


def _view(frame: Any) -> memoryview:
    return memoryview(frame.buffer if hasattr(frame, "buffer") else frame).cast("B")


def send_message(
    sock: Any, message: Sequence[Any], prefix: Sequence[bytes] = (), sealed: SealedPath | None = None
) -> None:
    """Send a message of ``wire.pack_message``: its first frame and the frames of parts
    of their own as one message, then each chunk as ``[*prefix, CHUNK, chunk]``
    (``prefix``: a ROUTER's peer identity). A message without chunks goes as it is.

    With ``sealed``, each chunked part's key goes first (``[*prefix, SEALED_KEY, key]``),
    then its chunks, sealed, on the data connection, then the message's own frames."""
    layout = wire.frame_layout(_view(message[0])) if message else None
    if layout is None or all(chunks == 1 and total == 0 for total, chunks in layout):
        wire.send_frames(sock, [*prefix, *message])
        return
    own: list[Any] = [message[0]]
    chunks: list[Any] = []
    position = 1
    for total, count in layout:
        if total == 0 and count == 1:
            own.append(message[position])
        else:
            chunks.extend(message[position : position + count])
        position += count
    if sealed is not None:
        _send_sealed(sock, message, layout, prefix, sealed)
        wire.send_frames(sock, [*prefix, *own])
        return
    wire.send_frames(sock, [*prefix, *own])
    for chunk in chunks:
        wire.send_frames(sock, [*prefix, wire.CHUNK, chunk])


def _send_sealed(
    sock: Any, message: Sequence[Any], layout: list[tuple[int, int]], prefix: Sequence[bytes], sealed: SealedPath
) -> None:
    from skyward.transport.sealed import new_transfer  # noqa: PLC0415 (see the imports)

    parts: list[tuple[TransferKey, list[memoryview]]] = []
    position = 1
    for total, count in layout:
        if not (total == 0 and count == 1):
            pieces = [_view(frame) for frame in message[position : position + count]]
            parts.append((new_transfer(total, pieces[0].nbytes), pieces))
        position += count
    for key, _ in parts:
        sock.send_multipart([*prefix, wire.SEALED_KEY, key.pack()])
    for key, pieces in parts:
        sealed.channel.send(sealed.address, key, pieces)


class _Partial:
    """A message whose chunks are arriving: its own frames, and a buffer per chunked part
    that each chunk is copied into as it comes."""

    def __init__(self, frames: list[Any], layout: list[tuple[int, int]]) -> None:
        self.frames = frames  # the first frame, then the parts of their own, in order
        self.layout = layout
        self.parts = [index for index, (total, count) in enumerate(layout) if not (total == 0 and count == 1)]
        self.buffers: list[memoryview | TransferError] = []  # TransferError: a sealed part that stalled
        self.current = memoryview(b"")  # the part the chunks now arriving are copied into
        self.part = 0  # which of ``parts`` the next chunk belongs to
        self.offset = 0
        self.received = 0  # chunks of the current part

    def add(self, chunk: Any) -> bool:
        """Copy one chunk into place; True once the message is whole. Raises ValueError
        for chunks that overrun their part or do not fill it."""
        total, count = self.layout[self.parts[self.part]]
        if self.received == 0:
            self.current = fresh_buffer(total)
            self.buffers.append(self.current)
        piece = _view(chunk)
        end = self.offset + piece.nbytes
        if end > total:
            raise ValueError(f"chunks that overrun the {total} bytes their table announced")
        self.current[self.offset : end] = piece
        self.offset, self.received = end, self.received + 1
        if self.received < count:
            return False
        if self.offset != total:
            raise ValueError(f"chunks that do not add up to the {total} bytes their table announced")
        self.part, self.offset, self.received = self.part + 1, 0, 0
        return self.part == len(self.parts)

    def message(self) -> list[Any]:
        """The first frame, then one frame per part in order (``wire.open_message``)."""
        own = iter(self.frames[1:])
        joined = iter(self.buffers)
        out: list[Any] = [self.frames[0]]
        for total, count in self.layout:
            out.append(next(own) if total == 0 and count == 1 else next(joined))
        return out


class SealedMessage:
    """A message whose sealed parts are still arriving on the data connection, each part's
    transfer claimed in order (``Reassembly.feed_nowait``). ``complete`` waits for them on
    the calling thread, which is why the client's I/O thread hands it to a thread of its
    own: a 2 GB result arrives for seconds after its message, and the I/O thread serves
    every other worker and node meanwhile."""

    def __init__(self, partial: _Partial, channel: DataChannel, inbounds: list[Inbound]) -> None:
        self._partial = partial
        self._channel = channel
        self._inbounds = inbounds

    @overload
    def complete(self) -> list[Any]: ...

    @overload
    def complete(self, gone: Callable[[], bool]) -> list[Any] | None: ...

    def complete(self, gone: Callable[[], bool] | None = None) -> list[Any] | None:
        """The whole message (``wire.open_message``). A part that stalls (``sealed.STALL``)
        becomes a ``TransferError``, which its task fails with (``serialize.loads``), so
        the message still arrives and nobody waits on it. With ``gone`` (asked while a
        part is arriving: its sender died), None as soon as it says so, the rest forgotten:
        a caller waiting on that worker learns of its death at once, not after a stall."""
        from skyward.transport.sealed import SenderGone  # noqa: PLC0415 (see the imports)

        stalled: TransferError | None = None
        for position, inbound in enumerate(self._inbounds):
            if stalled is not None:
                self._channel.forget(inbound)
                self._partial.buffers.append(stalled)
                continue
            try:
                self._partial.buffers.append(self._channel.wait(inbound, gone))
            except TimeoutError as error:
                stalled = TransferError(str(error))
                self._partial.buffers.append(stalled)
            except SenderGone:
                for rest in self._inbounds[position + 1 :]:
                    self._channel.forget(rest)
                return None
        return self._partial.message()

    def forget(self) -> None:
        """Nobody will read it (its sender's socket closed): stop receiving its parts."""
        for inbound in self._inbounds:
            self._channel.forget(inbound)


class Reassembly:
    """Messages of ``send_message`` put back together, per sender: ``feed`` each message
    received; it returns a whole message for ``wire.open_message``, or None while chunks
    are still to come (or for a chunk that has no message to join). ``feed_nowait``
    returns a ``SealedMessage`` instead of waiting for sealed parts."""

    def __init__(self, channel: Callable[[], DataChannel | None] = lambda: None) -> None:
        self._partial: dict[Hashable, _Partial] = {}
        # where sealed parts arrive (skyward.transport.data_channel), asked when one is
        # announced: the client makes its channel with its first tcp worker
        self._channel = channel
        self._sealed: dict[Hashable, deque[Inbound]] = {}  # per sender: announced transfers, in order
        self._routes: dict[Hashable, bytes] = {}  # per sender: its data connection's routing id

    def route(self, sender: Hashable) -> bytes | None:
        """The routing id of ``sender``'s data connection, as it announced (SEALED_ROUTE)."""
        return self._routes.get(sender)

    def feed(self, frames: Sequence[Any], sender: Hashable = None) -> list[Any] | None:
        message = self.feed_nowait(frames, sender)
        return message.complete() if isinstance(message, SealedMessage) else message

    def feed_nowait(self, frames: Sequence[Any], sender: Hashable = None) -> list[Any] | SealedMessage | None:
        first = _view(frames[0])
        if len(frames) == 2 and first.nbytes == 1 and first[0] in _SEALED_BYTES:
            self._on_sealed(first[0], _view(frames[1]), sender)
            return None
        if len(frames) == 2 and first.nbytes == 1 and first[0] == _CHUNK_BYTE:
            partial = self._partial.get(sender)
            if partial is None:
                return None  # its message was abandoned (see the module's docstring)
            try:
                whole = partial.add(frames[1])
            except ValueError:
                del self._partial[sender]
                raise
            if not whole:
                return None
            del self._partial[sender]
            return partial.message()
        self._partial.pop(sender, None)  # a new message: an unfinished one is abandoned
        layout = wire.frame_layout(first)
        if layout is None or all(total == 0 and count == 1 for total, count in layout):
            return list(frames)
        own = sum(1 for total, count in layout if total == 0 and count == 1)
        if len(frames) == 1 + sum(count for _, count in layout):
            return list(frames)  # its chunks are frames of it (wire.send_frames): open_message joins them
        if len(frames) != 1 + own:
            raise ValueError("a message whose own frames do not match its table")
        partial = _Partial(list(frames), layout)
        if self._sealed.get(sender):
            return self._claim_sealed(partial, sender)
        self._partial[sender] = partial
        return None

    def _on_sealed(self, kind: int, body: memoryview, sender: Hashable) -> None:
        if kind == _ROUTE_BYTE:
            self._routes[sender] = bytes(body)
        else:
            channel = self._channel()
            if channel is None:
                raise ValueError("a sealed part announced to a process without a data connection")
            from skyward.transport.sealed import TransferKey  # noqa: PLC0415 (see the imports)

            self._sealed.setdefault(sender, deque()).append(channel.expect(TransferKey.unpack(body)))

    def _claim_sealed(self, partial: _Partial, sender: Hashable) -> SealedMessage:
        """The message whose parts were sealed, with each part's announced transfer, in
        order. Raises ValueError for a part missing or of another length."""
        channel = self._channel()
        assert channel is not None  # a transfer was announced, so the channel exists
        announced = self._sealed[sender]
        inbounds: list[Inbound] = []
        for index in partial.parts:
            total = partial.layout[index][0]
            if not announced or announced[0].key.length != total:
                for inbound in inbounds:
                    channel.forget(inbound)
                if not announced:
                    raise ValueError("a message with more chunked parts than sealed transfers announced")
                wrong = announced.popleft()
                channel.forget(wrong)
                raise ValueError(f"a sealed transfer of {wrong.key.length} bytes for a part of {total}")
            inbounds.append(announced.popleft())
        return SealedMessage(partial, channel, inbounds)

    def drop(self, sender: Hashable) -> None:
        """Forget ``sender``'s unfinished message (its socket is closed)."""
        self._partial.pop(sender, None)
        self._routes.pop(sender, None)
        channel = self._channel()
        for inbound in self._sealed.pop(sender, ()):
            if channel is not None:
                channel.forget(inbound)

    def pending(self) -> int:
        return len(self._partial)
