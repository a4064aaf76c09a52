"""A node's content store of shipped files, and the working directory built from it.

Blobs live at ``$SKYWARD_HOME/files/blobs/<sha256>``, shared by every pool on the node
(on Local, by every node of the machine): a file another pool already sent is not sent
again. A blob arrives in chunks into a temporary name of its own, is hashed as it comes
and renamed into place only when its sha256 and size are the ones asked for, so a reader
never sees half a blob and two pools receiving one blob at once cannot mix their bytes.

The working directory is built by copying each blob (``shutil.copyfile``: the kernel's
``copy_file_range``, a reflink where the file system has them) with the manifest's mode,
not by hard-linking it: a link shares its inode, so a task that rewrote its file in
place would change the stored blob under its sha256 for every later pool, and a chmod
to the manifest's mode would change it for every other path of that content.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from skyward.files.manifest import Manifest

__all__ = ["BlobStore", "place"]


@dataclass(slots=True)
class _Incoming:
    path: Path
    size: int
    expected: int
    digest: hashlib._Hash


class BlobStore:
    """The blobs under ``root``, and those being received (one temporary file each)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._incoming: dict[str, _Incoming] = {}

    def path(self, sha: str) -> Path:
        return self.root / sha

    def missing(self, manifest: Manifest) -> list[str]:
        """The sha256s of the manifest's blobs this store lacks, in manifest order."""
        return [sha for sha in manifest.blobs() if not self.path(sha).is_file()]

    def receive(self, sha: str, expected: int, offset: int, data: bytes, end: bool) -> str | None:
        """Take one chunk of blob ``sha`` (``expected`` bytes in all); on the last, check
        and store it. Returns why it was refused (the partial blob is dropped), or None."""
        incoming = self._incoming.get(sha)
        if incoming is None:
            if offset != 0:
                return f"blob {sha[:16]}... began at offset {offset}, not 0"
            self.root.mkdir(parents=True, exist_ok=True)
            temp = self.root / f".{sha}.{os.getpid()}.{os.urandom(4).hex()}.part"
            temp.touch(mode=0o600)
            incoming = self._incoming[sha] = _Incoming(temp, 0, expected, hashlib.sha256())
        if offset != incoming.size or incoming.size + len(data) > incoming.expected:
            self.drop(sha)
            return f"blob {sha[:16]}...: a chunk at offset {offset} does not follow the {incoming.size} bytes received"
        with open(incoming.path, "ab") as f:
            f.write(data)
        incoming.digest.update(data)
        incoming.size += len(data)
        if not end:
            return None
        del self._incoming[sha]
        got = incoming.digest.hexdigest()
        if got != sha or incoming.size != incoming.expected:
            incoming.path.unlink(missing_ok=True)
            return (
                f"blob {sha[:16]}... arrived as {incoming.size} bytes with sha256 {got[:16]}...: "
                "not the content the manifest names; refused"
            )
        os.chmod(incoming.path, 0o444)
        os.replace(incoming.path, self.path(sha))
        return None

    def drop(self, sha: str | None = None) -> None:
        """Forget a blob being received (every one when ``sha`` is None)."""
        for key in [sha] if sha is not None else list(self._incoming):
            incoming = self._incoming.pop(key, None)
            if incoming is not None:
                incoming.path.unlink(missing_ok=True)


def place(manifest: Manifest, store: BlobStore, directory: Path) -> None:
    """Build ``directory`` afresh from the store: every file of the manifest, with its
    mode. Raises ``OSError`` (a blob missing, a full disk) and leaves no half tree."""
    building = directory.with_name(directory.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True, mode=0o700)
    try:
        for entry in manifest.entries:
            target = building / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(store.path(entry.sha256), target)
            os.chmod(target, entry.mode)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(building, directory)
