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


PIPE_READ = 65536  # bytes per read: a Linux pipe's default capacity
MAX_READS_PER_TURN = 16
"""Reads of one pipe per turn of the supervisor's loop (1 MiB): the rest waits in the pipe,
where it holds the writing task back instead of growing the agent."""
MAX_READS_AT_EXIT = 1024
"""Reads of a dead worker's pipe before it is closed (64 MiB): all it wrote, unless a
grandchild that kept the pipe keeps writing."""


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

    def read(self, fd: int, now: float = 0.0, reads: int = MAX_READS_PER_TURN) -> tuple[str, list[str], bool]:
        """Read what is available on one of its pipes, at most ``reads`` pipe reads:
        (stream, lines, reached EOF). A task writing faster than the agent sends would
        otherwise keep it here, holding ever more text."""
        stream, buffer = self.outputs[fd]
        lines: list[str] = []
        eof = False
        for _ in range(reads):
            try:
                data = os.read(fd, PIPE_READ)
            except BlockingIOError:
                break
            if not data:
                eof = True
                break
            lines += buffer.feed(data, now)
        if eof:
            lines += buffer.flush()
        return stream, lines, eof

    def drain(self, fd: int, now: float) -> tuple[str, list[str]]:
        """All that is left in one of a finished worker's pipes, partial line included."""
        stream, lines, eof = self.read(fd, now, reads=MAX_READS_AT_EXIT)
        if not eof:
            lines += self.outputs[fd][1].flush()
        return stream, lines

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
