"""Shared memory for a Local pool's large buffers: the pure decisions, the segment writer
and reader, and the wire's packing of segment references (skyward.transport.shm)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.errors import SharedMemoryError
from skyward.providers.local_sweep import swept_pool_ids
from skyward.transport import serialize, wire
from skyward.transport.shm import (
    CAPACITY_STEP,
    FREE_MARGIN,
    KEEP_FREE,
    KEEP_IDLE,
    SharedMemory,
    capacity_for,
    decode_ref,
    encode_ref,
    fits,
    pool_of,
    pool_segments,
    remove_pool_segments,
    room_for,
    segment_name,
    shared_memory_applies,
    to_trim,
)

POOL = "sky-0badcafe"
_cloud_names = st.text(min_size=0, max_size=20).filter(lambda name: name != "local")


@given(provider=_cloud_names, transport=st.sampled_from(["ipc", "tcp", "", "udp"]))
def test_no_provider_but_local_ever_uses_shared_memory(provider: str, transport: str) -> None:
    assert not shared_memory_applies(provider, transport)


@pytest.mark.parametrize("provider", ["aws", "digitalocean", "runpod", "vastai", "verda", "localhost", "Local"])
def test_a_cloud_pool_over_tcp_never_uses_shared_memory(provider: str) -> None:
    assert not shared_memory_applies(provider, "tcp")


def test_a_local_pool_uses_shared_memory_over_ipc_and_tcp_alike() -> None:
    assert shared_memory_applies("local", "ipc")
    assert shared_memory_applies("local", "tcp")
    assert not shared_memory_applies("local", "carrier-pigeon")


@given(pool=st.from_regex(r"sky-[0-9a-f-]{1,16}", fullmatch=True), token=st.from_regex(r"[0-9a-f]{16}", fullmatch=True))
def test_a_segment_name_carries_its_pool_id(pool: str, token: str) -> None:
    assert pool_of(segment_name(pool, token)) == pool


@pytest.mark.parametrize("name", ["skyward-", "skyward-sky-1-", "other-sky-1-0123456789abcdef", "skyward-sky-1-ab/cd"])
def test_a_name_that_is_not_a_segment_of_ours_has_no_pool(name: str) -> None:
    assert pool_of(name) is None


@given(
    name=st.from_regex(r"skyward-sky-[0-9a-f]{8}-[0-9a-f]{16}", fullmatch=True),
    length=st.integers(0, 2**63),
    generation=st.integers(0, 2**64 - 1),
)
def test_a_reference_reads_back_as_written(name: str, length: int, generation: int) -> None:
    assert decode_ref(encode_ref(name, length, generation)) == (name, length, generation)


@given(size=st.integers(0, 2**40))
def test_a_new_segment_holds_its_buffer_in_whole_steps(size: int) -> None:
    capacity = capacity_for(size)
    assert capacity >= size and capacity % CAPACITY_STEP == 0 and capacity - size <= CAPACITY_STEP
    assert fits(capacity, size)


@given(capacity=st.integers(1, 2**40).map(capacity_for), size=st.integers(0, 2**40))
def test_a_free_segment_takes_a_buffer_no_larger_and_not_under_half_its_size(capacity: int, size: int) -> None:
    assert fits(capacity, size) == (size <= capacity <= 2 * capacity_for(size))
    if fits(capacity, size):
        assert capacity <= 2 * size + 2 * CAPACITY_STEP


@given(
    free=st.lists(st.tuples(st.integers(1, 2**33), st.floats(0, 1000)), max_size=8),
    now=st.floats(0, 2000),
)
def test_the_free_segments_kept_are_recent_and_within_the_budget(free: list[tuple[int, float]], now: float) -> None:
    gone = set(to_trim(free, now))
    kept = [free[i] for i in range(len(free)) if i not in gone]
    assert sum(capacity for capacity, _ in kept) <= KEEP_FREE
    assert all(now - used <= KEEP_IDLE for _, used in kept)
    for i in gone:  # removed: idle, or it would not fit beside the more recent ones kept
        capacity, used = free[i]
        newer = sum(c for c, u in kept if u >= used)
        assert now - used > KEEP_IDLE or newer + capacity > KEEP_FREE


@given(size=st.integers(0, 2**40), free=st.integers(0, 2**40))
def test_a_buffer_fits_only_with_the_margin_left_free(size: int, free: int) -> None:
    assert room_for(size, free) == (size + FREE_MARGIN <= free)


def test_a_buffer_read_back_from_its_segment_is_the_same(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, directory=tmp_path)
    data = os.urandom(3 * 2**20)
    ref = shm.put(data)
    assert ref is not None
    (segment,) = pool_segments(POOL, tmp_path)
    assert stat.S_IMODE(os.stat(segment).st_mode) == 0o600
    view = shm.take(ref)
    assert bytes(view) == data
    view[0] = 0  # the receiver's own (writable) view
    view.release()


def test_a_segment_is_reused_only_once_its_receiver_holds_no_view_of_it(tmp_path: Path) -> None:
    sender, receiver = SharedMemory(POOL, directory=tmp_path), SharedMemory(POOL, directory=tmp_path)
    first = np.frombuffer(receiver.take(sender.put(b"a" * 2**20)), dtype=np.uint8)
    second = receiver.take(sender.put(b"b" * 2**20))
    assert len(pool_segments(POOL, tmp_path)) == 2  # the first is still read: the second took a new one
    tail = second[2**19 :]  # a slice keeps the mapping (and so the segment) busy
    del second
    del first  # its receiver is done with the first segment
    third = receiver.take(sender.put(b"c" * 2**20))
    assert len(pool_segments(POOL, tmp_path)) == 2, "the third buffer reuses the first segment"
    assert bytes(tail) == b"b" * 2**19 and bytes(third) == b"c" * 2**20


def test_a_reference_to_an_earlier_use_of_a_segment_is_refused(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, directory=tmp_path)
    stale = shm.put(b"x" * 2**20)
    assert stale is not None
    shm.take(stale).release()
    assert shm.put(b"y" * 2**20) is not None  # the same segment, the next generation
    with pytest.raises(ValueError, match="holds generation 2, not the 1 sent"):
        shm.take(stale)


def test_a_closed_sender_removes_its_free_segments_and_the_receiver_of_a_busy_one_removes_it(tmp_path: Path) -> None:
    sender, receiver = SharedMemory(POOL, directory=tmp_path), SharedMemory(POOL, directory=tmp_path)
    receiver.take(sender.put(b"f" * 2**20)).release()
    view = receiver.take(sender.put(b"k" * 4 * 2**20))
    assert len(pool_segments(POOL, tmp_path)) == 2
    sender.close()
    assert len(pool_segments(POOL, tmp_path)) == 1, "the free one is gone, the one still read stays"
    assert bytes(view[:4]) == b"kkkk"
    view.release()
    assert pool_segments(POOL, tmp_path) == [], "its receiver removed it as it released it"
    assert sender.put(b"k" * 2**20) is None  # a closed pool's buffers take the socket


def test_a_reference_to_another_pool_s_segment_is_refused(tmp_path: Path) -> None:
    other = SharedMemory("sky-other", directory=tmp_path)
    ref = other.put(b"x" * 2**20)
    assert ref is not None
    with pytest.raises(ValueError, match="not a segment of pool"):
        SharedMemory(POOL, directory=tmp_path).take(ref)


def test_a_segment_of_another_length_is_refused(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, directory=tmp_path)
    ref = shm.put(b"x" * 2**20)
    assert ref is not None
    name, length, generation = decode_ref(ref)
    with pytest.raises(ValueError, match="0600 segment"):
        shm.take(encode_ref(name, length + CAPACITY_STEP + 1, generation))


def test_too_little_free_space_falls_back_to_the_socket_with_one_line(tmp_path: Path) -> None:
    said: list[str] = []
    shm = SharedMemory(POOL, directory=tmp_path, free_space=lambda: 10 * 2**20, warn=said.append)
    assert shm.put(b"x" * 2**20) is None
    assert shm.put(b"y" * 2**20) is None
    assert len(said) == 1 and "through the socket" in said[0] and "MiB free" in said[0]
    assert pool_segments(POOL, tmp_path) == []


def test_a_segment_that_cannot_be_created_falls_back_to_the_socket_with_one_line(tmp_path: Path) -> None:
    said: list[str] = []
    shm = SharedMemory(POOL, directory=tmp_path / "missing", free_space=lambda: 2**40, warn=said.append)
    assert shm.put(b"x" * 2**20) is None
    assert len(said) == 1 and "cannot create a segment" in said[0]


def test_a_packed_message_s_large_parts_travel_through_shared_memory(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path)
    big, middle = os.urandom(2**20 + 3), os.urandom(wire.ZERO_COPY_MIN)
    physical = wire.pack_message([b"R-head", big, b"small", middle], shm)
    assert len(physical) == 2  # the pack and the middle part; the big one is in a segment
    assert len(pool_segments(POOL, tmp_path)) == 1
    header, parts = wire.open_message(physical, shm)
    assert header == b"R-head" and [bytes(p) for p in parts] == [big, b"small", middle]


def test_a_header_and_one_large_buffer_are_packed_when_the_buffer_goes_through_shared_memory(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path)
    big = os.urandom(2**20)
    physical = wire.pack_message([b"R-head", big], shm)
    assert len(physical) == 1
    assert [bytes(p) for p in wire.open_message(physical, shm)[1]] == [big]


def test_a_message_with_a_segment_is_refused_where_the_pool_uses_no_shared_memory(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path)
    physical = wire.pack_message([b"R-head", b"z" * 2**20], shm)
    with pytest.raises(ValueError, match="uses no shared memory"):
        wire.open_message(physical)


def test_the_segments_of_a_message_not_sent_are_discarded(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path)
    physical = wire.pack_message([b"R-head", b"a" * 2**20, b"b", b"c" * 2**20], shm)
    assert len(wire.shm_refs(physical)) == 2 == len(pool_segments(POOL, tmp_path))
    shm.discard(wire.shm_refs(physical))
    again = wire.pack_message([b"R-head", b"d" * 2**20, b"e" * 2**20], shm)
    assert len(pool_segments(POOL, tmp_path)) == 2, "the discarded message's segments are free to reuse"
    assert [bytes(p) for p in wire.open_message(again, shm)[1]] == [b"d" * 2**20, b"e" * 2**20]


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 5, wire.ZERO_COPY_MIN, 2**17, 2**17 + 1]), max_size=6))
def test_any_message_reads_back_through_shared_memory(sizes: list[int]) -> None:
    directory = Path(os.environ.get("TMPDIR", "/tmp"))
    shm = SharedMemory("sky-hypo" + str(os.getpid()), threshold=2**17, directory=directory)
    parts = [bytes([i % 256]) * size for i, size in enumerate(sizes)]
    physical = wire.pack_message([b"H", *parts], shm)
    header, got = wire.open_message(physical, shm)
    assert header == b"H" and [bytes(p) for p in got] == parts
    del got  # the receiver is done: the closing sender can remove every segment
    shm.close()
    assert pool_segments(shm.pool_id, directory) == []


def test_a_numpy_array_unpickles_as_a_view_of_its_segment(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path)
    array = np.arange(2**18, dtype=np.float64)
    frames = serialize.dumps(array)
    head, parts = wire.open_message(wire.pack_message([b"R", *frames], shm), shm)
    got = serialize.loads(parts)
    assert np.array_equal(got, array) and got.flags.writeable
    assert head == b"R"


def test_a_closed_pool_s_segments_are_removed_and_no_other_pool_s(tmp_path: Path) -> None:
    for pool in (POOL, POOL, "sky-else"):
        SharedMemory(pool, directory=tmp_path).put(b"x" * 2**20)
    assert len(remove_pool_segments(POOL, tmp_path)) == 2
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(p) for p in pool_segments("sky-else", tmp_path)]


def test_a_swept_run_directory_names_its_pool() -> None:
    removed = [Path("/tmp/skyward-sky-1a2b3c4d-x_9k2mzq"), Path("/tmp/skyward-sky-ff-00aa11bb-abcd1234")]
    assert swept_pool_ids(removed) == ["sky-1a2b3c4d", "sky-ff-00aa11bb"]


def test_a_message_whose_buffer_finds_no_room_travels_whole_on_the_socket(tmp_path: Path) -> None:
    said: list[str] = []
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path, free_space=lambda: 2**20, warn=said.append)
    big = os.urandom(2**20 + 1)
    physical = wire.pack_message([b"R-head", b"s", big], shm)
    assert len(physical) == 2 and bytes(physical[1]) == big  # its own frame, as without shared memory
    header, parts = wire.open_message(physical, shm)
    assert header == b"R-head" and [bytes(p) for p in parts] == [b"s", big]
    assert len(said) == 1 and pool_segments(POOL, tmp_path) == []


def test_a_segment_gone_before_it_is_read_fails_its_task_not_the_reader(tmp_path: Path) -> None:
    shm = SharedMemory(POOL, threshold=2**20, directory=tmp_path)
    frames = serialize.dumps(np.ones(2**18))
    physical = wire.pack_message([b"R", *frames], shm)
    remove_pool_segments(POOL, tmp_path)  # another process removed it from /dev/shm
    header, parts = wire.open_message(physical, shm)
    assert header == b"R"
    with pytest.raises(SharedMemoryError, match="could not be read"):
        serialize.loads(parts)


def test_a_free_segment_idle_past_its_time_is_removed_at_the_next_send(tmp_path: Path) -> None:
    now = [0.0]
    sender = SharedMemory(POOL, directory=tmp_path, clock=lambda: now[0])
    receiver = SharedMemory(POOL, directory=tmp_path)
    receiver.take(sender.put(b"a" * 2**20)).release()
    now[0] = KEEP_IDLE + 1
    view = receiver.take(sender.put(b"b" * 8 * 2**20))  # too large for the idle one: a new segment
    assert len(pool_segments(POOL, tmp_path)) == 1, "the idle free segment was removed"
    view.release()
