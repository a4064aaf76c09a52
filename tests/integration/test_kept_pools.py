"""Kept pools on Local, with real processes: a pool that outlives its client, ``sky.attach``
from another process to the same agents, keep-alive expiry with no client, and the
refusals (missing, loose or wrong keys; a second client; an unknown name)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import skyward as sky
from skyward.api.kept.record import KEYS_FILE, KeptKeys, PoolStore
from skyward.errors import AttachError
from skyward.providers.local_sweep import sweep
from skyward.transport.security import Keypair

KEEP_ALIVE = 10  # the minimum: the expiry test waits for it

OPEN = """
import json, os, sys, skyward as sky

@sky.compute
def where():
    return os.getppid(), os.getpid()  # the agent, the worker

with sky.ComputePool(sky.Local(transport=sys.argv[1]), name="exp1", keep_alive=float(sys.argv[2]),
                     display="quiet") as pool:
    print(json.dumps(where() >> pool), flush=True)
"""

ATTACH = """
import json, os, time, skyward as sky

@sky.compute
def where():
    print("hello from the attached client's task")
    return os.getppid(), os.getpid()

with sky.attach("exp1", display="quiet") as pool:
    assert pool.is_active
    time.sleep(1.0)  # the attached pool stays usable: nothing in this process takes its nodes for lost
    print(json.dumps(where() >> pool), flush=True)
"""


def _run(script: str, home: Path, *args: str) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "SKYWARD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: list[int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.2)
    return _gone(pid)


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_a_kept_pool_outlives_its_process_and_another_process_attaches_to_the_same_agents(
    transport: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    first = _run(OPEN, home, transport, str(KEEP_ALIVE))
    agent = first[0]
    assert not _gone(agent), "leaving a kept pool's `with` block stopped its node"
    record = PoolStore(home).record("exp1")
    assert [n.pid for n in record.nodes] == [agent]  # the agent's pid, for `skyward down`
    second = _run(ATTACH, home)
    assert second == first  # the same agent and the same worker process ran it
    output = PoolStore(home).output_path("exp1").read_text()
    assert "[node 0] hello from the attached client's task" in output
    # No client now: the node stops on its own once keep_alive passed (plus its shutdown).
    assert _wait_gone(agent, KEEP_ALIVE + 20), "the kept node outlived its keep-alive"


def test_a_kept_pool_s_run_directory_stays_while_its_node_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    agent, _ = _run(OPEN, home, "ipc", str(KEEP_ALIVE))
    socket = PoolStore(home).record("exp1").nodes[0].endpoint.removeprefix("ipc://")
    assert Path(socket).parent not in sweep(Path(socket).parent.parent)
    assert Path(socket).exists()
    assert _wait_gone(agent, KEEP_ALIVE + 20)
    run_dir = Path(socket).parent
    # Once the node ended, the next sweep takes it (another Local pool on this machine may
    # have swept it already: the temporary directory is shared).
    assert not run_dir.exists() or run_dir in sweep(run_dir.parent)


@pytest.fixture(scope="module")
def kept_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kept tcp pool opened by another process, detached, for the refusal tests."""
    home = tmp_path_factory.mktemp("kept") / "home"
    agent, _ = _run(OPEN, home, "tcp", "60")
    yield home
    os.kill(agent, 15)  # the agent stops its workers and exits, as at its keep-alive


@pytest.fixture
def store(kept_home: Path, monkeypatch: pytest.MonkeyPatch) -> PoolStore:
    monkeypatch.setenv("SKYWARD_HOME", str(kept_home))
    return PoolStore(kept_home)


def test_attaching_without_the_keys_file_is_refused(store: PoolStore) -> None:
    keys = store.path("exp1") / KEYS_FILE
    saved = keys.read_bytes()
    keys.unlink()
    try:
        with pytest.raises(AttachError, match="has no keys"):
            sky.attach("exp1", display="quiet")
    finally:
        keys.write_bytes(saved)
        keys.chmod(0o600)


def test_attaching_with_keys_other_users_can_read_is_refused(store: PoolStore) -> None:
    keys = store.path("exp1") / KEYS_FILE
    keys.chmod(0o644)
    try:
        with pytest.raises(AttachError, match="readable by other users"):
            sky.attach("exp1", display="quiet")
    finally:
        keys.chmod(0o600)


def test_attaching_with_a_key_the_nodes_do_not_accept_is_refused(store: PoolStore) -> None:
    keys = store.path("exp1") / KEYS_FILE
    saved = keys.read_bytes()
    real = KeptKeys.from_json(saved.decode())
    keys.write_text(KeptKeys(Keypair.generate(), real.node_public).to_json())
    try:
        with pytest.raises(AttachError, match="refused this client's key"):
            sky.attach("exp1", display="quiet", timeout=2)
    finally:
        keys.write_bytes(saved)
        keys.chmod(0o600)
    assert store.status("exp1") is not None and store.status("exp1").client_pid is None  # type: ignore[union-attr]


def test_a_second_client_is_refused_while_one_is_attached(store: PoolStore) -> None:
    with sky.attach("exp1", display="quiet") as pool:
        assert pool.is_active
        with pytest.raises(AttachError, match=f"client attached already \\(process {os.getpid()}\\)"):
            sky.attach("exp1", display="quiet")
    with sky.attach("exp1", display="quiet") as again:  # detached: the next one gets in
        assert again.is_active


def test_an_attached_pool_refuses_to_resize(store: PoolStore) -> None:
    with sky.attach("exp1", display="quiet") as pool, pytest.raises(sky.ConfigurationError, match="attached pool"):
        pool.resize(2)


def test_attaching_to_an_unknown_name_lists_the_known_pools(store: PoolStore) -> None:
    with pytest.raises(AttachError, match=r"no pool named 'nope'.*recorded pools: exp1"):
        sky.attach("nope")


def test_a_third_process_stops_a_kept_pool_with_skyward_down(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _run(OPEN, home, "ipc", "60")
    assert _run(ATTACH, home) == first
    down = subprocess.run(
        [sys.executable, "-m", "skyward.cli", "down", "exp1"],
        env={**os.environ, "SKYWARD_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert down.returncode == 0, down.stdout + down.stderr
    assert all(_gone(pid) for pid in first)  # agent and worker: stopped, not left to the keep-alive
    assert PoolStore(home).names() == []  # its record and keys went with it


HOLD = """
import time, skyward as sky
with sky.attach("exp1", display="quiet") as pool:
    print("attached", flush=True)
    time.sleep(600)
"""


def test_a_killed_attached_client_leaves_the_pool_to_the_next_one(store: PoolStore) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "attached"
        with pytest.raises(AttachError, match="client attached already"):
            sky.attach("exp1", display="quiet")
        holder.kill()  # SIGKILL: it never detaches; the kernel drops its lock
        holder.wait(timeout=10)
        with sky.attach("exp1", display="quiet") as pool:
            assert pool.is_active
    finally:
        if holder.poll() is None:
            holder.kill()
