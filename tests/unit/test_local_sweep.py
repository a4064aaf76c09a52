"""Run directories of Local pools whose client died are swept when a pool starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from hypothesis import given
from hypothesis import strategies as st

from skyward.providers.local_sweep import (
    UNOWNED_AGE_S,
    Owner,
    RunDir,
    add_keeper,
    current_owner,
    is_stale,
    owner_alive,
    read_keepers,
    sweep,
    write_owner,
)

NOW = 1_800_000_000.0


def _dead_owner() -> Owner:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    return Owner(child.pid, started)


def test_a_run_directory_is_stale_exactly_when_its_owner_is_gone() -> None:
    me, other = Owner(1, 1.0), Owner(2, 2.0)
    alive = {me}.__contains__
    assert not is_stale(RunDir(Path("a"), me, NOW), alive, NOW)
    assert is_stale(RunDir(Path("b"), other, NOW), alive, NOW)
    # Without an owner file (an older skyward): only once it has been left alone a day.
    assert not is_stale(RunDir(Path("c"), None, NOW - UNOWNED_AGE_S + 60), alive, NOW)
    assert is_stale(RunDir(Path("d"), None, NOW - UNOWNED_AGE_S - 60), alive, NOW)


def test_a_recycled_pid_does_not_pass_for_the_owner() -> None:
    me = current_owner()
    assert owner_alive(me)
    assert not owner_alive(Owner(me.pid, me.started - 3600))  # same pid, another process
    assert not owner_alive(_dead_owner())


def test_sweep_removes_dead_clients_directories_and_nothing_else(tmp_path: Path) -> None:
    def run_dir(name: str, owner: Owner | None) -> Path:
        path = tmp_path / name
        path.mkdir(mode=0o700)
        (path / "node-0.sh").write_text("secret")
        if owner is not None:
            write_owner(path, owner)
        return path

    dead = run_dir("skyward-sky-0000000a-x1", _dead_owner())
    live = run_dir("skyward-sky-0000000b-x2", current_owner())
    old_unowned = run_dir("skyward-sky-0000000c-x3", None)
    os.utime(old_unowned, (NOW - UNOWNED_AGE_S - 60, NOW - UNOWNED_AGE_S - 60))
    fresh_unowned = run_dir("skyward-sky-0000000d-x4", None)
    os.utime(fresh_unowned, (NOW, NOW))
    not_ours = run_dir("something-else", _dead_owner())
    (tmp_path / "skyward-sky-link").symlink_to(dead)

    removed = sweep(tmp_path, now=NOW)

    assert sorted(removed) == sorted([dead, old_unowned])
    assert not dead.exists() and not old_unowned.exists()
    assert live.exists() and fresh_unowned.exists() and not_ours.exists()


owners = st.builds(Owner, st.integers(1, 50), st.floats(0, 10, allow_nan=False))


@given(owner=st.none() | owners, keepers=st.lists(owners, max_size=4), alive=st.sets(owners, max_size=6))
def test_a_run_directory_stays_while_its_client_or_any_of_a_kept_pool_s_nodes_runs(
    owner: Owner | None, keepers: list[Owner], alive: set[Owner]
) -> None:
    run = RunDir(Path("r"), owner, NOW, tuple(keepers))
    stale = is_stale(run, alive.__contains__, NOW)
    if any(k in alive for k in keepers) or (owner is not None and owner in alive):
        assert not stale  # a kept pool's nodes outlive their client: their sockets are in it
    elif owner is not None:
        assert stale


def test_a_kept_pool_s_node_processes_are_recorded_one_by_one(tmp_path: Path) -> None:
    nodes = [Owner(10, 1.5), Owner(11, 2.5)]
    for node in nodes:
        add_keeper(tmp_path, node)
    assert read_keepers(tmp_path) == tuple(nodes)
    assert read_keepers(tmp_path / "elsewhere") == ()


def test_a_process_that_exited_but_was_not_reaped_is_not_alive() -> None:
    # a kept pool's agent outlives its client, so init inherits it, and an init that does
    # not reap leaves it a zombie: its run directory must still be swept
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = Owner(child.pid, psutil.Process(child.pid).create_time())
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert not owner_alive(owner)
    finally:
        child.wait()
