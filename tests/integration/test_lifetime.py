"""Nothing outlives its pool: not after close, not after the client is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

import skyward as sky

GRACE = 3.0


def _agent_processes(pool_id: str) -> list[psutil.Process]:
    """The agents of a Local pool: ``python ... -m skyward.agent`` running in a node
    directory of the pool's run directory (``.../skyward-<pool id>-*/node-<i>``), less
    their workers forked from them (which keep the agent's command line)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd", "ppid"]):
        try:
            cmd = proc.info["cmdline"] or []
            if cmd[-2:] == ["-m", "skyward.agent"] and f"skyward-{pool_id}-" in (proc.info["cwd"] or ""):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    pids = {proc.pid for proc in found}
    return [proc for proc in found if proc.info["ppid"] not in pids]


def _tree(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = list(procs)
    for proc in procs:
        try:
            out += proc.children(recursive=True)
        except psutil.NoSuchProcess:
            pass
    return out


def test_close_leaves_no_process_behind() -> None:
    with sky.ComputePool(nodes=2, concurrency=2, display="quiet") as pool:
        pool_id = pool.spec.pool_id
        procs = _tree(_agent_processes(pool_id))
        assert len(procs) == 2 + 4  # two agents, two workers each
    _, alive = psutil.wait_procs(procs, timeout=10)
    assert not alive


def test_agents_exit_within_the_grace_period_after_the_client_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A private temp dir for both pools: any other Local pool starting on this machine (a
    # parallel test run) would rightly sweep the dead client's run directory from /tmp first.
    private_tmp = tempfile.mkdtemp(prefix="sky-lt-")  # short: ipc socket paths have a length limit
    monkeypatch.setattr(tempfile, "tempdir", private_tmp)
    script = textwrap.dedent(
        f"""
        import time, skyward as sky
        pool = sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period={GRACE}))
        pool.open()
        print(pool.spec.pool_id, pool._driver.run_dir, flush=True)
        time.sleep(600)
        """
    )
    client = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=private_tmp)
    )
    assert client.stdout is not None
    pool_id, run_dir = client.stdout.readline().split()
    assert run_dir.startswith(private_tmp)
    agents = _agent_processes(pool_id)
    workers = _tree(agents)[len(agents) :]
    assert len(agents) == 2 and len(workers) == 2
    client.send_signal(signal.SIGKILL)
    client.wait()
    killed_at = time.monotonic()
    # The client's last ping reached the agents at most a second before it died, so they
    # must still be running a little under GRACE after the kill ...
    time.sleep(max(0.0, killed_at + GRACE - 1.5 - time.monotonic()))
    early = [p for p in agents if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE]
    assert not early, f"agents exited {time.monotonic() - killed_at:.1f} s after the kill, before their grace period"
    # ... and gone, with their workers (PDEATHSIG), within GRACE plus the agent's poll
    # interval and some slack for a loaded machine.
    _, alive = psutil.wait_procs(agents + workers, timeout=max(0.0, killed_at + GRACE + 2.0 - time.monotonic()))
    alive = [p for p in alive if _running(p)]  # an exited process its new parent has not reaped yet is gone
    assert not alive, f"still running {time.monotonic() - killed_at:.1f} s after the client died: {alive}"
    # The dead client's run directory (sockets, node scripts, logs) stays behind until the
    # next pool starts on this machine, which sweeps it.
    assert os.path.isdir(run_dir)
    with sky.ComputePool(nodes=1, display="quiet") as pool:
        assert Path(run_dir) in pool._driver.swept  # type: ignore[attr-defined]
    assert not os.path.exists(run_dir)
    os.rmdir(private_tmp)  # nothing else was left in it


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
