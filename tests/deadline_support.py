"""A deadline for a step that, broken, would hang: the test fails at once, naming the step.

Without it a regression (a stream's ``break`` that no longer frees its worker, ``@``
waiting on a lost node) shows only as pytest's 300 s timeout, which says nothing about
what hung. The step runs on a daemon thread and the test waits a bounded time for it; an
answer (a value or an exception) comes back as if the step had run here. The bound is
generous: it catches a hang, never measures speed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import pytest

T = TypeVar("T")

HANG = 60.0
"""Seconds after which a step that normally takes well under one is taken to hang."""


def within(what: str, step: Callable[[], T], seconds: float = HANG) -> T:
    """``step()``'s value (or its exception); fails the test saying ``what`` hung when it
    has not answered within ``seconds``."""
    answer: Future[T] = Future()

    def run() -> None:
        try:
            answer.set_result(step())
        except BaseException as error:
            answer.set_exception(error)

    threading.Thread(target=run, name=f"deadline: {what}", daemon=True).start()
    done = threading.Event()
    answer.add_done_callback(lambda _: done.set())
    if not done.wait(seconds):
        pytest.fail(f"{what} did not return within {seconds:g} s: it hangs", pytrace=False)
    return answer.result()
