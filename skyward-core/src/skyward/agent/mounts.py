"""A node's ``sky.Volume``s: mounted (or downloaded) once the pool sent their keys, then
unmounted (or uploaded) when the node stops.

The keys arrive in the CLUSTER message, on the pool's encrypted channel, and go to rclone
as its config on its stdin, an in-memory file (``memfd``; ``--config /dev/stdin``): not
into a file on the node's disk, rclone's command line or its environment (it starts with
``PATH`` and ``HOME`` alone, so no variable of the node, a cloud's credentials among them,
steers it either). Where they do live: the agent's and rclone's memory, and that memfd
while rclone runs; a process of the node's user could read those through ``/proc``, as it
could any memory of its user's processes. That is the trust boundary: tasks run as the
node's user and are the pool owner's own code. The message's
``volumes`` part is the agent's alone: the workers get the CLUSTER message without it.

Work runs on a thread of its own (a download can take minutes) while the agent's loop
goes on answering pings; :attr:`Mounts.done` says when it ended and :attr:`Mounts.error`
why it failed.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

MOUNT_TIMEOUT = 60.0
"""Seconds a FUSE mount may take to appear (rclone mounts in about a second; a store that
does not answer makes it wait for its own timeouts)."""
CLOSE_WAIT = 5.0
"""Seconds a stopping node waits for volumes still coming up before it kills their rclone."""
_REMOTE = "skyward"


def rclone_config(remote: Mapping[str, str]) -> str:
    """The one-section rclone config for a store (values never hold a newline: the
    client's validation refuses those)."""
    lines = [f"[{_REMOTE}]", *(f"{key} = {value}" for key, value in remote.items())]
    return "\n".join(lines) + "\n"


def _environment() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}


class Mounts:
    """The volumes of one node, from the CLUSTER message's ``volumes`` list."""

    def __init__(self, specs: Sequence[Mapping[str, object]], rclone: str = "rclone") -> None:
        self.specs = list(specs)
        self.rclone = shutil.which(rclone) or rclone
        self.done = threading.Event()
        self.error: str | None = None
        self._mounted: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._running: subprocess.Popen[bytes] | None = None  # the rclone started last

    def start(self) -> None:
        threading.Thread(target=self._bring_up, name="skyward-volumes", daemon=True).start()

    def _bring_up(self) -> None:
        try:
            for spec in self.specs:
                os.makedirs(str(spec["mount"]), exist_ok=True)
                if spec["mode"] == "sync":
                    self._copy(spec, down=True)
                else:
                    self._mount(spec)
        except Exception as error:  # whatever it was, the pool must hear of it (a silent thread would mean "ready")
            self.error = str(error) if isinstance(error, OSError | RuntimeError) else f"{type(error).__name__}: {error}"
        finally:
            self.done.set()

    def _source(self, spec: Mapping[str, object]) -> str:
        return f"{_REMOTE}:{spec['bucket']}/{spec['prefix']}"

    def _run(self, args: list[str], spec: Mapping[str, object]) -> subprocess.Popen[bytes]:
        """Start rclone with the store's config as its stdin: an in-memory file (memfd),
        since rclone seeks in its config and a pipe cannot seek."""
        remote = spec["remote"]
        assert isinstance(remote, dict)
        config = os.memfd_create("skyward-rclone-config", os.MFD_CLOEXEC)
        try:
            os.write(config, rclone_config(remote).encode())
            os.lseek(config, 0, os.SEEK_SET)
            process = subprocess.Popen(
                [self.rclone, *args, "--config", "/dev/stdin"],
                stdin=config, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_environment(),
            )  # fmt: skip
            self._running = process
            return process
        finally:
            os.close(config)

    def _copy(self, spec: Mapping[str, object], down: bool) -> None:
        source, target = self._source(spec), str(spec["mount"])
        args = ["copy", source, target] if down else ["copy", target, source]
        process = self._run(args, spec)
        _, err = process.communicate()
        if process.returncode != 0:
            direction = f"download {spec['where']} into {target}" if down else f"upload {target} to {spec['where']}"
            raise RuntimeError(f"could not {direction}: {_tail(err)}")

    def _mount(self, spec: Mapping[str, object]) -> None:
        path = str(spec["mount"])
        flags = ["--read-only"] if spec["read_only"] else ["--vfs-cache-mode", "writes", "--vfs-write-back", "0s"]
        process = self._run(["mount", self._source(spec), path, *flags], spec)
        lines = _drain(process.stderr)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(path):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                said = "; ".join(lines) or f"exited with status {process.returncode}"
                raise RuntimeError(f"could not mount {spec['where']} at {path}: {said}")
            time.sleep(0.05)
        self._mounted.append((path, process))

    def close(self) -> list[str]:
        """Upload what a writable synced volume holds, then unmount every mount; returns
        the problems met (the node is stopping: each is said, none stops the rest)."""
        if not self.done.wait(CLOSE_WAIT) and self._running is not None:
            self._running.kill()  # a download still going when the node stops: nobody will read it
            self.done.wait()
        problems: list[str] = []
        if self.error is None:
            for spec in self.specs:
                if spec["mode"] == "sync" and not spec["read_only"]:
                    try:
                        self._copy(spec, down=False)
                    except (OSError, RuntimeError) as error:
                        problems.append(str(error))
        for path, process in reversed(self._mounted):
            process.terminate()  # rclone unmounts on SIGTERM, after its pending uploads
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if os.path.ismount(path):
                subprocess.run(["fusermount3", "-uz", path], check=False, capture_output=True)
        self._mounted.clear()
        return problems


def _drain(stream: IO[bytes] | None) -> collections.deque[str]:
    """The last lines ``stream`` says, read on a thread (rclone mount runs on: nobody
    else reads its stderr, and a full pipe would stop it)."""
    lines: collections.deque[str] = collections.deque(maxlen=5)
    if stream is None:
        return lines

    def read() -> None:
        for raw in stream:
            text = raw.decode(errors="replace").strip()
            if text:
                lines.append(text)

    threading.Thread(target=read, name="skyward-rclone-stderr", daemon=True).start()
    return lines


def _tail(err: bytes | None) -> str:
    lines = [line.strip() for line in (err or b"").decode(errors="replace").splitlines() if line.strip()]
    return "; ".join(lines[-5:]) or "no output"
