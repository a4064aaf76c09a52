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
