"""Worker processes as the supervisor sees them: spawn (or fork), output pipes, death."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, NoReturn

from skyward.agent import worker as worker_module
from skyward.agent.output import OutputBuffer

if TYPE_CHECKING:
    import subprocess


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


WORKER_NAME = b"skyward-worker"
"""A forked worker's process name (``/proc/<pid>/comm``); its command line is its agent's."""


class ForkedChild:
    """A worker forked from its agent (``fork_workers``), with the few ``Popen`` methods
    the supervisor uses: the agent is its parent, so ``waitpid`` reaps it and the exit
    status reads as ``Popen``'s (negative: the signal that killed it)."""

    def __init__(self, pid: int, config_fd: int, stdout_fd: int, stderr_fd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.config: BinaryIO | None = os.fdopen(config_fd, "wb")
        self.stdout: BinaryIO | None = os.fdopen(stdout_fd, "rb")
        self.stderr: BinaryIO | None = os.fdopen(stderr_fd, "rb")

    def send_config(self, config: Mapping[str, object]) -> None:
        """The worker's config (its keys among it) on its own pipe, as ``spawn`` writes it
        on a started worker's stdin; the forked worker waits for it before it starts."""
        assert self.config is not None
        try:
            self.config.write(json.dumps(config).encode() + b"\n")
            self.config.close()
        except OSError:
            pass  # it died already: its exit status says how
        self.config = None

    def kill_unstarted(self) -> None:
        """A forked worker that will never get its config: kill and reap it."""
        if self.config is not None:
            self.config.close()
            self.config = None
        self.send_signal(signal.SIGKILL)
        self.wait()
        for pipe in (self.stdout, self.stderr):
            if pipe is not None:
                pipe.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): dead, status unknown, as Popen says
                self.returncode = 0
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                import subprocess  # noqa: PLC0415  # only on a timeout: not on the agent's start path

                raise subprocess.TimeoutExpired(["skyward worker (forked)"], timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


def can_fork() -> bool:
    """Whether workers can be forked from this process now: on Linux, while it runs one
    thread (a fork copies the locks other threads hold, never the threads: zmq's I/O
    threads start with the agent's first socket, so the agent forks before it opens one)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def fork_workers(envs: Sequence[Mapping[str, str]]) -> list[ForkedChild]:
    """Fork one worker per environment from this process, which has imported the
    worker's code already: each waits for its config (``ForkedChild.send_config``), then
    serves as ``python -m skyward.agent.worker`` would.

    Why: a worker started as an interpreter of its own imports its code again (zmq,
    cloudpickle, the transport: 0.28 s of CPU on this 2-core machine, as much as the agent
    itself), and a Local pool's nodes start all their agents and workers at once on the
    same cores; a fork shares the agent's imported modules and costs milliseconds.
    Call it only when ``can_fork()``; a worker restarted later is started with ``spawn``,
    as the agent's sockets run threads by then."""
    parent_ends: list[int] = []  # the agent's ends of earlier children's pipes: no sibling keeps them
    children: list[ForkedChild] = []
    for env in envs:
        config_r, config_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # a child would write what is buffered again
        agent = os.getpid()
        pid = os.fork()
        if pid == 0:
            _become_worker(agent, config_r, out_w, err_w, [*parent_ends, config_w, out_r, err_r], env)
        for fd in (config_r, out_w, err_w):
            os.close(fd)
        parent_ends += [config_w, out_r, err_r]
        children.append(ForkedChild(pid, config_w, out_r, err_r))
    return children


def _become_worker(
    parent: int, config_fd: int, out_fd: int, err_fd: int, close: Sequence[int], env: Mapping[str, str]
) -> NoReturn:
    """In the forked child: become a worker as ``python -m skyward.agent.worker`` starts
    one, then exit as that interpreter would. Nothing may be caught between the agent's
    ``main`` and this call: the ``SystemExit`` it ends with (or a task loop's exception)
    goes up to the interpreter, which runs the exit handlers and sets the status.

    What a fresh interpreter would not have had is put right: the output pipes become
    fds 1 and 2 with unbuffered streams (``PYTHONUNBUFFERED``, which ``spawn`` sets), stdin
    is closed (the agent's stdin held its config, and its buffer may hold more of it),
    the environment is the worker's, and ``__main__`` and ``sys.argv`` name the worker's
    module (``multiprocessing``'s spawn re-imports ``__main__`` in its children: the
    agent's would start an agent)."""
    worker_module.die_with_parent(WORKER_NAME)
    if os.getppid() != parent:
        os._exit(1)  # the agent died before the line above took effect
    for fd in close:
        os.close(fd)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    os.environ.clear()
    os.environ.update(env)
    encoding, errors = sys.stdout.encoding, sys.stderr.errors
    # the agent's streams buffer their writes; ``__stdout__`` and ``__stderr__`` are
    # replaced too, as a fresh unbuffered interpreter's are those same objects
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding, errors=errors, write_through=True)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr  # type: ignore[misc]  # typeshed: Final
    sys.stdin.close()  # as ``main`` closes it once the config is read (and what it buffered goes)
    sys.argv = [worker_module.__file__ or "skyward.agent.worker"]
    sys.modules["__main__"] = worker_module
    with os.fdopen(config_fd, "rb") as pipe:
        line = pipe.readline()
    if not line:
        raise SystemExit("skyward worker: its agent sent no config")
    worker_module.run(json.loads(line))
    raise SystemExit(0)


@dataclass
class WorkerProcess:
    index: int
    process: subprocess.Popen[bytes] | ForkedChild
    outputs: dict[int, tuple[str, OutputBuffer]] = field(default_factory=dict)
    ready: bool = False
    endpoint: str | None = None
    data_endpoint: str | None = None  # its data port (skyward.transport.data_channel): tcp only
    restart_reason: str | None = None  # why the client asked for a restart (wire.RESTART), until it exits

    @staticmethod
    def spawn(index: int, config: dict[str, object], env: dict[str, str]) -> WorkerProcess:
        """Start a worker; its config (keys included) goes through stdin, not the environment."""
        import subprocess  # noqa: PLC0415  # forked workers (the Linux path) never need it: ~4 ms of a node's start

        child_env = dict(env)
        child_env["PYTHONUNBUFFERED"] = "1"  # output reaches the agent as it is written
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
        return WorkerProcess.watching(index, process)

    @staticmethod
    def adopt(index: int, child: ForkedChild, config: Mapping[str, object]) -> WorkerProcess:
        """A worker forked earlier (``fork_workers``), sent its config now."""
        child.send_config(config)
        return WorkerProcess.watching(index, child)

    @staticmethod
    def watching(index: int, process: subprocess.Popen[bytes] | ForkedChild) -> WorkerProcess:
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
