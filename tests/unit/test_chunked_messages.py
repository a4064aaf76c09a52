"""A message's chunked parts travel as messages of their own after it, and the receiver
copies each into place as it arrives (``skyward.transport.chunked``): what comes back is
the message that was sent, per sender, whatever the interleaving of senders; chunks that
do not fit their table are refused, and a message its sender gave up on leaves nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.transport import serialize, wire
from skyward.transport.bulk import BulkFrames
from skyward.transport.chunked import Reassembly, send_message

_SMALL_BULK = BulkFrames(threshold=wire.ZERO_COPY_MIN, chunk=wire.ZERO_COPY_MIN // 3)


class _Recorder:
    """A socket's ``send`` as ``wire.send_frames`` calls it: the messages, frame by frame."""

    def __init__(self) -> None:
        self.messages: list[list[Any]] = []
        self._current: list[Any] = []

    def send(self, frame: Any, flags: int = 0, copy: bool = True) -> None:
        self._current.append(bytes(memoryview(frame)))
        if not flags & zmq.SNDMORE:
            self.messages.append(self._current)
            self._current = []


def _through(message: list[Any], reassembly: Reassembly, sender: object = None) -> list[list[Any]]:
    recorder = _Recorder()
    send_message(recorder, message)
    whole = [got for frames in recorder.messages if (got := reassembly.feed(frames, sender)) is not None]
    return whole


def test_a_chunked_part_arrives_as_chunk_messages_after_its_message_and_reads_back_writable() -> None:
    array = np.arange(3 * wire.ZERO_COPY_MIN // 8 + 5, dtype=np.float64)
    header = wire.pack_results([(1, wire.Status.OK, 2, 0.0)])
    message = wire.pack_message([header, b"small", memoryview(array).cast("B")], bulk=_SMALL_BULK)
    recorder = _Recorder()
    send_message(recorder, message)
    first, *chunks = recorder.messages
    assert len(first) == 1, "the pack alone: the part's chunks follow as messages of their own"
    assert len(chunks) == len(message) - 1 and all(c[0] == wire.CHUNK for c in chunks)
    reassembly = Reassembly()
    fed = [reassembly.feed(frames) for frames in recorder.messages]
    assert fed[:-1] == [None] * (len(fed) - 1) and fed[-1] is not None
    got_header, parts = wire.open_message(fed[-1])
    assert got_header == header and bytes(parts[0]) == b"small"
    assert np.array_equal(np.frombuffer(parts[1], dtype=np.float64), array)
    assert not memoryview(parts[1]).readonly and reassembly.pending() == 0


def test_a_message_without_chunks_goes_and_comes_back_as_one(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]]) -> None:
    sender, receiver = pair
    message = wire.pack_message([b"R", b"a", b"x" * wire.ZERO_COPY_MIN])
    send_message(sender, message)
    assert receiver.poll(5000)
    frames = wire.recv_frames(receiver)
    assert len(frames) == len(message) and not receiver.poll(0)
    assert Reassembly().feed(frames) == frames


def test_chunks_of_two_senders_interleaved_on_a_router_each_come_back_whole() -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        router = context.socket(zmq.ROUTER)
        address = f"inproc://router-{id(context)}"
        router.bind(address)
        senders = []
        for name in (b"a", b"b"):
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.IDENTITY, name)
            dealer.connect(address)
            senders.append(dealer)
        parts = {b"a": bytes([1]) * (2 * wire.ZERO_COPY_MIN), b"b": bytes([2]) * (3 * wire.ZERO_COPY_MIN + 7)}
        for dealer, name in zip(senders, (b"a", b"b"), strict=True):
            send_message(dealer, wire.pack_message([b"T" + name, parts[name]], bulk=_SMALL_BULK))
        reassembly = Reassembly()
        whole: dict[bytes, bytes] = {}
        while len(whole) < 2:
            assert router.poll(5000)
            frames = wire.recv_frames(router)  # zmq fair-queues the two peers: their chunks interleave
            message = reassembly.feed(frames[1:], frames[0].bytes)
            if message is not None:
                header, got = wire.open_message(message)
                whole[frames[0].bytes] = bytes(got[0])
                assert header == b"T" + frames[0].bytes
        assert whole == parts
    finally:
        context.destroy(linger=0)


def test_a_new_message_abandons_an_unfinished_one_and_a_stray_chunk_is_dropped() -> None:
    recorder = _Recorder()
    send_message(recorder, wire.pack_message([b"R", b"y" * wire.ZERO_COPY_MIN], bulk=_SMALL_BULK))
    first, *chunks = recorder.messages
    reassembly = Reassembly()
    assert reassembly.feed(first) is None and reassembly.feed(chunks[0]) is None
    assert reassembly.pending() == 1
    assert reassembly.feed([b"R", b"next"]) == [b"R", b"next"]  # its sender gave up on the first
    assert reassembly.pending() == 0
    assert all(reassembly.feed(chunk) is None for chunk in chunks[1:])  # nothing to join: dropped


def test_chunks_that_overrun_or_underfill_their_table_are_refused() -> None:
    recorder = _Recorder()
    send_message(recorder, wire.pack_message([b"R", b"z" * wire.ZERO_COPY_MIN], bulk=_SMALL_BULK))
    first, *chunks = recorder.messages
    reassembly = Reassembly()
    reassembly.feed(first)
    with pytest.raises(ValueError, match="overrun"):
        reassembly.feed([wire.CHUNK, chunks[0][1] * 4])
    assert reassembly.pending() == 0
    reassembly.feed(first)
    for chunk in chunks[:-1]:
        reassembly.feed(chunk)
    with pytest.raises(ValueError, match="do not add up"):
        reassembly.feed([wire.CHUNK, chunks[-1][1][:-1]])


_sizes = st.sampled_from([0, 1, wire.ZERO_COPY_MIN - 1, wire.ZERO_COPY_MIN, 2 * wire.ZERO_COPY_MIN + 5])


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(_sizes, max_size=6), chunk=st.integers(1000, wire.ZERO_COPY_MIN), data=st.data())
def test_any_message_sent_in_chunk_messages_reads_back_as_it_was_sent(
    sizes: list[int], chunk: int, data: st.DataObject
) -> None:
    bulk = BulkFrames(threshold=wire.ZERO_COPY_MIN, chunk=chunk)
    parts = [bytes([data.draw(st.integers(0, 255))]) * size for size in sizes]
    whole = _through(wire.pack_message([b"T", *parts], bulk=bulk), Reassembly())
    assert len(whole) == 1
    header, got = wire.open_message(whole[0])
    assert header == b"T" and [bytes(p) for p in got] == parts


def test_a_pickled_array_in_chunk_messages_unpickles_equal_and_writable() -> None:
    array = np.arange(3 * wire.ZERO_COPY_MIN // 8, dtype=np.int64)
    (whole,) = _through(wire.pack_message([b"R", *serialize.dumps_result(array)], bulk=_SMALL_BULK), Reassembly())
    _, parts = wire.open_message(whole)
    got = serialize.loads(parts)
    assert np.array_equal(got, array) and got.flags.writeable
