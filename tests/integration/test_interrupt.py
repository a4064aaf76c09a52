"""Interrupting a wait (Ctrl-C, a notebook's interrupt button) on a real Local pool: the
caller gets its KeyboardInterrupt and the pool runs the next call."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

import skyward as sky


@sky.compute
def slow(seconds: float, marker: str = "") -> str:
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        if marker:
            Path(marker).write_text("interrupted")
        raise
    return "slow"


@sky.compute
def slow_marked_by_pid(directory: str) -> str:
    try:
        time.sleep(30)
    except KeyboardInterrupt:
        Path(directory, f"marker-{os.getpid()}").write_text("interrupted")
        raise
    return "slow"


@sky.compute
def double(x: int) -> int:
    return 2 * x


def _interrupt_soon(delay: float) -> threading.Timer:
    # SIGINT to this process: Python raises KeyboardInterrupt in the main thread, which
    # waits on the pool, as a terminal's Ctrl-C or Jupyter's interrupt does
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_an_interrupted_rshift_interrupts_its_task_on_the_worker_and_the_pool_runs_the_next(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    # one worker: the next call can only run once the interrupted task has left it
    with sky.ComputePool(provider=sky.Local(), nodes=1, concurrency=1, display="quiet") as pool:
        assert double(1) >> pool == 2
        timer = _interrupt_soon(0.5)
        with pytest.raises(KeyboardInterrupt):
            slow(20, str(marker)) >> pool
        timer.join()
        assert double(21) >> pool == 42
        assert marker.read_text() == "interrupted"  # the task saw KeyboardInterrupt there
        assert sky.gather(double(1), double(2)) >> pool == (2, 4)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_an_interrupted_gather_drops_its_queued_tasks_and_the_pool_runs_the_next_one() -> None:
    with sky.ComputePool(provider=sky.Local(), nodes=1, concurrency=1, display="quiet") as pool:
        timer = _interrupt_soon(0.5)
        with pytest.raises(KeyboardInterrupt):
            sky.gather(slow(2), slow(30), slow(30)) >> pool
        timer.join()
        # the two queued behind the first never start: this one runs once the first ends
        assert double(5) >> pool == 10


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_an_interrupted_gather_interrupts_its_running_tasks_on_every_worker(tmp_path: Path) -> None:
    markers = [tmp_path / f"marker-{i}" for i in range(2)]
    # two nodes, one worker each: both tasks run when the interrupt comes
    with sky.ComputePool(provider=sky.Local(), nodes=2, concurrency=1, display="quiet") as pool:
        assert sky.gather(double(1), double(2)) >> pool == (2, 4)
        timer = _interrupt_soon(1.0)
        with pytest.raises(KeyboardInterrupt):
            sky.gather(*(slow(30, str(m)) for m in markers)) >> pool
        timer.join()
        # each worker is free again: were a slow task still running, this gather would wait for it
        assert sky.gather(double(3), double(4)) >> pool == (6, 8)
        assert [m.read_text() for m in markers] == ["interrupted", "interrupted"]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_an_interrupted_broadcast_interrupts_its_task_on_every_worker(tmp_path: Path) -> None:
    with sky.ComputePool(provider=sky.Local(), nodes=2, concurrency=1, display="quiet") as pool:
        timer = _interrupt_soon(1.0)
        with pytest.raises(KeyboardInterrupt):
            slow_marked_by_pid(str(tmp_path)) @ pool
        timer.join()
        assert double(7) @ pool == (14, 14)
        assert sorted(p.read_text() for p in tmp_path.iterdir()) == ["interrupted", "interrupted"]
