"""Over tcp (CURVE, a cloud node's path) large buffers travel as chunk frames both ways,
arguments and results, and arrive whole and equal (``skyward.transport.bulk``)."""

from __future__ import annotations

import importlib.util
import mmap
import os
from typing import Any

import numpy as np
import pytest

import skyward as sky
from skyward.transport.bulk import BULK_MIN

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _through_chunks(value: Any) -> bool:
    """Whether an unpickled array's memory is a buffer the chunks were joined into (an
    anonymous mapping: ``bulk.fresh_buffer``), not a received socket frame."""
    base = value
    while getattr(base, "base", None) is not None:
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)


@sky.compute
def echo_and_origin(value: Any) -> tuple[Any, bool]:
    return value, _through_chunks(value)


@pytest.fixture(scope="module")
def tcp_pool() -> Any:
    # shared memory off: on a Local pool it would carry these buffers instead of the socket
    with sky.ComputePool(nodes=1, provider=sky.Local(transport="tcp", shared_memory=False), display="quiet") as pool:
        yield pool


@pytest.mark.parametrize(
    "value",
    [
        np.random.default_rng(3).random(BULK_MIN // 8 + 1001),  # just over the threshold, a short last chunk
        np.arange(3 * BULK_MIN // 4, dtype=np.int32).reshape(-1, 64),
        np.asfortranarray(np.random.default_rng(4).random((1100, 1100))),
    ],
    ids=["float64", "int32-2d", "fortran"],
)
def test_a_large_array_goes_and_comes_back_in_chunks_over_tcp(tcp_pool: sky.ComputePool, value: Any) -> None:
    got, arrived_in_chunks = echo_and_origin(value) >> tcp_pool
    assert arrived_in_chunks, "the argument reached the worker as chunks joined into one buffer"
    assert _through_chunks(got), "the result came back as chunks joined into one buffer"
    assert got.dtype == value.dtype and got.shape == value.shape and np.array_equal(got, value)
    got[0] = got[0]  # writable: the joined buffer is the receiver's own


def test_large_bytes_and_a_small_array_round_trip_over_tcp(tcp_pool: sky.ComputePool) -> None:
    data = os.urandom(BULK_MIN + 17)
    got, _ = echo_and_origin(data) >> tcp_pool
    assert bytes(got) == data
    small = np.arange(1000)
    got_small, chunked = echo_and_origin(small) >> tcp_pool
    assert np.array_equal(got_small, small) and not chunked, "a small buffer keeps today's single frame"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_a_large_cpu_tensor_round_trips_over_tcp(tcp_pool: sky.ComputePool) -> None:
    import torch  # optional: only this test needs it

    tensor = torch.arange(BULK_MIN // 4 + 5, dtype=torch.float32).reshape(-1, 1)
    got, _ = echo_and_origin(tensor) >> tcp_pool
    assert isinstance(got, torch.Tensor) and torch.equal(got, tensor)
