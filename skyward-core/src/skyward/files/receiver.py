"""The agent's side of the file exchange (skyward.files; the messages in ``wire``).

The client sends FILES with the manifest; the agent answers with the sha256s its store
lacks. Each BLOB chunk is acknowledged (the client keeps a bounded number in flight, so
neither side holds more than a few MiB), checked and stored on its last chunk. PLACE
builds the working directory, and from then on the CLUSTER message the agent forwards
to its workers names it (``workdir``): each worker makes it its current directory and
puts it first on ``sys.path`` before its first task, so ``open("data/train.csv")`` and
``import my_module`` of a shipped file both work in a task, and a restarted worker does
the same. Every message is JSON or raw bytes, never a pickle: reading one cannot run code.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skyward.files.manifest import Manifest
from skyward.files.store import BlobStore, place
from skyward.transport import wire

__all__ = ["FileReceiver"]


class FileReceiver:
    """Answers the client's FILES, BLOB and PLACE for one agent."""

    def __init__(self, home: Path, workdir: Path) -> None:
        self.store = BlobStore(home / "files" / "blobs")
        self.workdir = workdir
        self.manifest: Manifest | None = None
        self.blobs: dict[str, int] = {}  # the manifest's sha256 -> size
        self.placed = False

    def handle(self, frames: Sequence[bytes]) -> list[bytes]:
        """The answer to one message (its frames after the client's identity)."""
        kind = bytes(frames[0])
        try:
            if kind == wire.FILES:
                self.manifest = Manifest.from_json(bytes(frames[1]))
                self.blobs = self.manifest.blobs()
                self.store.drop()
                return [wire.FILES, wire.encode_json({"need": self.store.missing(self.manifest)})]
            if kind == wire.BLOB:
                return [wire.BLOB, wire.encode_json(self._blob(wire.decode_json(frames[1]), bytes(frames[2])))]
            if kind == wire.PLACE:
                if self.manifest is None:
                    raise ValueError("PLACE before any manifest")
                place(self.manifest, self.store, self.workdir)
                self.placed = True
                return [wire.PLACE, wire.encode_json({"files": len(self.manifest.entries), "dir": str(self.workdir)})]
        except (ValueError, KeyError, IndexError, TypeError, OSError) as error:
            return [kind, wire.encode_json({"error": f"{type(error).__name__}: {error}"})]
        return [kind, wire.encode_json({"error": "unknown message"})]

    def _blob(self, head: dict[str, Any], data: bytes) -> dict[str, Any]:
        sha, offset, end = str(head["sha"]), int(head["offset"]), bool(head["end"])
        expected = self.blobs.get(sha)
        if expected is None:
            return {"sha": sha, "error": f"blob {sha[:16]}... is not in the manifest"}
        problem = self.store.receive(sha, expected, offset, data, end)
        if problem is not None:
            return {"sha": sha, "error": problem}
        return {"sha": sha, "offset": offset, "n": len(data)}

    def cluster(self, raw: bytes) -> bytes:
        """The CLUSTER message for the workers: the client's, with ``workdir`` once the
        files are in place."""
        if not self.placed:
            return raw
        payload = json.loads(raw)
        payload["workdir"] = str(self.workdir)
        return wire.encode_json(payload)

    def close(self) -> None:
        """Drop half-received blobs and the working directory (the store stays)."""
        self.store.drop()
        if self.placed:
            shutil.rmtree(self.workdir, ignore_errors=True)
