"""TASKS and RESULTS travel packed: every small part of a message in one frame, each
large buffer in its own (zero-copy), so a chunk of 16 trivial tasks costs one frame on
each side instead of 17 (``wire.pack_message`` / ``wire.open_message``)."""

from __future__ import annotations

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.transport import wire


def test_a_chunk_of_small_parts_is_one_frame_and_reads_back_part_by_part(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]],
) -> None:
    sender, receiver = pair
    header = wire.pack_results([(i, wire.Status.OK, 1, 0.0) for i in range(16)])
    results = [f"result {i}".encode() for i in range(16)]
    wire.send_frames(sender, wire.pack_message([header, *results]))
    assert receiver.poll(5000)
    frames = wire.recv_frames(receiver)
    assert len(frames) == 1
    got_header, parts = wire.open_message(frames)
    assert got_header == header
    assert [bytes(p) for p in parts] == results


def test_a_large_buffer_keeps_its_own_frame_and_arrives_in_place(
    pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]],
) -> None:
    sender, receiver = pair
    large = memoryview(bytearray(b"x" * wire.ZERO_COPY_MIN))
    wire.send_frames(sender, wire.pack_message([b"T-header", b"small", large, b"after"]))
    assert receiver.poll(5000)
    frames = wire.recv_frames(receiver)
    assert len(frames) == 2
    header, parts = wire.open_message(frames)
    assert header == b"T-header"
    assert parts[1] is frames[1], "the large part is the received zmq.Frame itself, not a copy"
    assert [bytes(parts[0]), bytes(parts[1].buffer), bytes(parts[2])] == [b"small", bytes(large), b"after"]


def test_a_plain_message_one_frame_per_part_reads_the_same(pair: tuple[zmq.Socket[bytes], zmq.Socket[bytes]]) -> None:
    sender, receiver = pair
    sender.send_multipart([wire.pack_recall([7, 8])])
    sender.send_multipart([b"R-header", b"a", b"b"])
    assert receiver.poll(5000)
    header, parts = wire.open_message(wire.recv_frames(receiver))
    assert (wire.unpack_recall(header), parts) == ([7, 8], [])
    header, parts = wire.open_message(wire.recv_frames(receiver))
    assert (header, [bytes(p.buffer) for p in parts]) == (b"R-header", [b"a", b"b"])


_sizes = st.sampled_from([0, 1, 17, wire.ZERO_COPY_MIN - 1, wire.ZERO_COPY_MIN, wire.ZERO_COPY_MIN + 5])


# a header starts with its kind's marker, never PACKED's (a plain message with one would read as a pack)
_headers = st.binary(min_size=1, max_size=40).filter(lambda h: h[:1] != wire.PACKED)


@settings(max_examples=60, deadline=None)
@given(header=_headers, sizes=st.lists(_sizes, max_size=12), data=st.data())
def test_any_message_reads_back_as_it_was_sent(header: bytes, sizes: list[int], data: st.DataObject) -> None:
    parts = [bytes([data.draw(st.integers(0, 255))]) * size for size in sizes]
    physical = wire.pack_message([header, *parts])
    if len(parts) <= 1:
        assert physical == [header, *parts], "a header and one part stay plain"
    else:
        assert len(physical) == 1 + sum(size >= wire.ZERO_COPY_MIN for size in sizes)
    got_header, got_parts = wire.open_message(physical)
    assert got_header == header
    assert [bytes(p) for p in got_parts] == parts


def test_a_pack_whose_table_does_not_match_its_frames_is_refused() -> None:
    physical = wire.pack_message([b"R", b"a", b"b", b"x" * wire.ZERO_COPY_MIN])
    with pytest.raises(ValueError, match="does not match"):
        wire.open_message(physical[:1])  # its large part missing
    with pytest.raises(ValueError, match="does not match"):
        wire.open_message([physical[0][:-1], *physical[1:]])  # cut short
