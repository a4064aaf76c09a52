"""Over tcp (CURVE) a large buffer travels as a run of chunk frames of its message, so
the two ends' CURVE work overlaps (``skyward.transport.bulk``); the receiver puts the
chunks back together as one buffer, and refuses chunks that do not match their table."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.transport import serialize, wire
from skyward.transport.bulk import BulkFrames, join_chunks
from skyward.transport.links import Links

_SMALL_BULK = BulkFrames(threshold=wire.ZERO_COPY_MIN, chunk=wire.ZERO_COPY_MIN // 3)


def test_a_large_buffer_travels_as_chunk_frames_and_reads_back_as_one_writable_buffer(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]],
) -> None:
    sender, receiver = pair
    bulk = BulkFrames(threshold=4 * 2**20, chunk=2**20)
    large = np.arange(5 * 2**20 // 8 + 3, dtype=np.float64)  # 5 MiB and 24 bytes: six chunks, the last short
    header = wire.pack_results([(1, wire.Status.OK, 2, 0.0)])
    wire.send_frames(sender, wire.pack_message([header, b"small", memoryview(large).cast("B")], bulk=bulk))
    assert receiver.poll(5000)
    frames = wire.recv_frames(receiver)
    assert len(frames) == 1 + 6, "the pack, then one frame per chunk"
    got_header, parts = wire.open_message(frames)
    assert got_header == header
    assert bytes(parts[0]) == b"small"
    assert np.array_equal(np.frombuffer(parts[1], dtype=np.float64), large)
    assert not parts[1].readonly, "the chunks are copied into memory of the receiver's own"


def test_a_buffer_under_the_threshold_keeps_its_one_zero_copy_frame() -> None:
    bulk = BulkFrames(threshold=4 * 2**20, chunk=2**20)
    part = b"x" * (4 * 2**20 - 1)
    physical = wire.pack_message([b"R", b"a", part], bulk=bulk)
    assert len(physical) == 2 and physical[1] is part


def test_a_header_and_one_large_part_are_packed_when_the_part_is_chunked() -> None:
    part = bytes(range(256)) * (wire.ZERO_COPY_MIN // 256)
    physical = wire.pack_message([b"R", part], bulk=_SMALL_BULK)
    assert physical[0][:1] == wire.PACKED and len(physical) == 1 + 4
    header, parts = wire.open_message(physical)
    assert (header, [bytes(p) for p in parts]) == (b"R", [part])


_sizes = st.sampled_from([0, 1, wire.ZERO_COPY_MIN - 1, wire.ZERO_COPY_MIN, 2 * wire.ZERO_COPY_MIN + 5])


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(_sizes, max_size=8), chunk=st.integers(1000, wire.ZERO_COPY_MIN), data=st.data())
def test_any_message_with_chunked_parts_reads_back_as_it_was_sent(
    sizes: list[int], chunk: int, data: st.DataObject
) -> None:
    bulk = BulkFrames(threshold=wire.ZERO_COPY_MIN, chunk=chunk)
    parts = [bytes([data.draw(st.integers(0, 255))]) * size for size in sizes]
    physical = wire.pack_message([b"T", *parts], bulk=bulk)
    chunked = [size for size in sizes if size >= wire.ZERO_COPY_MIN]
    if chunked:
        assert len(physical) == 1 + sum(-(-size // chunk) for size in chunked)
    header, got = wire.open_message(physical)
    assert header == b"T"
    assert [bytes(p) for p in got] == parts


def test_chunks_that_do_not_match_their_table_are_refused() -> None:
    part = b"y" * wire.ZERO_COPY_MIN
    physical = wire.pack_message([b"R", b"a", part], bulk=_SMALL_BULK)
    assert len(physical) == 1 + 4
    with pytest.raises(ValueError, match="does not match"):
        wire.open_message(physical[:-1])  # a chunk missing
    with pytest.raises(ValueError, match="does not match"):
        wire.open_message([*physical, b"extra"])  # one chunk too many
    with pytest.raises(ValueError, match="announced"):
        wire.open_message([*physical[:-1], bytes(physical[-1])[:-1]])  # the last chunk cut short
    with pytest.raises(ValueError, match="announced"):
        wire.open_message([*physical[:-1], bytes(physical[-1]) + b"z"])  # the last chunk too long


def test_join_chunks_refuses_chunks_that_do_not_add_up() -> None:
    assert bytes(join_chunks([b"ab", memoryview(b"cd")], 4)) == b"abcd"
    with pytest.raises(ValueError, match="the 5 bytes their table announced"):
        join_chunks([b"ab", b"cd"], 5)
    with pytest.raises(ValueError, match="the 3 bytes their table announced"):
        join_chunks([b"ab", b"cd"], 3)


def test_a_pickled_array_goes_through_chunks_and_unpickles_equal() -> None:
    array = np.arange(3 * wire.ZERO_COPY_MIN // 8, dtype=np.int64)
    frames = serialize.dumps_result(array)
    assert len(frames) == 2, "the array is an out-of-band buffer beside its pickle"
    header, parts = wire.open_message(wire.pack_message([b"R", *frames], bulk=_SMALL_BULK))
    assert header == b"R"
    got = serialize.loads(parts)
    assert np.array_equal(got, array)
    assert pickle.loads(pickle.dumps(got)).tolist() == array.tolist()


def test_only_tcp_links_chunk() -> None:
    links = Links(None, bulk=_SMALL_BULK)
    try:
        assert links.bulk("tcp://10.0.0.5:16790") is _SMALL_BULK
        assert links.bulk("ipc:///tmp/skyward/worker-0.sock") is None
    finally:
        links.context.destroy(linger=0)


@pytest.mark.parametrize(
    ("threshold", "chunk", "names"),
    [(2**20, 0, "chunk=0"), (2**20, True, "chunk=True"), (100, 2**20, "threshold=100"), (2.5, 1, "threshold=2.5")],
)
def test_a_bulk_setting_that_cannot_work_is_refused_naming_it(threshold: int, chunk: int, names: str) -> None:
    with pytest.raises(ValueError, match=names.replace("(", r"\(")):
        BulkFrames(threshold=threshold, chunk=chunk)
