"""Large buffers across machines, as a run of chunks.

Across machines every connection is CURVE-encrypted (``skyward.transport.security``),
and libzmq's CURVE seals and opens each frame whole, in the socket's I/O thread: a
256 MB buffer sent as one frame is copied and encrypted in full before its first byte
reaches the wire, then received in full before the peer can begin to decrypt it, so
the two ends' I/O threads take turns and the round trip pays both ends' work one after
the other. Cut into chunks (``BULK_CHUNK`` bytes each, each sent as a message of its own
after its message: ``skyward.transport.chunked``), the sender's I/O thread seals chunk
k+1 while the wire carries chunk k and the receiver's I/O thread opens chunk k-1: the
two ends work at once, and each chunk is small enough to stay in the CPU's cache between
its copy and its encryption.

On the CURVE connection the chunks are frames like any other, each sealed by CURVE
(XSalsa20-Poly1305, one nonce per frame, which libzmq requires to increase: a tampered,
replayed, reordered or dropped chunk breaks the connection, and the message never
arrives), and a peer without the pool's keys never completes the handshake. The
receiver puts the chunks back together in one buffer as they arrive (one copy, into
memory of its own: the unpickled array is writable and outlives the frames).

Measured on the 2-core development machine under load from other work, a 64 MB
round trip over tcp loopback with CURVE (raw pyzmq, same run): one frame 0.06 GB/s,
1 MiB chunks 0.12 GB/s. The cipher then bounds chunked CURVE (libsodium's
XSalsa20-Poly1305 at about 1.6 GB/s a core here), so once a worker's data connection
works, the same chunks go there instead, sealed with AES-256-GCM
(``skyward.transport.sealed``: about 2.4x chunked CURVE for 256 MB, raw pyzmq), and
chunked CURVE remains the path until then. Ipc links (one machine, no CURVE) never
chunk: there the whole frame is already zero-copy and the reassembly would only add a
copy.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BULK_CHUNK", "BULK_MIN", "BulkFrames", "join_chunks"]

BULK_CHUNK = 1024 * 1024
"""Bytes per chunk frame. Smaller chunks overlap the two ends more finely and stay in
cache, larger ones cost fewer frames (about 10 us each in pyzmq): 64 MB round trips
(raw pyzmq, CURVE, same run) were within noise of each other from 128 KiB to 2 MiB and
all about twice the single frame; 4 MiB chunks lost most of the gain."""

BULK_MIN = 4 * BULK_CHUNK
"""Buffers of at least this many bytes are chunked. Below it the overlap has too few
chunks to pay for the receiver's copy back into one buffer."""


@dataclass(frozen=True, slots=True)
class BulkFrames:
    """How a link cuts its large buffers: buffers of ``threshold`` bytes or more travel
    as frames of ``chunk`` bytes (the last one shorter). A link that encrypts with CURVE
    (tcp) holds one; an ipc link holds none."""

    threshold: int = BULK_MIN
    chunk: int = BULK_CHUNK

    def __post_init__(self) -> None:
        if isinstance(self.chunk, bool) or not isinstance(self.chunk, int) or self.chunk < 1:
            raise ValueError(f"BulkFrames(chunk={self.chunk!r}): the chunk size is an int of bytes >= 1")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or self.threshold < self.chunk:
            raise ValueError(
                f"BulkFrames(threshold={self.threshold!r}): chunk buffers of at least one chunk "
                f"({self.chunk} bytes): use a threshold >= chunk"
            )

    def wants(self, size: int) -> bool:
        return size >= self.threshold

    def split(self, buffer: Any) -> list[memoryview]:
        """``buffer`` as views of at most ``chunk`` bytes each, in order (no copy)."""
        view = memoryview(buffer).cast("B")
        step = self.chunk
        return [view[offset : offset + step] for offset in range(0, view.nbytes, step)]


def fresh_buffer(size: int) -> memoryview:
    """A writable buffer of ``size`` bytes for joined chunks: private anonymous memory
    asking for huge pages where Linux offers them. Writing 256 MiB of 1 MiB chunks into
    it ran at 3.2-3.5 GB/s on the development machine, into a ``bytearray`` (which zeroes
    its memory first, 4 KiB page by page) at 1.2 GB/s: a quarter of a whole round trip
    under CURVE went to that copy. The memory lives as long as the view (the unpickled
    array that uses it)."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    mapping = mmap.mmap(-1, max(size, 1), flags=flags)
    if _HUGE_PAGES is not None:
        try:
            mapping.madvise(_HUGE_PAGES)
        except OSError:
            pass  # no transparent huge pages here: ordinary pages, as a bytearray has
    return memoryview(mapping)[:size]


_HUGE_PAGES: int | None = getattr(mmap, "MADV_HUGEPAGE", None)  # Linux only


def join_chunks(chunks: Sequence[Any], total: int) -> memoryview:
    """The chunks (``zmq.Frame`` objects, bytes or views) copied back into one writable
    buffer of ``total`` bytes (``fresh_buffer``). Raises ``ValueError`` when they do not
    add up to ``total`` (a message whose table does not match its frames)."""
    if sum(memoryview(c.buffer if hasattr(c, "buffer") else c).nbytes for c in chunks) != total:
        raise ValueError(f"chunks that do not add up to the {total} bytes their table announced")
    view = fresh_buffer(total)
    offset = 0
    for chunk in chunks:
        piece = memoryview(chunk.buffer if hasattr(chunk, "buffer") else chunk).cast("B")
        end = offset + piece.nbytes
        view[offset:end] = piece
        offset = end
    return view
