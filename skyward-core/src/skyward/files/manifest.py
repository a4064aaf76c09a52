"""The manifest of the files a pool ships: (path, sha256, size, mode) per file, sorted.

It is the whole protocol's subject: the client sends it, the node answers with the
sha256s its content store lacks, and builds the working directory from it. Its own
sha256 (``Manifest.sha256``) identifies the shipped tree, apart from the environment's
``Image.content_hash()``: a changed data file changes this, never the environment.

Reading it back on a node (``Manifest.from_json``) checks every path: relative, no
``..``, no empty or ``.`` component, so a manifest cannot write outside the directory it
is built in.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from skyward.errors import ConfigurationError

__all__ = ["CHUNK", "Entry", "Manifest", "build_manifest", "hash_file", "safe_path"]

CHUNK = 1024 * 1024
"""Bytes per read while hashing, and per frame on the wire: large files never sit whole
in memory, and a 1 MiB read already runs at the disk's speed."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def hash_file(path: Path) -> tuple[str, int]:
    """(sha256 hex, size) of a file, read in ``CHUNK`` pieces."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def safe_path(path: object) -> str | None:
    """Why ``path`` cannot be a manifest path (pure), or None: it must be a relative posix
    path of plain components."""
    if not isinstance(path, str) or not path:
        return "not a non-empty string"
    if "\x00" in path or "\\" in path:
        return "holds a NUL or a backslash"
    if path.startswith("/"):
        return "is absolute"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    return None


@dataclass(frozen=True, slots=True, order=True)
class Entry:
    """One file: its path relative to the working directory (posix), the sha256 and size
    of its bytes, and its permission bits."""

    path: str
    sha256: str
    size: int
    mode: int

    def __post_init__(self) -> None:
        problem = safe_path(self.path)
        if problem is not None:
            raise ValueError(f"manifest path {self.path!r} {problem}")
        if not isinstance(self.sha256, str) or not _SHA256.match(self.sha256):
            raise ValueError(f"manifest entry {self.path!r}: {self.sha256!r} is not a sha256")
        if not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"manifest entry {self.path!r}: size {self.size!r}")
        if not isinstance(self.mode, int) or not 0 <= self.mode <= 0o777:
            raise ValueError(f"manifest entry {self.path!r}: mode {self.mode!r}")


@dataclass(frozen=True, slots=True)
class Manifest:
    """The files to ship, sorted by path, each path once."""

    entries: tuple[Entry, ...] = ()

    def __post_init__(self) -> None:
        paths = [e.path for e in self.entries]
        if paths != sorted(set(paths)):
            raise ValueError("manifest entries must be sorted by path, each path once")
        # a file cannot also be a directory of another entry
        names = set(paths)
        for path in paths:
            parent = PurePosixPath(path).parent
            while str(parent) != ".":
                if str(parent) in names:
                    raise ValueError(f"manifest path {str(parent)!r} is both a file and a directory")
                parent = parent.parent

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def sha256(self) -> str:
        """The tree's identity: the sha256 of its canonical JSON."""
        return hashlib.sha256(self.to_json()).hexdigest()

    def blobs(self) -> dict[str, int]:
        """sha256 -> size of each distinct content (two files with one content: one blob)."""
        return {e.sha256: e.size for e in self.entries}

    def to_json(self) -> bytes:
        return json.dumps([[e.path, e.sha256, e.size, e.mode] for e in self.entries], separators=(",", ":")).encode()

    @staticmethod
    def from_json(raw: bytes) -> Manifest:
        """A manifest read back, every field checked (``ValueError`` when one is wrong)."""
        data = json.loads(raw)
        if not isinstance(data, list):
            raise ValueError("a manifest is a JSON list")
        entries = []
        for item in data:
            if not isinstance(item, list) or len(item) != 4:
                raise ValueError(f"a manifest entry is [path, sha256, size, mode], got {item!r}")
            entries.append(Entry(*item))
        return Manifest(tuple(entries))


def build_manifest(root: Path, paths: Sequence[str]) -> Manifest:
    """The manifest of ``paths`` (relative posix paths of regular files under ``root``).
    A path that turned into something else since it was found is refused by name."""
    entries = []
    for rel in sorted(set(paths)):
        full = root / rel
        info = os.lstat(full)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigurationError(f"Image(includes=...): {rel!r} under {root} is no longer a regular file")
        sha, size = hash_file(full)
        entries.append(Entry(rel, sha, size, stat.S_IMODE(info.st_mode) & 0o777))
    return Manifest(tuple(entries))
