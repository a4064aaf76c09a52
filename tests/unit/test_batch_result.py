"""BatchResult: a gather's completion without a Future per task."""

from __future__ import annotations

import threading

import pytest

from skyward.transport.client import BatchResult


class Boom(Exception):
    pass


def finish_later(action: object, delay: float = 0.05) -> threading.Timer:
    timer = threading.Timer(delay, action)  # type: ignore[arg-type]
    timer.start()
    return timer


def test_results_come_back_in_order_whatever_order_they_finish_in() -> None:
    finished: list[bool] = []
    batch = BatchResult(4, on_finish=finished.append)
    slots = [batch.slot(i) for i in range(4)]
    for i in (2, 0, 3, 1):
        slots[i].set_result(i * 10)
    assert batch.wait() == (0, 10, 20, 30)
    assert finished == [False] * 4


def test_an_empty_batch_is_done_at_once() -> None:
    assert BatchResult(0).wait() == ()


def test_the_first_failure_in_batch_order_wins_once_what_precedes_it_is_done() -> None:
    batch = BatchResult(3)
    slots = [batch.slot(i) for i in range(3)]
    slots[2].set_exception(Boom("third"))
    timer = finish_later(lambda: slots[1].set_exception(Boom("second")))
    finish_later(lambda: slots[0].set_result("first"), delay=0.1)
    with pytest.raises(Boom, match="second"):
        batch.wait()  # must not report "third" while tasks 0 and 1 are still running
    timer.join()
    assert slots[2].done() and not slots[0].cancelled()


def test_after_a_failure_what_has_not_finished_is_cancelled() -> None:
    batch = BatchResult(3)
    slots = [batch.slot(i) for i in range(3)]
    slots[0].set_exception(Boom("first"))
    with pytest.raises(Boom):
        batch.wait()
    assert slots[1].cancelled() and slots[2].cancelled()
    assert not slots[0].cancelled()


def test_a_task_finishes_once_even_when_failed_from_two_threads() -> None:
    finished: list[bool] = []
    batch = BatchResult(1, on_finish=finished.append)
    slot = batch.slot(0)
    slot.set_result(1)
    slot.set_exception(Boom("late"))  # e.g. the pool closing after the result arrived
    assert batch.wait() == (1,)
    assert finished == [False]


def test_many_threads_finishing_concurrently_lose_nothing() -> None:
    n = 2000
    batch = BatchResult(n)
    slots = [batch.slot(i) for i in range(n)]

    def finish(start: int) -> None:
        for i in range(start, n, 4):
            slots[i].set_result(i)

    threads = [threading.Thread(target=finish, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    assert batch.wait() == tuple(range(n))
    for t in threads:
        t.join()
