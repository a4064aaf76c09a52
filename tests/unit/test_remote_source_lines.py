"""A remote traceback gets the source lines its worker could not read (a notebook cell's
function travels by value: the cell's file exists only where the notebook runs)."""

from __future__ import annotations

from skyward.transport.results import with_source_lines

_CELL = {("/tmp/ipykernel_1/123.py", 3): "    return 1 / x\n"}


def _getline(filename: str, lineno: int) -> str:
    return _CELL.get((filename, lineno), "")


def test_a_cell_s_frame_gets_its_source_line_from_this_process() -> None:
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/srv/skyward/worker.py", line 10, in call_task\n'
        "    result = fn(*args)\n"
        '  File "/tmp/ipykernel_1/123.py", line 3, in divide\n'
        "ZeroDivisionError: division by zero\n"
    )
    assert with_source_lines(tb, _getline) == (
        "Traceback (most recent call last):\n"
        '  File "/srv/skyward/worker.py", line 10, in call_task\n'
        "    result = fn(*args)\n"
        '  File "/tmp/ipykernel_1/123.py", line 3, in divide\n'
        "    return 1 / x\n"
        "ZeroDivisionError: division by zero\n"
    )


def test_frames_the_worker_could_read_or_nobody_can_are_left_as_they_are() -> None:
    tb = (
        '  File "/tmp/ipykernel_1/123.py", line 3, in divide\n'
        "    what the worker read\n"
        '  File "<string>", line 1, in <module>\n'
        "ValueError: x\n"
    )
    assert with_source_lines(tb, _getline) == tb
