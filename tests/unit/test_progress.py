"""TaskProgress throttling, written once for every path (``>>``, ``@``, gather, submit)."""

from __future__ import annotations

from concurrent.futures import Future

from skyward.api.progress import PROGRESS_INTERVAL, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_sent_at_most_once_per_interval_and_the_last_count_is_never_lost() -> None:
    sent: list[tuple[int, int, int]] = []
    clock = Clock()
    progress = Progress(lambda *counts: sent.append(counts), clock=clock)
    progress.add(3)
    progress.finished(failed=False)
    progress.finished(failed=True)  # inside the interval: left due
    assert sent == [(1, 3, 0)]
    progress.flush_due()
    assert sent[-1] == (1, 3, 1)
    progress.flush_due()  # nothing new
    assert len(sent) == 2
    clock.now += 2 * PROGRESS_INTERVAL
    progress.finished(failed=False)
    assert sent[-1] == (2, 3, 1)


def test_a_tracked_future_counts_when_it_ends_and_a_cancelled_one_counts_as_failed() -> None:
    sent: list[tuple[int, int, int]] = []
    clock = Clock()
    progress = Progress(lambda *counts: sent.append(counts), clock=clock)
    ok: Future[int] = Future()
    cancelled: Future[int] = Future()
    progress.track(ok)
    progress.track(cancelled)
    ok.set_result(1)
    clock.now += 2 * PROGRESS_INTERVAL
    cancelled.cancel()
    assert sent == [(1, 2, 0), (1, 2, 1)]
