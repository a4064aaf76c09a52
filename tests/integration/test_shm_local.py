"""A Local pool's large buffers travel through /dev/shm both ways, and no segment outlives
its pool, whatever way the pool ends (skyward.transport.shm)."""

from __future__ import annotations

import importlib.util
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import skyward as sky
from skyward.errors import WorkerDiedError
from skyward.transport.shm import SHM_MIN, SharedMemory, pool_segments

pytestmark = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="POSIX shared memory in /dev/shm (Linux)")

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _through_shm(value: Any) -> bool:
    """Whether an unpickled array's memory is a mapped segment (not a socket frame, nor
    the anonymous mapping that chunks over tcp are joined into: ``bulk.fresh_buffer``)."""
    base = value
    while getattr(base, "base", None) is not None:
        base = base.base
    return isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap) and _file_backed(base.obj)


def _file_backed(mapping: mmap.mmap) -> bool:
    """A segment's mapping has a file behind it (its size is the file's); an anonymous one has none."""
    try:
        mapping.size()
    except OSError:
        return False
    return True


@sky.compute
def echo_and_origin(value: Any) -> tuple[Any, bool]:
    first = value[0] if isinstance(value, list) else value
    return value, _through_shm(first)


def _values() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    n = SHM_MIN // 8 + 4096  # just over the threshold: the lightest value that takes the segment path
    side = int(np.sqrt(n)) + 1
    values: dict[str, Any] = {
        "float64": rng.random(n),
        "int8": rng.integers(-128, 127, SHM_MIN + 1, dtype=np.int8),
        "complex64": (rng.random(n) + 1j).astype(np.complex64),
        "bool-2d": (rng.random((side * 4, side * 2)) > 0.5),
        "fortran": np.asfortranarray(rng.random((side, side))),
        "non-contiguous": rng.random((side, side * 2))[:, ::2],
        "bytes": os.urandom(SHM_MIN + 17),
        "bytearray": bytearray(os.urandom(SHM_MIN + 1)),
        "list-of-arrays": [rng.random(n), np.arange(SHM_MIN // 4 + 1, dtype=np.int32), rng.random(3)],
    }
    return values


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return type(a) is type(b) and bool(a == b)


@pytest.fixture(scope="module", params=["ipc", "tcp"])
def pool(request: pytest.FixtureRequest) -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=1, display="quiet", provider=sky.Local(transport=request.param)) as opened:
        yield opened
    assert pool_segments(opened.spec.pool_id) == []


@pytest.mark.parametrize("kind", list(_values()))
def test_every_out_of_band_type_round_trips_through_shared_memory_both_ways(pool: sky.ComputePool, kind: str) -> None:
    value = _values()[kind]
    back, worker_mapped = echo_and_origin(value) >> pool
    assert _equal(back, value)
    # bytes are rebuilt (copied) on arrival, and numpy pickles a non-contiguous array in band
    # (its pickle, a part as large, still goes through a segment): no view to check
    if isinstance(value, np.ndarray | list) and kind != "non-contiguous":
        assert worker_mapped, "the worker read its argument from a segment"
        assert _through_shm(back[0] if isinstance(back, list) else back), "the client read the result from a segment"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_a_cpu_tensor_round_trips_through_shared_memory(pool: sky.ComputePool) -> None:
    import torch  # optional: only this test needs it

    tensor = torch.arange(SHM_MIN // 4 + 1024, dtype=torch.float32).reshape(1024, -1)
    back, _ = echo_and_origin(tensor) >> pool
    assert torch.equal(back, tensor)


def test_small_buffers_keep_to_the_socket(pool: sky.ComputePool) -> None:
    value = np.arange(SHM_MIN // 16, dtype=np.float64)  # out of band, under the threshold
    back, worker_mapped = echo_and_origin(value) >> pool
    assert np.array_equal(back, value) and not worker_mapped and not _through_shm(back)


@sky.compute
def arrays(count: int) -> Iterator[np.ndarray]:
    for i in range(count):
        yield np.full(SHM_MIN // 8 + 1, i, dtype=np.float64)


def test_a_stream_s_large_values_arrive_through_shared_memory(pool: sky.ComputePool) -> None:
    got = list(pool.stream(arrays(3), window=2))
    assert [int(a[0]) for a in got] == [0, 1, 2] and all(a.size == SHM_MIN // 8 + 1 for a in got)
    assert all(_through_shm(a) for a in got)


def test_round_trips_reuse_the_segments_of_the_first_and_results_kept_stay_intact(pool: sky.ComputePool) -> None:
    array = np.arange(SHM_MIN // 8 + 1, dtype=np.float64)
    kept, _ = echo_and_origin(array) >> pool
    after_one = len(pool_segments(pool.spec.pool_id))
    assert after_one >= 2, "the client's segment and the worker's stay for reuse"
    for _ in range(4):
        back, _ = echo_and_origin(array + 1) >> pool
        assert np.array_equal(back, array + 1)
        del back
    # one segment each way for a result the client dropped; the one it keeps holds a third
    assert len(pool_segments(pool.spec.pool_id)) <= after_one + 1
    assert np.array_equal(kept, array), "a result still held is never overwritten"


@sky.compute
def fail_after_reading(value: np.ndarray) -> None:
    raise ValueError(f"refused {value.nbytes} bytes")


@sky.compute
def die(value: np.ndarray) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_no_segment_outlives_a_pool_closed_by_an_exception_after_failed_and_killed_tasks() -> None:
    big = np.ones(SHM_MIN // 8, dtype=np.float64)
    with pytest.raises(RuntimeError, match="the user's own"), sky.ComputePool(nodes=1, display="quiet") as pool:
        pool_id = pool.spec.pool_id
        with pytest.raises(ValueError, match="refused"):
            fail_after_reading(big) >> pool
        with pytest.raises(WorkerDiedError):
            die(big) >> pool
        # segments the client keeps for reuse, one whose message nobody reads (its
        # receiver died first) and one of another process of this pool ...
        SharedMemory(pool_id).put(big.data)
        assert len(pool_segments(pool_id)) >= 2
        raise RuntimeError("the user's own error")
    # ... until the pool closes, whichever way
    assert pool_segments(pool_id) == []


def test_no_segment_outlives_a_client_killed_with_sigkill(monkeypatch: pytest.MonkeyPatch) -> None:
    # A private temp dir for both pools, as in test_lifetime: another Local pool starting on
    # this machine would otherwise sweep the dead client's run directory (and segments) first.
    private_tmp = tempfile.mkdtemp(prefix="sky-shm-")
    monkeypatch.setattr(tempfile, "tempdir", private_tmp)
    script = textwrap.dedent(
        """
        import time, numpy as np, skyward as sky
        from skyward.transport.shm import SharedMemory

        @sky.compute
        def echo(x):
            return x

        pool = sky.ComputePool(nodes=1, display="quiet", provider=sky.Local(grace_period=2.0))
        pool.open()
        assert (echo(np.ones(2**18)) >> pool).sum() == 2**18
        SharedMemory(pool.spec.pool_id).put(b"x" * 2**21)  # a message in flight when the client dies
        print(pool.spec.pool_id, flush=True)
        time.sleep(600)
        """
    )
    client = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=dict(os.environ, TMPDIR=private_tmp)
    )
    assert client.stdout is not None
    pool_id = client.stdout.readline().strip()
    try:
        assert len(pool_segments(pool_id)) == 1
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    assert len(pool_segments(pool_id)) == 1, "nobody removes a killed client's segments before the next pool"
    with sky.ComputePool(nodes=1, display="quiet") as pool:
        assert any(pool_id in path.name for path in pool._driver.swept)  # type: ignore[attr-defined]
        assert pool_segments(pool_id) == []
    assert pool_segments(pool.spec.pool_id) == []
    os.rmdir(private_tmp)  # nothing else was left in it


def _mapped_segments(pool_id: str) -> list[str]:
    with open("/proc/self/maps") as maps:
        return [line for line in maps if f"skyward-{pool_id}-" in line]


def test_a_closed_pool_leaves_the_client_mapping_only_the_results_it_holds() -> None:
    array = np.arange(SHM_MIN // 8 + 1, dtype=np.float64)
    with sky.ComputePool(nodes=1, display="quiet") as pool:
        kept, _ = echo_and_origin(array) >> pool
        dropped, _ = echo_and_origin(array * 2) >> pool
        del dropped
        assert len(_mapped_segments(pool.spec.pool_id)) >= 2  # its own segment, kept for reuse, and the result
    assert len(_mapped_segments(pool.spec.pool_id)) == 1, "only the result still held"
    assert np.array_equal(kept, array)
    del kept
    assert _mapped_segments(pool.spec.pool_id) == []


@sky.compute
def large_result() -> np.ndarray:
    return np.full(SHM_MIN // 8 + 1, sky.instance_info().node, dtype=np.float64)


def test_a_worker_leaving_a_pool_that_goes_on_removes_its_segments() -> None:
    nodes = sky.Nodes(desired=2, min=1, max=2)
    with sky.ComputePool(nodes=nodes, display="quiet", autoscale_cooldown=0.2, autoscale_idle_timeout=600.0) as pool:
        deadline = time.monotonic() + 60  # an elastic pool opens as its first node answers
        while len(pool.nodes) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        first, second = sorted(int(a[0]) for a in large_result() @ pool)  # dropped: both segments free
        assert (first, second) == (0, 1) and len(pool_segments(pool.spec.pool_id)) == 2
        pool.resize(1)
        deadline = time.monotonic() + 60
        while len(pool.nodes) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pool.nodes) == 1
        deadline = time.monotonic() + 30  # the node's processes are stopped after it leaves pool.nodes
        while len(pool_segments(pool.spec.pool_id)) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pool_segments(pool.spec.pool_id)) == 1, "only the remaining worker's segment is left"
