"""Streams on a real Local pool: a generator's values come back as it yields them, in
order, at most a window ahead of the reader; stopping the loop stops the generator on
the worker (its ``finally`` runs, the worker is freed); failures, a killed worker and the
pool's timeout end a stream cleanly."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil
import pytest
from deadline_support import within
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skyward as sky
from skyward.errors import AbandonedError, ConfigurationError, PoolTimeoutError, WorkerDiedError
from skyward.transport.client import RemoteTraceback


@sky.compute
def numbers(count: int | None, journal: str, tag: str) -> Iterator[int]:
    """Yields 0, 1, ... (forever when ``count`` is None), noting how many it produced and
    that its ``finally`` ran, in files under ``journal``."""
    produced = Path(journal, f"{tag}.produced")
    index = 0
    try:
        while count is None or index < count:
            produced.write_text(str(index + 1))
            yield index
            index += 1
    finally:
        Path(journal, f"{tag}.finally").write_text("ran")


@sky.compute
def small(count: int) -> Iterator[int]:
    yield from range(count)


@sky.compute
def fails_after(count: int) -> Iterator[int]:
    yield from range(count)
    raise ValueError(f"failed after {count}")


@sky.compute
def pid_then_forever() -> Iterator[int]:
    yield os.getpid()
    while True:
        time.sleep(0.01)
        yield 0


@sky.compute
def worker_index() -> int:
    return sky.instance_info().worker


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=1, concurrency=1, display="quiet") as p:
        yield p


def _wait_for(path: Path, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    length=st.integers(0, 200),
    window=st.integers(1, 40),
    stop=st.none() | st.integers(0, 200),
)
def test_values_arrive_in_order_for_any_length_window_and_stopping_point(
    pool: sky.ComputePool, tmp_path_factory: pytest.TempPathFactory, length: int, window: int, stop: int | None
) -> None:
    journal = tmp_path_factory.mktemp("stream")
    seen: list[int] = []
    stream = pool.stream(numbers(length, str(journal), "s"), window=window)

    def read() -> None:
        for value in stream:
            if stop is not None and len(seen) == stop:
                break
            seen.append(value)
        stream.close()

    within("reading the stream up to its stopping point", read)
    expected = list(range(length)) if stop is None else list(range(min(stop, length)))
    assert seen == expected
    # the worker is free again (one worker: this runs only after the generator ended) ...
    assert within("the next task after the stream was stopped", lambda: worker_index() >> pool) == 0
    # ... and its finally ran, whether the stream ended or was stopped
    assert (journal / "s.finally").read_text() == "ran"
    produced = int((journal / "s.produced").read_text()) if (journal / "s.produced").exists() else 0
    # never more than a window ahead of what was read
    assert produced <= len(seen) + window + 1


def test_a_fast_generator_is_paused_a_window_ahead_of_a_slow_reader(pool: sky.ComputePool, tmp_path: Path) -> None:
    with pool.stream(numbers(None, str(tmp_path), "w"), window=8) as stream:
        assert next(stream) == 0
        time.sleep(0.5)  # the generator runs on, until its window is full
        assert int((tmp_path / "w.produced").read_text()) <= 8
        assert [next(stream) for _ in range(20)] == list(range(1, 21))
    assert _wait_for(tmp_path / "w.finally")


def test_breaking_out_of_the_loop_runs_the_workers_finally_and_frees_it(pool: sky.ComputePool, tmp_path: Path) -> None:
    def read_then_break() -> None:
        for value in numbers(None, str(tmp_path), "b") >> pool:
            if value == 5:
                break

    within("reading an endless stream up to a break", read_then_break)
    # the dropped iterator stopped the generator: the next task runs, after its finally
    assert within("the next task after a break out of a stream", lambda: worker_index() >> pool) == 0
    assert (tmp_path / "b.finally").read_text() == "ran"


def test_a_stream_read_then_closed_ends_with_stop_iteration_after_later_calls(
    pool: sky.ComputePool, tmp_path: Path
) -> None:
    """Closed by its reader, a stream is over: the worker's answer to the recall (it
    closed the generator) arrives while the next call runs and must not surface as an
    error on a later ``next``; the stream ran, it was not abandoned unrun."""
    stream = numbers(None, str(tmp_path), "c") >> pool
    assert within("the first value of a stream", lambda: next(stream)) == 0
    stream.close()
    assert within("the next task after a closed stream", lambda: worker_index() >> pool) == 0
    assert _wait_for(tmp_path / "c.finally")  # the worker closed the generator and answered
    assert within("another task", lambda: worker_index() >> pool) == 0
    try:
        next(stream)
    except AbandonedError as error:
        pytest.fail(f"a stream that ran and was closed by its reader raised {error!r}")
    except StopIteration:
        pass
    else:
        pytest.fail("a closed stream gave another value")


def test_a_generators_exception_is_raised_where_it_happened_with_the_remote_traceback(
    pool: sky.ComputePool,
) -> None:
    seen: list[int] = []
    with pytest.raises(ValueError, match="failed after 3") as caught:
        for value in fails_after(3) >> pool:
            seen.append(value)
    assert seen == [0, 1, 2]
    assert isinstance(caught.value.__cause__, RemoteTraceback)
    assert "fails_after" in caught.value.__cause__.tb


def test_broadcast_gives_one_stream_per_worker_and_gather_keeps_order(pool: sky.ComputePool) -> None:
    (only,) = small(3) @ pool
    assert list(only) == [0, 1, 2]
    first, plain, second = sky.gather(small(2), worker_index(), small(4)) >> pool
    assert plain == 0
    assert list(first) == [0, 1]
    assert list(second) == [0, 1, 2, 3]


def test_a_stream_window_must_be_positive(pool: sky.ComputePool) -> None:
    with pytest.raises(ConfigurationError, match="window"):
        pool.stream(small(1), window=0)
    with pytest.raises(ConfigurationError, match="generator"):
        pool.stream(worker_index(), window=4)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="streams its values"):
        pool.submit(small(1))


def test_a_worker_killed_mid_stream_raises_worker_died_at_the_next_value(pool: sky.ComputePool) -> None:
    stream = pid_then_forever() >> pool
    pid = next(stream)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    with pytest.raises(WorkerDiedError):
        while time.monotonic() < deadline:
            next(stream)
    # the node restarted the worker: the pool serves on
    assert worker_index() >> pool == 0


def test_the_pools_timeout_ends_a_stream_on_both_sides(tmp_path: Path) -> None:
    with sky.ComputePool(timeout=3, display="quiet") as short:
        stream = numbers(None, str(tmp_path), "t") >> short
        with pytest.raises(PoolTimeoutError):
            for _ in stream:
                time.sleep(0.01)
    assert _wait_for(tmp_path / "t.finally")


def test_a_million_small_values_stream_with_flat_client_memory(pool: sky.ComputePool) -> None:
    process = psutil.Process()
    stream = small(1_000_000) >> pool
    total = 0
    rss_at_100k = 0
    for index, value in enumerate(stream):
        total += value
        if index == 100_000:
            rss_at_100k = process.memory_info().rss
    grown = process.memory_info().rss - rss_at_100k
    assert total == sum(range(1_000_000))
    # 900,000 more values went through; held as a list they would take ~30 MB here
    assert grown < 10 * 1024 * 1024, f"client memory grew {grown / 1e6:.1f} MB over 900,000 values"


# -- input streams -------------------------------------------------------------------


@sky.compute
def total(values: Iterator[int]) -> int:
    return sum(values)


@sky.compute
def scaled(values: Iterable[int], factor: int) -> Iterator[int]:
    for value in values:
        yield value * factor


@sky.compute
def measure(chunks: Iterator[bytes]) -> tuple[int, int]:
    """Bytes received, and how much this worker's memory grew after the first 100 chunks."""
    process = psutil.Process()
    received = 0
    baseline = 0
    for index, chunk in enumerate(chunks):
        received += len(chunk)
        if index == 100:
            baseline = process.memory_info().rss
    return received, process.memory_info().rss - baseline


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=st.integers(0, 300), stop=st.none() | st.integers(0, 300), factor=st.integers(-3, 3))
def test_an_input_stream_is_read_as_consumed_and_a_stream_can_flow_both_ways(
    pool: sky.ComputePool, length: int, stop: int | None, factor: int
) -> None:
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for value in range(length):
            pulled.append(value)
            yield value

    assert total(source()) >> pool == sum(range(length))
    assert pulled == list(range(length))
    pulled.clear()
    seen = []
    for value in scaled(source(), factor) >> pool:
        if stop is not None and len(seen) == stop:
            break
        seen.append(value)
    expected = [v * factor for v in range(length)]
    assert seen == (expected if stop is None else expected[:stop])
    # the worker was freed
    assert within("the next task after a break out of a two-way stream", lambda: worker_index() >> pool) == 0


def test_an_input_larger_than_the_client_could_hold_streams_with_flat_memory_on_both_sides(
    pool: sky.ComputePool,
) -> None:
    chunk = 1024 * 1024
    count = 2048  # 2 GB in all
    client = psutil.Process()
    peak = 0
    baseline = 0

    def chunks() -> Iterator[bytes]:
        nonlocal peak, baseline
        for index in range(count):
            if index == 100:
                baseline = client.memory_info().rss
            elif index > 100 and index % 64 == 0:
                peak = max(peak, client.memory_info().rss)
            yield bytes(chunk)

    received, worker_growth = measure(chunks()) >> pool
    assert received == chunk * count
    # a window of 1 MB chunks is in flight: far from the 2 GB a list would hold
    assert peak - baseline < 128 * 1024 * 1024, f"client grew {(peak - baseline) / 1e6:.0f} MB"
    assert worker_growth < 128 * 1024 * 1024, f"worker grew {worker_growth / 1e6:.0f} MB"


def test_a_failing_client_iterable_fails_the_task_with_its_own_exception(pool: sky.ComputePool) -> None:
    def broken() -> Iterator[int]:
        yield 1
        raise KeyError("the source broke")

    with pytest.raises(KeyError, match="the source broke"):
        total(broken()) >> pool
    assert worker_index() >> pool == 0
    assert pool.submit(total(iter(range(10)))).result() == 45  # a Future, fed the same way


def test_the_pools_timeout_ends_a_task_waiting_for_input() -> None:
    def slow() -> Iterator[int]:
        yield 1
        time.sleep(3600)  # the client's source stalls: the worker waits for its next item
        yield 2

    with sky.ComputePool(timeout=3, display="quiet") as short:
        started = time.monotonic()
        with pytest.raises(PoolTimeoutError):
            total(slow()) >> short
        assert time.monotonic() - started < 30


def test_an_input_stream_that_is_not_iterable_is_refused_before_anything_is_sent(pool: sky.ComputePool) -> None:
    with pytest.raises(ConfigurationError, match="'values'"):
        total(5) >> pool  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="input stream"):
        total(iter([1])) @ pool


@sky.compute
def my_slot(count: int) -> Iterator[tuple[int, int]]:
    info = sky.instance_info()
    for index in range(count):
        yield info.node * 10 + info.worker, index


def test_broadcast_streams_one_iterator_per_worker_in_node_then_worker_order() -> None:
    with sky.ComputePool(nodes=2, concurrency=2, display="quiet") as wide:
        streams = my_slot(3) @ wide
        assert [list(s) for s in streams] == [[(slot, i) for i in range(3)] for slot in (0, 1, 10, 11)]
