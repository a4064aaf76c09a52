"""The deadline helper the hang-prone integration tests use: a hang fails the test at
once and names the step; a step that answers answers as if it had run in the test."""

from __future__ import annotations

import threading

import pytest
from deadline_support import within


def test_a_step_that_hangs_fails_the_test_naming_the_step() -> None:
    never = threading.Event()
    with pytest.raises(pytest.fail.Exception, match=r"waiting on nothing did not return within 0\.2 s: it hangs"):
        within("waiting on nothing", never.wait, seconds=0.2)
    never.set()  # lets the step's thread end


def test_a_step_that_answers_gives_its_value_or_raises_its_exception() -> None:
    assert within("adding", lambda: 1 + 1) == 2
    with pytest.raises(KeyError, match="missing"):
        within("a failing lookup", lambda: {}["missing"])
