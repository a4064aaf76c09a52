"""Workers forked from their agent (skyward.agent.processes.fork_workers) start as a
worker started as its own interpreter would: nothing of the agent leaks into them."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import skyward as sky


def _pipes() -> list[int]:
    found = []
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass  # the directory listing's own descriptor, closed by now
    return found


@sky.compute
def what_the_worker_sees() -> dict[str, object]:
    pipes = _pipes()
    main = sys.modules["__main__"]
    return {
        "pipes": pipes,
        "main": getattr(main.__spec__, "name", None),
        "argv0": Path(sys.argv[0]).name,
        "stdin_closed": sys.stdin.closed,
        "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
        "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "name": Path("/proc/self/comm").read_text().strip(),
        "parent": Path(f"/proc/{os.getppid()}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")[-2:],
    }


@sky.compute
def spawned_child_exit_code() -> int | None:
    # multiprocessing's spawn imports the parent's __main__ in the child: the agent's would
    # start an agent there (and fail, reading no config)
    child = multiprocessing.get_context("spawn").Process(target=os.getpid)
    child.start()
    child.join(120)
    return child.exitcode


def test_a_forked_worker_holds_only_its_own_pipes_and_starts_as_a_fresh_worker() -> None:
    with sky.ComputePool(nodes=1, concurrency=2, display="quiet") as pool:
        seen = what_the_worker_sees() @ pool
    assert len(seen) == 2
    for worker in seen:
        # stdout and stderr to its agent; not its sibling's pipes, not its config pipe
        assert worker["pipes"] == [1, 2]
        assert worker["main"] == "skyward.agent.worker"
        assert worker["argv0"] == "worker.py"
        assert worker["stdin_closed"] is True
        assert worker["unbuffered"] == "1"
        assert worker["devices"] == ""  # a pool with no accelerator sees no GPU
        assert worker["name"] == "skyward-worker"  # forked, not started as an interpreter
        assert worker["parent"] == [b"-m", b"skyward.agent"]


def test_a_task_s_spawned_process_starts_cleanly_in_a_forked_worker() -> None:
    with sky.ComputePool(nodes=1, display="quiet") as pool:
        assert (spawned_child_exit_code() >> pool) == 0


def test_a_forked_worker_that_never_gets_its_config_exits_with_status_1(tmp_path: Path) -> None:
    # in a process of its own: a forked child returns by raising SystemExit up its stack
    script = textwrap.dedent(
        """
        import sys
        from skyward.agent.processes import fork_workers
        [child] = fork_workers([{"PATH": "/usr/bin:/bin"}])
        child.config.close()
        child.config = None
        code = child.wait(60)
        print(code, child.stderr.read().decode().strip().splitlines()[-1])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1 skyward worker: its agent sent no config"
