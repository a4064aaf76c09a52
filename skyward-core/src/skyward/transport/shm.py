"""Large buffers through POSIX shared memory between a Local pool's client and workers.

On a Local pool the client and every worker run on this machine as this user, so a large
buffer need not be copied into a socket and back out of it: the sender copies it into a
segment in ``/dev/shm``, and the message carries only the segment's name, the length and
a generation; the receiver maps it (no copy) and unpickling gets a view of the mapping
(pickle 5 ``buffers=``). Cloud pools never use it: whether a pool does is
``shared_memory_applies``, a pure function of the provider.

Segments are reused. What a fresh segment costs is the kernel allocating and zeroing its
pages (and freeing them after): writing 256 MiB into a new tmpfs file took 113 ms on the
2-core development machine, copying it into a segment already mapped 28 ms, and mapping
an existing one 15 ms (Ray's object store reuses its memory the same way). A 256 MB
``echo(a) >> pool`` went from 1.9 GB/s to 6.4 GB/s, Ray's 9.6-10.7 in the same run
(``bench/run.py --full --only bandwidth``). So each process keeps the
segments it wrote, mapped, and writes the next large buffer into one whose receiver is
done with it.

A segment is ``/dev/shm/skyward-<pool id>-<random>``, mode 0600: one page of state, then
the data. The state is two counters, each with one writer: the sender's ``sent`` (bumped
before each message that names the segment) and the receiver's ``released`` (set to that
generation once the receiver's last view of the data is gone: a finalizer on its
mapping, which every view, slice and array built on it keeps alive). The sender reuses a
segment only when ``released == sent``, so a buffer still read is never overwritten; a
reference whose generation is not the segment's ``sent`` is refused. A receiver that
dies holding a view leaves its segment busy, which costs memory until the pool closes,
never data.

Lifetime: the sender owns its segments. It keeps the free ones it may reuse (at most
``KEEP_FREE`` bytes besides the one just written, none idle for more than ``KEEP_IDLE``
seconds: checked at each large send) and removes the rest. A worker that leaves a pool
that goes on (scaled down, restarted) removes its segments as it exits, but for those
still read: their receivers remove them as they release them. Every segment of a pool goes
when the pool closes (``remove_pool_segments``, in the Local provider's teardown; the
client unmaps its own, ``SharedMemory.close``), or, when the client was killed, when the
next Local pool's start sweeps the run directories of dead clients and removes their
pools' segments with them. An array the client received stays valid after its pool
closes: its mapping outlives the name.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

StrPath: TypeAlias = "str | os.PathLike[str]"
"""A directory as a string or a path object. Paths here are plain strings: importing
pathlib costs a node's agent ~5 ms of its start, and this module is on that path."""

SHM_DIR = "/dev/shm"
SEGMENT_PREFIX = "skyward-"

SHM_MIN = 32 * 1024 * 1024
"""Buffers of at least this many bytes travel through shared memory. Below it the socket
path, which reuses malloc'd memory up to glibc's mmap threshold (32 MiB), is as fast:
``echo(a) >> pool`` round trips over ipc through reused segments against the socket,
alternating (bench/shm.py with this threshold at 1 MiB, 7 rounds), were 0.71x (1 MiB),
1.00x (4 MiB), 0.92x (16 MiB), 1.52x (32 MiB) and 2.90x (64 MiB); through fresh segments,
before they were reused, 0.44x at 16 MiB and 1.02x at 32 MiB."""

FREE_MARGIN = 64 * 1024 * 1024
"""Bytes left free in /dev/shm after a segment: a buffer that would leave less goes by
the socket instead, so the pool never fills the machine's shared memory to the brim."""

KEEP_FREE = 1024 * 1024 * 1024
"""Bytes of free segments (besides the one just written) a process keeps for reuse."""

KEEP_IDLE = 60.0
"""Seconds a free segment is kept unused before the next large send removes it."""

STATE_SIZE = max(mmap.PAGESIZE, mmap.ALLOCATIONGRANULARITY)
"""The segment's state page: the data starts at the next page, so a receiver maps the data alone."""

CAPACITY_STEP = 2 * 1024 * 1024
"""A new segment's data capacity is the buffer's size rounded up to this, so buffers of
nearly the same size reuse one segment."""

_SENT = struct.Struct("=Q")  # at offset 0 of the state page: the sender's generation
_RELEASED_AT = 8  # the receiver's generation (the same layout)
_ORPHANED_AT = 16  # 1 once the sender closed: the receiver removes the segment when it releases it
_REF = struct.Struct("!QQ")  # the length and the generation; the name follows (ASCII)
_WRITE_MAX = 1 << 30  # per write() call: Linux moves at most 0x7ffff000 bytes per call
_NAME_TAIL = re.compile(r"[A-Za-z0-9_]{8,64}")


def shared_memory_applies(provider: str, transport: str) -> bool:
    """Whether a pool's large buffers go through shared memory: only on the Local
    provider (its nodes are processes of this machine, run by this user), over ipc or
    tcp alike; never for a cloud provider, whatever its transport (its nodes are other
    machines, even when a test emulates them on this one)."""
    return provider == "local" and transport in ("ipc", "tcp")


def segment_name(pool_id: str, token: str) -> str:
    return f"{SEGMENT_PREFIX}{pool_id}-{token}"


def pool_of(name: str) -> str | None:
    """The pool id a segment name carries (``skyward-<pool id>-<random>``), or None when
    it is not one of ours."""
    if not name.startswith(SEGMENT_PREFIX):
        return None
    pool, _, tail = name[len(SEGMENT_PREFIX) :].rpartition("-")
    if not pool or _NAME_TAIL.fullmatch(tail) is None:
        return None
    return pool


def encode_ref(name: str, length: int, generation: int) -> bytes:
    """The part that replaces a buffer in a message: its length, the segment's generation
    and name (never pickle)."""
    return _REF.pack(length, generation) + name.encode("ascii")


def decode_ref(raw: Any) -> tuple[str, int, int]:
    """(name, length, generation) of a reference."""
    data = bytes(raw)
    if len(data) <= _REF.size:
        raise ValueError("a shared-memory reference without a segment name")
    length, generation = _REF.unpack_from(data)
    return data[_REF.size :].decode("ascii"), length, generation


def room_for(size: int, free: int, margin: int = FREE_MARGIN) -> bool:
    """Whether a buffer of ``size`` bytes fits in shared memory with ``free`` bytes free,
    leaving ``margin`` (pure)."""
    return size + margin <= free


def capacity_for(size: int) -> int:
    """The data capacity of a new segment for a buffer of ``size`` bytes (pure)."""
    return -(-max(size, 1) // CAPACITY_STEP) * CAPACITY_STEP


def fits(capacity: int, size: int) -> bool:
    """Whether a free segment of ``capacity`` takes a buffer of ``size``: large enough, and
    at most twice what a new one would be, so a small buffer never holds a large segment
    that the next large buffer then has to make again (pure)."""
    return size <= capacity <= 2 * capacity_for(size)


def to_trim(free: Iterable[tuple[int, float]], now: float, keep: int = KEEP_FREE, idle: float = KEEP_IDLE) -> list[int]:
    """Which of the free segments ``(capacity, last used)`` to remove (their positions):
    those idle longer than ``idle``, and, the most recently used first, those past ``keep``
    bytes (pure)."""
    entries = sorted(enumerate(free), key=lambda entry: entry[1][1], reverse=True)
    kept = 0
    gone = []
    for position, (capacity, used) in entries:
        if now - used > idle or kept + capacity > keep:
            gone.append(position)
        else:
            kept += capacity
    return sorted(gone)


def shm_free_space(directory: StrPath = SHM_DIR) -> int:
    info = os.statvfs(directory)
    return info.f_bavail * info.f_frsize


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _nbytes(buffer: Any) -> int:
    return buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)


@dataclass
class _Segment:
    """A segment this process wrote, mapped here whole (state page and data)."""

    path: str
    capacity: int
    mapping: mmap.mmap
    sent: int = 0
    used: float = 0.0

    def free(self) -> bool:
        (released,) = _SENT.unpack_from(self.mapping, _RELEASED_AT)
        return bool(released == self.sent)

    def close(self) -> None:
        """Unmap and remove the segment, or, while a receiver may still read it, leave
        the removal to that receiver (marked orphaned, then looked at again: whichever
        of the two sees the other's mark last removes it)."""
        if not self.free():
            _SENT.pack_into(self.mapping, _ORPHANED_AT, 1)
        if self.free():
            _unlink(self.path)
        try:
            self.mapping.close()
        except BufferError:  # a copy into it is under way in another thread: the unmap waits for the process
            pass


@dataclass
class SharedMemory:
    """One process's side of a pool's shared memory: ``put`` copies a buffer into a free
    segment of its own (or a new one) and returns the reference to send in its place
    (None: send the buffer itself); ``take`` maps a received reference. ``free_space``,
    ``warn`` and ``clock`` are seams (tests pass their own); ``directory`` is /dev/shm.
    Safe to call from several threads."""

    pool_id: str
    threshold: int = SHM_MIN
    directory: StrPath = SHM_DIR
    free_space: Callable[[], int] | None = None
    warn: Callable[[str], None] = _stderr_line
    clock: Callable[[], float] = time.monotonic
    _warned: set[str] = field(default_factory=set)
    _segments: list[_Segment] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pid: int = field(default_factory=os.getpid)
    _closed: bool = False

    def __post_init__(self) -> None:
        if not self.pool_id or "/" in self.pool_id:
            raise ValueError(f"SharedMemory(pool_id={self.pool_id!r}): a pool id without '/'")

    def wants(self, size: int) -> bool:
        return size >= self.threshold

    @property
    def holds_segments(self) -> bool:
        """Whether this process has segments of its own now."""
        return bool(self._segments)

    def put(self, buffer: Any) -> bytes | None:
        """The reference of a segment now holding ``buffer``, or None (with one line on
        stderr per reason, per process) when it cannot go through shared memory."""
        size = _nbytes(buffer)
        view = memoryview(buffer).cast("B")
        with self._lock:
            if self._closed:
                return None
            if self._pid != os.getpid():  # a forked child: its parent's segments are not its own to reuse
                self._segments, self._pid = [], os.getpid()
            usable = (s for s in self._segments if fits(s.capacity, size) and s.free())
            segment = min(usable, key=_by_capacity, default=None)  # the smallest that fits
            if segment is not None:
                segment.mapping[STATE_SIZE : STATE_SIZE + size] = view
            else:
                segment = self._create(size, view)
                if segment is None:
                    return None
                self._segments.append(segment)
            segment.sent += 1
            segment.used = self.clock()
            _SENT.pack_into(segment.mapping, 0, segment.sent)
            self._trim(keep=segment)
            return encode_ref(os.path.basename(segment.path), size, segment.sent)

    def _create(self, size: int, view: memoryview) -> _Segment | None:
        capacity = capacity_for(size)
        try:
            free = self.free_space() if self.free_space is not None else shm_free_space(self.directory)
        except OSError as error:
            self._fall_back("statvfs", f"cannot read the free space of {self.directory} ({error})")
            return None
        if not room_for(capacity, free):
            reclaimable = sum(s.capacity for s in self._segments if s.free())
            if reclaimable and room_for(capacity, free + reclaimable):
                self._remove(lambda s: s.free())
            else:
                self._fall_back(
                    "space",
                    f"{self.directory} has {free // 2**20} MiB free, too little for a {size // 2**20} MiB buffer "
                    f"and a {FREE_MARGIN // 2**20} MiB margin (grow it, e.g. docker --shm-size)",
                )
                return None
        path = os.path.join(self.directory, segment_name(self.pool_id, os.urandom(8).hex()))  # token_hex without hmac
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            self._fall_back("create", f"cannot create a segment in {self.directory} ({error})")
            return None
        try:
            # write() into new tmpfs pages is the fast way to fill them (113 ms for 256 MiB,
            # against 280 ms to fault them in through a mapping), and it releases the GIL
            os.ftruncate(fd, STATE_SIZE + capacity)
            offset = 0
            while offset < size:
                offset += os.pwrite(fd, view[offset : offset + _WRITE_MAX], STATE_SIZE + offset)
            mapping = mmap.mmap(fd, STATE_SIZE + capacity, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0))
        except OSError as error:
            _unlink(path)
            self._fall_back("write", f"cannot write a {size // 2**20} MiB segment in {self.directory} ({error})")
            return None
        finally:
            os.close(fd)
        return _Segment(path, capacity, mapping)

    def _trim(self, keep: _Segment) -> None:
        free = [s for s in self._segments if s is not keep and s.free()]
        gone = {id(free[i]) for i in to_trim([(s.capacity, s.used) for s in free], self.clock())}
        if gone:
            self._remove(lambda s: id(s) in gone)

    def _remove(self, which: Callable[[_Segment], bool]) -> None:
        kept = []
        for segment in self._segments:
            if which(segment):
                segment.close()  # a free one: removed at once
            else:
                kept.append(segment)
        self._segments = kept

    def take(self, raw: Any) -> memoryview:
        """A writable view of the data of the segment ``raw`` names (a map of it, no
        copy). When the last view of it is gone, the segment is marked released for its
        sender to reuse. Refuses a name that is not this pool's, a file that is not this
        user's 0600 regular file large enough, and a generation that is not the
        segment's."""
        name, length, generation = decode_ref(raw)
        if pool_of(name) != self.pool_id:
            raise ValueError(f"a shared-memory reference to {name!r}, not a segment of pool {self.pool_id}")
        path = os.path.join(self.directory, name)
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or info.st_mode & 0o077
                or info.st_size < STATE_SIZE + length
            ):
                raise ValueError(f"shared-memory segment {name!r} is not this user's 0600 segment of {length} bytes")
            (sent,) = _SENT.unpack(os.pread(fd, _SENT.size, 0))
            if sent != generation:
                raise ValueError(f"shared-memory segment {name!r} holds generation {sent}, not the {generation} sent")
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mapping = mmap.mmap(fd, length, flags=flags, offset=STATE_SIZE)
        finally:
            os.close(fd)
        weakref.finalize(mapping, _release, path, generation).atexit = False
        return memoryview(mapping)

    def discard(self, refs: Iterable[Any]) -> None:
        """Free the segments written for a message that was not sent."""
        with self._lock:
            for raw in refs:
                name, _, generation = decode_ref(raw)
                for segment in self._segments:
                    if os.path.basename(segment.path) == name and segment.sent == generation:
                        _SENT.pack_into(segment.mapping, _RELEASED_AT, generation)

    def close(self, blocking: bool = True) -> None:
        """Unmap and remove this process's segments (its pool is closing, or this worker
        is leaving it). One whose message a receiver has not released yet stays until it
        does (the receiver removes it then) or the pool closes; what a receiver maps
        stays readable, as a mapping outlives its name. ``blocking=False`` (a signal
        handler, which may have interrupted a ``put`` of this thread) does nothing when
        the segments are in use."""
        if not self._lock.acquire(blocking):
            return
        try:
            self._closed = True
            self._remove(lambda s: True)
        finally:
            self._lock.release()

    def _fall_back(self, reason: str, why: str) -> None:
        if reason not in self._warned:
            self._warned.add(reason)
            self.warn(f"skyward: a large buffer goes through the socket, not shared memory: {why}")


def _by_capacity(segment: _Segment) -> int:
    return segment.capacity


def _release(path: str, generation: int) -> None:
    """Tell a segment's sender that its receiver is done with ``generation`` (the last
    view of the data is gone), and remove the segment if its sender has closed.
    Nothing to tell when the segment is gone already."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.pwrite(fd, _SENT.pack(generation), _RELEASED_AT)
        (orphaned,) = _SENT.unpack(os.pread(fd, _SENT.size, _ORPHANED_AT))
        if orphaned:
            _unlink(path)
    except (OSError, struct.error):
        pass
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def pool_segments(pool_id: str, directory: StrPath = SHM_DIR) -> list[str]:
    """The paths of this user's segments of pool ``pool_id`` under ``directory``."""
    try:
        with os.scandir(directory) as scan:
            entries = [entry for entry in scan if pool_of(entry.name) == pool_id]
    except OSError:
        return []
    uid = os.getuid()
    found = []
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid == uid:
                found.append(entry.path)
        except OSError:
            continue
    return found


def remove_pool_segments(pool_id: str, directory: StrPath = SHM_DIR) -> list[str]:
    """Remove every segment of pool ``pool_id`` (its close, or a dead client's sweep)."""
    removed = pool_segments(pool_id, directory)
    for path in removed:
        _unlink(path)
    return removed
