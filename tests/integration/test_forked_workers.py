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


_HOOK_PLUGIN = """
import os
import pluggy

hookimpl = pluggy.HookimplMarker("skyward")


@hookimpl
def skyward_worker_startup(info):
    os.environ["HOOKED_WORKER"] = str(info.worker)
"""

_CLIENT = """
import os, skyward as sky

@sky.compute
def hooked():
    return os.environ.get("HOOKED_WORKER")

with sky.ComputePool(nodes=1, concurrency=2, display="quiet") as pool:
    print(sorted(map(str, hooked() @ pool)))
"""


def _install_hook_plugin(site: Path) -> None:
    """A plugin implementing skyward_worker_startup, installed as a distribution with an
    entry point in the ``skyward`` group (a dist-info directory on the path)."""
    (site / "hook_plugin_for_tests.py").write_text(_HOOK_PLUGIN)
    info = site / "hook_plugin_for_tests-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hook-plugin-for-tests\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[skyward]\nhook-plugin-for-tests = hook_plugin_for_tests\n")


def test_a_plugin_s_worker_startup_hook_runs_in_every_worker_of_a_local_pool(tmp_path: Path) -> None:
    # the client tells a node that shares its environment which plugins implement the
    # hook (the others are not loaded there): this one must be among them
    site = tmp_path / "site"
    site.mkdir()
    _install_hook_plugin(site)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['0', '1']"


def _run_beside_hook_plugin(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``python -c script`` with the hook plugin installed on its path; it must succeed."""
    site = tmp_path / "site"
    site.mkdir()
    _install_hook_plugin(site)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_client_names_the_plugins_that_implement_the_worker_hook(tmp_path: Path) -> None:
    script = (
        "from skyward.plugins.registry import worker_startup_plugins, worker_startup_manager\n"
        "names = worker_startup_plugins()\n"
        "print(names, len(worker_startup_manager(names).get_plugins()), len(worker_startup_manager([]).get_plugins()))"
    )
    done = _run_beside_hook_plugin(tmp_path, script)
    assert done.stdout.strip() == "['hook-plugin-for-tests'] 1 0"


def test_a_node_with_its_own_environment_loads_only_plugins_the_client_s_census_cannot_rule_out(
    tmp_path: Path,
) -> None:
    # A node that builds its own environment (pip packages, a cloud) may hold plugins the
    # client lacks: it loads those, and one the client has at another version, but not
    # one the client has at the same version and found without a worker hook.
    script = (
        "from skyward.plugins.registry import plugin_census, worker_startup_manager\n"
        "census = plugin_census()\n"
        "def loaded(c):\n"
        "    return sorted(name for name, _ in worker_startup_manager(None, c).list_name_plugin())\n"
        "other = sorted(n for n in census if n != 'hook-plugin-for-tests')[0]\n"
        "unknown = {k: v for k, v in census.items() if k != 'hook-plugin-for-tests'}\n"
        "moved = {**census, other: ['0.0.0.dev0', False]}\n"
        "print(census['hook-plugin-for-tests'], len(census) > 1)\n"
        "print(loaded(census))\n"
        "print(loaded(unknown))\n"
        "print(loaded(moved) == sorted(['hook-plugin-for-tests', other]))\n"
    )
    done = _run_beside_hook_plugin(tmp_path, script)
    assert done.stdout.strip().splitlines() == [
        "['0.1', True] True",
        "['hook-plugin-for-tests']",
        "['hook-plugin-for-tests']",
        "True",
    ]
