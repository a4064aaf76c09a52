"""The sealed-chunk construction (``skyward.transport.sealed``): every chunk of a transfer
opens into its own place whatever the order, and a chunk changed in any byte, sealed
under another key, replayed, or cut short is refused and leaves the buffer unfinished."""

from __future__ import annotations

import itertools
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from skyward.transport.sealed import (
    HEADER,
    TAG,
    Inbound,
    TransferKey,
    new_transfer,
    seal_chunk,
    sealed_size,
    transfer_of,
)


def _sealed(data: bytes, chunk: int, key: TransferKey | None = None) -> tuple[TransferKey, list[bytes]]:
    key = key or new_transfer(len(data), chunk)
    aead = AESGCM(key.key)
    out = memoryview(bytearray(sealed_size(key)))
    frames: list[bytes] = []
    offset = 0
    for index, start in enumerate(range(0, len(data), chunk)):
        frame = seal_chunk(aead, key, index, memoryview(data)[start : start + chunk], out[offset:])
        offset += frame.nbytes
        frames.append(bytes(frame))
    assert offset == sealed_size(key)
    return key, frames


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=4000),
    chunk=st.integers(min_value=1, max_value=700),
    seed=st.randoms(use_true_random=False),
)
def test_chunks_in_any_order_open_into_the_buffer_they_were_sealed_from(data: bytes, chunk: int, seed: object) -> None:
    key, frames = _sealed(data, chunk)
    order = list(range(len(frames)))
    seed.shuffle(order)  # type: ignore[attr-defined]
    inbound = Inbound(key)
    for position, index in enumerate(order):
        assert not inbound.complete
        assert inbound.open(memoryview(frames[index])), f"chunk {index} (opened {position}th)"
    assert inbound.complete and bytes(inbound.wait(stall=1.0)) == data and inbound.refused == 0


def test_every_single_changed_byte_of_a_chunk_is_refused() -> None:
    data = os.urandom(300)
    key, frames = _sealed(data, 100)
    inbound = Inbound(key)
    frame = frames[1]
    for position in range(len(frame)):
        tampered = bytearray(frame)
        tampered[position] ^= 0x01
        assert not inbound.open(memoryview(bytes(tampered))), f"byte {position} changed"
    assert inbound.refused == len(frame)
    for real in frames:  # the real chunks still go in: refused forgeries changed nothing
        assert inbound.open(memoryview(real))
    assert bytes(inbound.wait(stall=1.0)) == data


def test_a_replayed_chunk_is_refused_and_counted() -> None:
    data = os.urandom(250)
    key, frames = _sealed(data, 100)
    inbound = Inbound(key)
    assert inbound.open(memoryview(frames[0]))
    assert not inbound.open(memoryview(frames[0]))
    assert inbound.refused == 1 and not inbound.complete


def test_a_chunk_of_another_transfer_or_sealed_under_another_key_is_refused() -> None:
    data = os.urandom(200)
    key, frames = _sealed(data, 100)
    _, other = _sealed(data, 100)  # same bytes, another transfer and key
    inbound = Inbound(key)
    assert not inbound.open(memoryview(other[0]))
    # the right transfer id and index, sealed under a key that is not this transfer's
    stolen = TransferKey(key.transfer, AESGCM.generate_key(256), key.length, key.chunk)
    _, forged = _sealed(data, 100, stolen)
    assert not inbound.open(memoryview(forged[0]))
    # a chunk moved to another index (header rewritten): the index is bound by the tag
    moved = bytearray(frames[0])
    HEADER.pack_into(moved, 0, key.transfer, 1)
    assert not inbound.open(memoryview(bytes(moved)))
    assert inbound.refused == 3 and not inbound.complete


@pytest.mark.parametrize("cut", [1, TAG, TAG + HEADER.size])
def test_a_short_or_truncated_chunk_is_refused(cut: int) -> None:
    key, frames = _sealed(os.urandom(200), 100)
    inbound = Inbound(key)
    assert not inbound.open(memoryview(frames[0][:-cut]))
    assert inbound.refused == 1


def test_an_index_past_the_end_is_refused() -> None:
    key, _ = _sealed(os.urandom(200), 100)
    longer = TransferKey(key.transfer, key.key, 300, 100)
    _, frames = _sealed(os.urandom(300), 100, longer)
    inbound = Inbound(key)
    assert not inbound.open(memoryview(frames[2]))


def test_a_transfer_that_stops_arriving_fails_saying_how_much_is_missing() -> None:
    now = itertools.count(step=10)
    key, frames = _sealed(os.urandom(300), 100)
    inbound = Inbound(key, clock=lambda: float(next(now)))
    assert inbound.open(memoryview(frames[0]))
    with pytest.raises(TimeoutError, match="2 of its 3 chunks did not arrive within 5 s"):
        inbound.wait(stall=5.0, step=0.001)


def test_a_transfer_key_round_trips_and_refuses_what_is_malformed() -> None:
    key = new_transfer(10**9, 2**20)
    assert TransferKey.unpack(key.pack()) == key and key.chunks == 954
    assert new_transfer(10, 4).key != new_transfer(10, 4).key  # fresh for each transfer
    with pytest.raises(ValueError, match="SEALED_KEY of 3 bytes"):
        TransferKey.unpack(b"abc")
    with pytest.raises(ValueError, match="16-byte transfer id"):
        TransferKey(b"short", key.key, 10, 4)
    with pytest.raises(ValueError, match="both must be >= 1"):
        TransferKey(key.transfer, key.key, 0, 4)
    assert transfer_of(memoryview(b"x" * 10)) is None
