"""Worker processes as the supervisor sees them: spawn, output pipes, death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field

from skyward.agent.output import OutputBuffer


def describe_exit(returncode: int) -> str:
    """A person-readable cause of death: 'killed by SIGKILL (possibly out of memory)'."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (possibly out of memory: the kernel's OOM killer sends SIGKILL)"
        return f"killed by {name}" + (hint if name == "SIGKILL" else "")
    return f"exited with status {returncode}"


@dataclass
class WorkerProcess:
    index: int
    process: subprocess.Popen[bytes]
    outputs: dict[int, tuple[str, OutputBuffer]] = field(default_factory=dict)
    ready: bool = False
    endpoint: str | None = None

    @staticmethod
    def spawn(index: int, config: dict[str, object], env: dict[str, str]) -> WorkerProcess:
        """Start a worker; its config (keys included) goes through stdin, not the environment."""
        child_env = dict(env)
        child_env["PYTHONUNBUFFERED"] = "1"
        process = subprocess.Popen(
            [sys.executable, "-m", "skyward.agent.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
        )
        assert process.stdin is not None
        process.stdin.write(json.dumps(config).encode() + b"\n")
        process.stdin.close()
        handle = WorkerProcess(index, process)
        for stream_name, pipe in (("stdout", process.stdout), ("stderr", process.stderr)):
            assert pipe is not None
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            handle.outputs[fd] = (stream_name, OutputBuffer())
        return handle

    def read(self, fd: int, now: float = 0.0) -> tuple[str, list[str], bool]:
        """Read what is available on one of its pipes: (stream, lines, reached EOF)."""
        stream, buffer = self.outputs[fd]
        chunks: list[bytes] = []
        eof = False
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not data:
                eof = True
                break
            chunks.append(data)
        lines: list[str] = []
        for chunk in chunks:
            lines += buffer.feed(chunk, now)
        if eof:
            lines += buffer.flush()
        return stream, lines, eof

    def due(self, now: float) -> list[tuple[str, list[str]]]:
        """Per stream, the text that has waited long enough for a line end."""
        return [(stream, lines) for stream, buffer in self.outputs.values() if (lines := buffer.due(now))]

    def close_pipes(self) -> None:
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        self.outputs.clear()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            try:
                self.process.send_signal(sig)
            except ProcessLookupError:
                pass
