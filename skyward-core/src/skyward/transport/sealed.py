"""Large buffers across machines, sealed with AES-256-GCM: the construction.

libzmq's CURVE seals every frame with XSalsa20-Poly1305 in the socket's one I/O thread.
On the 2-core development machine a 256 MB array echoed over tcp loopback in 1 MiB
chunks (raw pyzmq, two processes, 5 round trips each, the same minute) ran at
0.61-0.64 GB/s under CURVE, 1.40-1.55 GB/s as the same chunks sealed with AES-256-GCM
from ``cryptography`` (OpenSSL, AES-NI: 7.9 GB/s to seal and 6.3 GB/s to open 1 MiB on
one core here) over a plain tcp connection, and 2.5 GB/s with no encryption at all. So a
large buffer between the client and a tcp worker travels on a data connection of its own
(``skyward.transport.data_channel``), sealed here, while its message, and everything
else, stays on the CURVE connection.

The construction, for one large buffer (a *transfer*):

- The sender draws a fresh 256-bit key and a 16-byte transfer id (``os.urandom``) and
  sends them, with the buffer's length and chunk size, as a ``SEALED_KEY`` message on the
  CURVE connection: only the peer that completed the CURVE handshake with the pool's keys
  ever sees the key. Then it sends the chunks on the data connection, then the message
  itself on the CURVE connection.
- Chunk ``i`` (``chunk`` bytes; the last one shorter) is sealed with that key, the nonce
  ``i`` as 12 big-endian bytes, and as associated data the transfer id, ``i`` and the
  buffer's length. A key seals one buffer and each index once, so no nonce repeats under
  a key. On the wire a chunk is ``transfer id | i | ciphertext and tag``.
- The receiver opens each chunk with the key of its transfer id (from the CURVE
  connection) and the index it carries, into the chunk's own place in the buffer. It
  refuses a chunk that fails the tag (tampered, or sealed under another key: a chunk of
  another transfer), an index past the end, and an index it already has (a replay), and
  counts each refusal; a refused chunk changes nothing, so a forged frame cannot stop the
  real one from being placed. The message is delivered only once every index is in.

What it rests on: AES-GCM's confidentiality and integrity under unique nonces (NIST SP
800-38D), the freshness of ``os.urandom`` keys, and CURVE for carrying the key. What it
does not give, and CURVE does: the data connection itself is not authenticated, so a
host that can reach the data port can connect and send frames (all refused) or, racing
the real client after a reconnect, take its routing id and make a transfer stall
(availability, never confidentiality or integrity). The provider's firewall admits only
the client's address to every node port, the data ports included.
"""

from __future__ import annotations

import math
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from skyward.transport.bulk import fresh_buffer

__all__ = [
    "HEADER",
    "STALL",
    "TAG",
    "Inbound",
    "SenderGone",
    "TransferKey",
    "new_transfer",
    "seal_chunk",
    "sealed_size",
    "transfer_of",
]

TAG = 16
"""Bytes of the GCM tag after each chunk's ciphertext."""

HEADER = struct.Struct("!16sI")
"""A sealed chunk's clear prefix: the transfer id and the chunk's index."""

_KEY = struct.Struct("!16s32sQI")  # transfer id, key, length, chunk size
_AAD = struct.Struct("!16sIQ")  # transfer id, index, length

STALL = 60.0
"""Seconds a receiver waits for a transfer's next chunk before it gives the message up:
long enough for a congested link, short enough that a connection lost half-way ends in
an error rather than a hang."""


class SenderGone(Exception):
    """The sender of a transfer went away while its chunks arrived (its worker died, its
    node was lost): nobody waits for the rest (``Inbound.wait``'s ``gone``)."""


@dataclass(frozen=True, slots=True)
class TransferKey:
    """What the CURVE connection carries for one transfer (``SEALED_KEY``)."""

    transfer: bytes
    key: bytes
    length: int
    chunk: int

    def __post_init__(self) -> None:
        if len(self.transfer) != 16 or len(self.key) != 32:
            raise ValueError("a transfer key is a 16-byte transfer id and a 32-byte AES-256 key")
        if self.length < 1 or self.chunk < 1:
            raise ValueError(f"a transfer of {self.length} bytes in chunks of {self.chunk}: both must be >= 1")

    @property
    def chunks(self) -> int:
        return math.ceil(self.length / self.chunk)

    def pack(self) -> bytes:
        return _KEY.pack(self.transfer, self.key, self.length, self.chunk)

    @classmethod
    def unpack(cls, blob: bytes | memoryview) -> TransferKey:
        if len(blob) != _KEY.size:
            raise ValueError(f"a SEALED_KEY of {len(blob)} bytes, not {_KEY.size}")
        return cls(*_KEY.unpack(blob))


def new_transfer(length: int, chunk: int) -> TransferKey:
    """A fresh transfer: a random id and a random key that seals this buffer only."""
    return TransferKey(os.urandom(16), AESGCM.generate_key(256), length, chunk)


def _nonce(index: int) -> bytes:
    return index.to_bytes(12, "big")


def sealed_size(key: TransferKey) -> int:
    """Bytes of all of ``key``'s chunks as they go on the data connection."""
    return key.length + key.chunks * (HEADER.size + TAG)


def seal_chunk(aead: AESGCM, key: TransferKey, index: int, piece: memoryview, out: memoryview) -> memoryview:
    """Seal chunk ``index`` of ``key``'s buffer into the start of ``out``; returns the
    sealed chunk as it goes on the data connection (a view of ``out``)."""
    end = HEADER.size + piece.nbytes + TAG
    HEADER.pack_into(out, 0, key.transfer, index)
    aad = _AAD.pack(key.transfer, index, key.length)
    aead.encrypt_into(_nonce(index), piece, aad, out[HEADER.size : end])
    return out[:end]


def transfer_of(frame: memoryview) -> bytes | None:
    """The transfer id a data-connection frame names, or None for one too short to be a chunk."""
    if frame.nbytes < HEADER.size + TAG:
        return None
    return bytes(frame[:16])


class Inbound:
    """One transfer being received: chunks are opened into one buffer as they come, from
    whichever thread has them; ``wait`` returns the buffer once every chunk is in."""

    def __init__(self, key: TransferKey, clock: Callable[[], float] = time.monotonic) -> None:
        self.key = key
        self._aead = AESGCM(key.key)
        self._clock = clock
        self._lock = threading.Lock()
        self._have = bytearray(key.chunks)
        self._left = key.chunks
        self._done = threading.Event()
        self.buffer = fresh_buffer(key.length)
        self.refused = 0
        self.last = clock()

    def open(self, frame: memoryview) -> bool:
        """Place one chunk; False (and counted in ``refused``) for one that is refused."""
        key = self.key
        if frame.nbytes < HEADER.size + TAG:
            return self._refuse()
        transfer, index = HEADER.unpack_from(frame)
        if transfer != key.transfer or index >= key.chunks:
            return self._refuse()
        start = index * key.chunk
        size = min(key.chunk, key.length - start)
        if frame.nbytes != HEADER.size + size + TAG:
            return self._refuse()
        with self._lock:
            replayed = self._have[index] != 0  # already in place, or being opened
            self._have[index] = self._have[index] or 2  # 2: being opened, a second copy is refused
        if replayed:
            return self._refuse()
        try:
            aad = _AAD.pack(key.transfer, index, key.length)
            self._aead.decrypt_into(_nonce(index), frame[HEADER.size :], aad, self.buffer[start : start + size])
        except InvalidTag:
            with self._lock:
                self._have[index] = 0  # the real chunk may still come
            return self._refuse()
        with self._lock:
            self._have[index] = 1
            self._left -= 1
            self.last = self._clock()
            if self._left == 0:
                self._done.set()
        return True

    def _refuse(self) -> bool:
        with self._lock:
            self.refused += 1
        return False

    @property
    def complete(self) -> bool:
        return self._done.is_set()

    def wait(self, stall: float = STALL, step: float = 0.5, gone: Callable[[], bool] | None = None) -> memoryview:
        """The whole buffer; raises ``TimeoutError`` when no chunk came for ``stall`` seconds,
        and ``SenderGone`` as soon as ``gone()`` (asked every ``step`` seconds) says so."""
        while not self._done.wait(step):
            if gone is not None and gone():
                raise SenderGone(f"the sender of a transfer of {self.key.length} bytes went away")
            if self._clock() - self.last > stall:
                missing = self._left
                raise TimeoutError(
                    f"a large buffer sent on the data connection stalled: {missing} of its "
                    f"{self.key.chunks} chunks did not arrive within {stall:g} s"
                )
        return self.buffer
