"""Large buffers through POSIX shared memory between a Local pool's client and workers.

On a Local pool the client and every worker run on this machine as this user, so a large
buffer need not be copied into a socket and back out of it: the sender writes it once
into a segment in ``/dev/shm``, and the message carries only the segment's name and
length; the receiver maps it (no copy) and unpickling gets a view of the mapping
(pickle 5 ``buffers=``). Cloud pools never use it: whether a pool does is
``shared_memory_applies``, a pure function of the provider.

Lifetime rule: a segment is ``/dev/shm/skyward-<pool id>-<random>``, mode 0600. The
sender creates it, writes it, closes it and passes its name in the message: from then on
it belongs to the receiver, which maps it and unlinks the name at once (Linux keeps the
mapping valid); the memory is freed when the last view of it (the unpickled array) is
gone. A segment whose message is never read (its receiver died first, or a send failed)
keeps its name until the pool closes (``remove_pool_segments``, in the Local provider's
teardown), or, when the client was killed, until the next Local pool's start sweeps the
run directories of dead clients and removes their pools' segments with them.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHM_DIR = Path("/dev/shm")
SEGMENT_PREFIX = "skyward-"

SHM_MIN = 32 * 1024 * 1024
"""Buffers of at least this many bytes travel through shared memory. A segment's cost is
the kernel allocating its pages in /dev/shm (the writer's copy into fresh tmpfs pages,
then the reader's map of them): about 1.5 GB/s on the 2-core development machine,
whatever the size. The socket path reuses malloc'd memory up to glibc's mmap threshold
(32 MiB) and is faster below it: ``echo(a) >> pool`` round trips over ipc, alternating
(bench/shm.py), were 0.51x (4 MiB), 0.44x (16 MiB), 1.02x (32 MiB), 1.32x (64 MiB) and
1.40x (256 MiB) through shared memory against the socket, so the segment starts at 32 MiB."""

FREE_MARGIN = 64 * 1024 * 1024
"""Bytes left free in /dev/shm after a segment: a buffer that would leave less goes by
the socket instead, so the pool never fills the machine's shared memory to the brim."""

_REF = struct.Struct("!Q")  # the length; the name follows (ASCII)
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


def encode_ref(name: str, length: int) -> bytes:
    """The part that replaces a buffer in a message: its length and segment name (never pickle)."""
    return _REF.pack(length) + name.encode("ascii")


def decode_ref(raw: Any) -> tuple[str, int]:
    data = bytes(raw)
    if len(data) <= _REF.size:
        raise ValueError("a shared-memory reference without a segment name")
    (length,) = _REF.unpack_from(data)
    return data[_REF.size :].decode("ascii"), length


def room_for(size: int, free: int, margin: int = FREE_MARGIN) -> bool:
    """Whether a buffer of ``size`` bytes fits in shared memory with ``free`` bytes free,
    leaving ``margin`` (pure)."""
    return size + margin <= free


def shm_free_space(directory: Path = SHM_DIR) -> int:
    info = os.statvfs(directory)
    return info.f_bavail * info.f_frsize


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _nbytes(buffer: Any) -> int:
    return buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)


@dataclass
class SharedMemory:
    """One process's side of a pool's shared memory: ``put`` writes a buffer into a new
    segment and returns the reference to send in its place (None: send the buffer itself);
    ``take`` maps a received reference. ``free_space`` and ``warn`` are seams (tests pass
    their own); ``directory`` is /dev/shm."""

    pool_id: str
    threshold: int = SHM_MIN
    directory: Path = SHM_DIR
    free_space: Callable[[], int] | None = None
    warn: Callable[[str], None] = _stderr_line
    _warned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.pool_id or "/" in self.pool_id:
            raise ValueError(f"SharedMemory(pool_id={self.pool_id!r}): a pool id without '/'")

    def wants(self, size: int) -> bool:
        return size >= self.threshold

    def put(self, buffer: Any) -> bytes | None:
        """The reference of a new segment holding ``buffer``, or None (with one line on
        stderr per reason, per process) when it cannot go through shared memory."""
        size = _nbytes(buffer)
        try:
            free = self.free_space() if self.free_space is not None else shm_free_space(self.directory)
        except OSError as error:
            self._fall_back("statvfs", f"cannot read the free space of {self.directory} ({error})")
            return None
        if not room_for(size, free):
            self._fall_back(
                "space",
                f"{self.directory} has {free // 2**20} MiB free, too little for a {size // 2**20} MiB buffer "
                f"and a {FREE_MARGIN // 2**20} MiB margin (grow it, e.g. docker --shm-size)",
            )
            return None
        name = segment_name(self.pool_id, os.urandom(8).hex())  # secrets.token_hex's own way, without importing hmac
        path = self.directory / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            self._fall_back("create", f"cannot create a segment in {self.directory} ({error})")
            return None
        try:
            view = memoryview(buffer).cast("B")
            offset = 0
            while offset < size:
                offset += os.write(fd, view[offset : offset + _WRITE_MAX])
        except OSError as error:
            os.close(fd)
            _unlink(path)
            self._fall_back("write", f"cannot write a {size // 2**20} MiB segment in {self.directory} ({error})")
            return None
        os.close(fd)
        return encode_ref(name, size)

    def take(self, raw: Any) -> memoryview:
        """A writable view of the segment ``raw`` names (a map of it, no copy), its name
        unlinked: the segment now lives as long as the view. Refuses a name that is not
        this pool's, and a file that is not this user's 0600 regular file of that length."""
        name, length = decode_ref(raw)
        if pool_of(name) != self.pool_id:
            raise ValueError(f"a shared-memory reference to {name!r}, not a segment of pool {self.pool_id}")
        path = self.directory / name
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or info.st_mode & 0o077
                or info.st_size != length
            ):
                raise ValueError(f"shared-memory segment {name!r} is not this user's 0600 segment of {length} bytes")
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mapping = mmap.mmap(fd, length, flags=flags)
        finally:
            os.close(fd)
            _unlink(path)
        return memoryview(mapping)

    def discard(self, refs: Iterable[Any]) -> None:
        """Remove segments written for a message that was not sent."""
        for raw in refs:
            name, _ = decode_ref(raw)
            if pool_of(name) == self.pool_id:
                _unlink(self.directory / name)

    def _fall_back(self, reason: str, why: str) -> None:
        if reason not in self._warned:
            self._warned.add(reason)
            self.warn(f"skyward: a large buffer goes through the socket, not shared memory: {why}")


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def pool_segments(pool_id: str, directory: Path = SHM_DIR) -> list[Path]:
    """This user's segments of pool ``pool_id`` under ``directory``."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    uid = os.getuid()
    found = []
    for entry in entries:
        if pool_of(entry.name) != pool_id:
            continue
        try:
            if entry.lstat().st_uid == uid:
                found.append(entry)
        except OSError:
            continue
    return found


def remove_pool_segments(pool_id: str, directory: Path = SHM_DIR) -> list[Path]:
    """Remove every segment of pool ``pool_id`` (its close, or a dead client's sweep)."""
    removed = pool_segments(pool_id, directory)
    for path in removed:
        _unlink(path)
    return removed
