"""``gather(...) >> pool`` through one BatchResult: order, failures, progress, reuse."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import skyward as sky
from skyward.events import TaskProgress


class Bad(Exception):
    pass


@sky.compute
def plus_one(x: int) -> int:
    return x + 1


@sky.compute
def fail_at(x: int, bad: int) -> int:
    if x == bad:
        raise Bad(f"task {x}")
    return x


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet") as p:
        yield p


def test_a_large_gather_returns_every_result_in_order(pool: sky.ComputePool) -> None:
    assert sky.gather(*(plus_one(i) for i in range(5000))) >> pool == tuple(range(1, 5001))


def test_a_failing_task_raises_its_exception_and_the_pool_keeps_serving(pool: sky.ComputePool) -> None:
    with pytest.raises(Bad, match="task 700"):
        sky.gather(*(fail_at(i, 700) for i in range(2000))) >> pool
    assert sky.gather(*(plus_one(i) for i in range(100))) >> pool == tuple(range(1, 101))


def test_progress_counts_every_task_of_a_gather() -> None:
    events: list[TaskProgress] = []
    with sky.ComputePool(provider=sky.Local(), nodes=1, display="quiet", on_event=events.append) as p:
        sky.gather(*(plus_one(i) for i in range(300))) >> p
    progress = [e for e in events if isinstance(e, TaskProgress)]
    assert progress and progress[-1].done == 300 and progress[-1].submitted == 300
