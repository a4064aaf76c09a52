"""Nothing outlives its pool: not after close, not after the client is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

import skyward as sky

GRACE = 3.0


def _agent_processes(pool_id: str) -> list[psutil.Process]:
    """The agents of a Local pool: ``python -m skyward.agent`` running in a node directory
    of the pool's run directory (``.../skyward-<pool id>-*/node-<i>``)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            cmd = proc.info["cmdline"] or []
            if cmd[-2:] == ["-m", "skyward.agent"] and f"skyward-{pool_id}-" in (proc.info["cwd"] or ""):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


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


def test_agents_exit_within_the_grace_period_after_the_client_is_killed() -> None:
    script = textwrap.dedent(
        f"""
        import time, skyward as sky
        pool = sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period={GRACE}))
        pool.open()
        print(pool.spec.pool_id, flush=True)
        time.sleep(600)
        """
    )
    client = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert client.stdout is not None
    pool_id = client.stdout.readline().strip()
    procs = _tree(_agent_processes(pool_id))
    assert len(procs) == 4
    client.send_signal(signal.SIGKILL)
    client.wait()
    killed_at = time.monotonic()
    _, alive = psutil.wait_procs(procs, timeout=GRACE + 10)
    assert not alive, f"still running {time.monotonic() - killed_at:.1f} s after the client died: {alive}"
    assert os.path.exists("/proc")  # (Linux: workers follow their agent through PDEATHSIG)
