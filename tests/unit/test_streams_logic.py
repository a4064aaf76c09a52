"""The client's side of streams without sockets: a reader grants the worker more values
as it reads (never holding more than a window), closing stops the task once, failures
arrive after the values before them; input-stream parameters are found by annotation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import AbandonedError, ConfigurationError
from skyward.transport import serialize, wire
from skyward.transport.inputs import InputRef, split_inputs, stream_parameters
from skyward.transport.results import ResultDecoder
from skyward.transport.stream import RemoteStream, StreamChannel


class _Worker:
    """Plays the worker: sends a value whenever it holds credit."""

    def __init__(self, channel: StreamChannel, length: int, pack: int = 1) -> None:
        self.channel = channel
        self.length = length
        self.pack = pack  # values per message: 1 as ITEM, more packed as ITEMS
        self.credit = channel.window
        self.sent = 0
        self.stops = 0

    def pump(self) -> None:
        while self.credit > 0 and self.sent < self.length:
            count = min(self.pack, self.credit, self.length - self.sent)
            if count == 1:
                self.channel.item(serialize.dumps(self.sent), 0)
            else:
                values = range(self.sent, self.sent + count)
                self.channel.item([wire.pack_values([serialize.dumps_value(v)[0] for v in values])], 0, True)  # type: ignore[list-item]
            self.sent += count
            self.credit -= count
        if self.sent == self.length:
            self.channel.set_result(None)

    def grant(self, count: int) -> None:
        self.credit += count
        self.pump()

    def stop(self) -> None:
        self.stops += 1


@given(
    length=st.integers(0, 300),
    window=st.integers(1, 50),
    stop=st.none() | st.integers(0, 300),
    pack=st.integers(1, 8),
)
def test_a_reader_never_holds_more_than_a_window_and_gets_every_value_in_order(
    length: int, window: int, stop: int | None, pack: int
) -> None:
    channel = StreamChannel(window, None)
    worker = _Worker(channel, length, pack)
    stream: RemoteStream[int] = RemoteStream(channel, ResultDecoder(), worker.grant, worker.stop)
    worker.pump()
    seen: list[int] = []
    for value in stream:
        assert len([i for i in channel.items if i is not None]) <= window
        assert worker.sent - (len(seen) + 1) <= window  # sent, less what this loop has read
        if stop is not None and len(seen) == stop:
            break
        seen.append(value)
    ended = channel.ended
    stream.close()
    stream.close()
    expected = list(range(length))
    assert seen == (expected if stop is None else expected[:stop])
    # stopped before the worker's end: it is told once; after the end, never
    assert worker.stops == (0 if ended else 1)


def test_a_failure_arrives_after_the_values_before_it() -> None:
    channel = StreamChannel(4, None)
    stream: RemoteStream[int] = RemoteStream(channel, ResultDecoder(), lambda n: None, lambda: None)
    channel.item(serialize.dumps(1), 0)
    channel.item(serialize.dumps(2), 0)
    channel.set_exception(ValueError("late"))
    channel.item(serialize.dumps(3), 0)  # nothing after the end counts
    assert next(stream) == 1
    assert next(stream) == 2
    with pytest.raises(ValueError, match="late"):
        next(stream)
    with pytest.raises(StopIteration):
        next(stream)


def test_a_stopped_stream_reports_done_not_failed() -> None:
    finished: list[bool] = []
    channel = StreamChannel(4, finished.append)
    stream: RemoteStream[int] = RemoteStream(channel, ResultDecoder(), lambda n: None, lambda: None)
    stream.close()
    channel.set_exception(RuntimeError("recalled"))
    assert finished == [False]


def test_a_stream_window_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        StreamChannel(0, None)


def test_input_stream_parameters_are_found_by_annotation() -> None:
    def fn(a: Iterator[int], b: int, c: Iterable[str], *rest: Iterator[int], **more: Iterable[int]) -> None:
        pass

    def plain(a: list[int], b: Any) -> None:
        pass

    assert stream_parameters(fn) == ("a", "c")
    assert stream_parameters(plain) == ()


def test_input_streams_are_replaced_by_their_slot_and_kept_here() -> None:
    def fn(a: int, values: Iterator[int], others: Iterable[int] = ()) -> None:
        pass

    source = iter([1, 2])
    args, kwargs, inputs = split_inputs(fn, (1, source), {"others": [3]})
    assert args == (1, InputRef(0), InputRef(1))  # bound in order: the call means the same
    assert kwargs == {}
    assert inputs == [("values", source), ("others", [3])]
    with pytest.raises(ConfigurationError, match=r"'values'.*got int"):
        split_inputs(fn, (1, 5), {})


def test_a_stream_its_reader_closed_ends_quietly_whatever_the_worker_answers_after() -> None:
    """The worker answers a closed stream's recall after the reader moved on: that answer
    is no failure of the stream (it ran; its reader stopped it)."""
    finished: list[bool] = []
    channel = StreamChannel(4, finished.append)
    stream: RemoteStream[int] = RemoteStream(channel, ResultDecoder(), lambda _: None, lambda: None)
    channel.item(serialize.dumps(7), 0)
    assert next(stream) == 7
    stream.close()
    channel.set_exception(AbandonedError("the task was abandoned before it began: it never ran"))
    with pytest.raises(StopIteration):
        next(stream)
    assert finished == [False]
