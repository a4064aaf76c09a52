"""Streams end to end on emulated droplets (tcp with CURVE between client and workers):
a generator's values come back as it yields them, `break` closes it on the worker, an
input stream flows in while values flow out, and a worker killed mid-stream raises
`WorkerDiedError` at the next value."""

from __future__ import annotations

import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from do_support import DropletWorld

from skyward import ComputePool, compute
from skyward.errors import WorkerDiedError
from skyward_digitalocean import DigitalOcean

pytestmark = pytest.mark.cloud


@compute
def count_up(limit: int | None, marker: str) -> Iterator[int]:
    """Counts; its ``finally`` leaves ``marker`` in the worker's temp dir (a droplet's disk)."""
    index = 0
    try:
        while limit is None or index < limit:
            yield index
            index += 1
    finally:
        Path(tempfile.gettempdir(), marker).write_text("closed")


@compute
def shout(words: Iterator[str]) -> Iterator[str]:
    for word in words:
        yield word.upper()


@compute
def dies_after(count: int) -> Iterator[int]:
    """Yields ``count`` values, then its worker is killed (droplets have their own pids)."""
    yield from range(count)
    os.kill(os.getpid(), signal.SIGKILL)
    yield -1


@compute
def ping() -> str:
    return "pong"


@compute
def read_marker(marker: str) -> str:
    path = Path(tempfile.gettempdir(), marker)
    return path.read_text() if path.exists() else "missing"


def test_streams_flow_both_ways_and_stop_cleanly_on_emulated_droplets(
    droplets: DropletWorld, do_config: DigitalOcean
) -> None:
    marker = f"skyward-stream-{uuid.uuid4().hex}"
    with ComputePool(provider=do_config, nodes=1, display="quiet") as pool:
        assert sum(count_up(10_000, marker + "-all") >> pool) == sum(range(10_000))
        for value in count_up(None, marker) >> pool:
            if value == 100:
                break
        # the worker was freed, and this runs after the generator's finally (one worker)
        assert read_marker(marker) >> pool == "closed"
        words = (f"word{i}" for i in range(500))
        assert list(shout(words) >> pool) == [f"WORD{i}" for i in range(500)]
        seen: list[int] = []
        with pytest.raises(WorkerDiedError):
            for value in dies_after(3) >> pool:
                seen.append(value)
        # what arrived before the death, in order, then the error (values yielded in the
        # last few ms, not yet sent, die with the worker)
        assert seen == [0, 1, 2][: len(seen)]
        assert ping() >> pool == "pong"
