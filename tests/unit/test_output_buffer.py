"""The agent's output buffer: lines end at \\n, \\r\\n or \\r, text without a line end is
forwarded after a delay or a size, memory stays bounded, time stays linear."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from skyward.agent.output import OutputBuffer


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(data[last:point])
        last = point
    pieces.append(data[last:])
    return pieces


_TEXT = st.text(alphabet=st.sampled_from(list("ab \r\né€")), max_size=200)


@given(text=_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=8))
def test_lines_do_not_depend_on_how_the_pipe_cut_the_bytes(text: str, cuts: list[int]) -> None:
    buffer = OutputBuffer(max_partial=10**6)
    lines: list[str] = []
    for chunk in _chunks(text.encode(), cuts):
        lines += buffer.feed(chunk)
    lines += buffer.flush()
    expected = re.split(r"\r\n|\r|\n", text)
    if expected[-1] == "":
        expected.pop()  # a final line end closes the last line; it opens none
    assert lines == expected


@given(text=_TEXT, cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=8))
def test_pieces_cut_at_the_size_bound_lose_and_add_nothing(text: str, cuts: list[int]) -> None:
    buffer = OutputBuffer(max_partial=7)
    pieces: list[str] = []
    for chunk in _chunks(text.encode(), cuts):
        pieces += buffer.feed(chunk)
        assert buffer.pending_chars < 7
    pieces += buffer.flush()
    assert all(len(p) <= 7 for p in pieces)
    assert "".join(pieces) == re.sub(r"\r\n|\r|\n", "", text)


def test_a_progress_bar_redrawn_with_carriage_returns_shows_each_redraw() -> None:
    buffer = OutputBuffer()
    assert buffer.feed(b"\r 10%|#   |\r 20%|##  |\r 30%|### |") == ["", " 10%|#   |", " 20%|##  |"]
    assert buffer.flush() == [" 30%|### |"]


def test_text_without_a_line_end_is_forwarded_after_the_delay() -> None:
    buffer = OutputBuffer(delay=0.25)
    assert buffer.feed(b"Downloading", now=10.0) == []
    assert buffer.feed(b"...", now=10.1) == []
    assert buffer.due(now=10.2) == []
    assert buffer.due(now=10.25) == ["Downloading..."]
    assert buffer.due(now=99.0) == []  # nothing left to send
    assert buffer.feed(b" done\n", now=11.0) == [" done"]


def test_a_multibyte_character_cut_by_the_pipe_arrives_whole() -> None:
    buffer = OutputBuffer()
    data = "naïve €\n".encode()
    lines = [line for i in range(len(data)) for line in buffer.feed(data[i : i + 1])]
    assert lines == ["naïve €"]


def test_megabytes_without_a_newline_go_out_in_bounded_pieces() -> None:
    buffer = OutputBuffer(max_partial=64 * 1024)
    sent = 0
    for _ in range(64):  # 4 MiB in pipe-sized reads
        for piece in buffer.feed(b"x" * 65536):
            assert len(piece) <= 64 * 1024
            sent += len(piece)
        assert buffer.pending_chars < 64 * 1024
    assert sent == 4 * 1024 * 1024


def test_a_worker_writing_faster_than_the_agent_reads_is_read_a_bounded_amount_per_turn() -> None:
    import os
    import subprocess
    import sys
    import threading

    from skyward.agent.output import OutputBuffer as Buffer
    from skyward.agent.processes import MAX_READS_PER_TURN, PIPE_READ, WorkerProcess

    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    total = 4 * 1024 * 1024

    def write() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(b"x" * total)  # no newline at all

    writer = threading.Thread(target=write)
    writer.start()
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    worker = WorkerProcess(0, process, {read_end: ("stdout", Buffer())})
    received = 0
    eof = False
    while not eof:
        _, lines, eof = worker.read(read_end)
        size = sum(len(line) for line in lines)
        assert size <= MAX_READS_PER_TURN * PIPE_READ  # one turn never holds more than this
        received += size
    writer.join()
    process.wait()
    os.close(read_end)
    assert received == total  # and, turn after turn, nothing is lost
