"""``fn() @ pool`` from the calling thread: order, failures, deaths, busy workers."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

import skyward as sky
from skyward.errors import WorkerDiedError


class NodeError(Exception):
    pass


@sky.compute
def where() -> tuple[int, int]:
    info = sky.instance_info()
    return info.node, info.worker


@sky.compute
def fail_on(node: int) -> int:
    if sky.instance_info().node == node:
        raise NodeError(f"node {node} refuses")
    return sky.instance_info().node


@sky.compute
def die_on(node: int) -> int:
    if sky.instance_info().node == node:
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()


@sky.compute
def wait_for(path: str) -> int:
    import time

    while not os.path.exists(path):
        time.sleep(0.01)
    return 1


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(provider=sky.Local(), nodes=2, concurrency=2, display="quiet") as p:
        yield p


def test_results_come_in_node_then_worker_order(pool: sky.ComputePool) -> None:
    assert where() @ pool == ((0, 0), (0, 1), (1, 0), (1, 1))


def test_a_failure_on_one_node_raises_its_own_exception(pool: sky.ComputePool) -> None:
    with pytest.raises(NodeError, match="node 1 refuses"):
        fail_on(1) @ pool
    assert where() @ pool == ((0, 0), (0, 1), (1, 0), (1, 1))  # the pool still serves


def test_a_worker_dying_during_a_broadcast_fails_it_and_the_pool_recovers(pool: sky.ComputePool) -> None:
    with pytest.raises(WorkerDiedError):
        die_on(0) @ pool
    # The node restarts its worker; until it is back a broadcast may still fail with
    # WorkerDiedError. Within the deadline one must succeed with all four workers.
    deadline = time.monotonic() + 60
    while True:
        try:
            result = where() @ pool
            break
        except WorkerDiedError:
            assert time.monotonic() < deadline, "broadcasts still fail 60 s after a worker died"
            time.sleep(0.05)
    assert result == ((0, 0), (0, 1), (1, 0), (1, 1))


def test_a_busy_worker_sends_the_broadcast_through_the_queue(pool: sky.ComputePool, tmp_path: object) -> None:
    flag = os.path.join(str(tmp_path), "go")
    futures = [pool.submit(wait_for(flag)) for _ in range(64)]  # every worker's credit is used
    done: list[tuple[tuple[int, int], ...]] = []
    thread = threading.Thread(target=lambda: done.append(where() @ pool))
    thread.start()
    open(flag, "w").close()
    thread.join(timeout=60)
    assert [f.result(timeout=60) for f in futures] == [1] * 64
    assert done == [((0, 0), (0, 1), (1, 0), (1, 1))]
