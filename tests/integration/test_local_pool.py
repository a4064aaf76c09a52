"""A real Local pool end to end: agents and workers are processes, sockets are real."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import skyward as sky
from skyward.errors import ConfigurationError, WorkerDiedError
from skyward.transport.client import RemoteTraceback


class CustomError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"custom failure {code}")
        self.code = code


@sky.compute
def square(x: int) -> int:
    return x * x


@sky.compute
def whoami() -> tuple[int, int, int, int, bool, str]:
    info = sky.instance_info()
    return info.node, info.worker, info.total_nodes, info.workers_per_node, info.is_head, info.job_id


@sky.compute
def fail(code: int) -> None:
    raise CustomError(code)


@sky.compute
def die(how: str) -> int:
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "segfault":
        ctypes.string_at(0)
    if how == "exit":
        os._exit(7)
    return os.getpid()


@sky.compute
def pid() -> int:
    return os.getpid()


@sky.compute
def echo_array(a: np.ndarray) -> np.ndarray:
    a += 1  # arrays arrive writable
    return a


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period=10)) as p:
        yield p


def test_operators_end_to_end(pool: sky.ComputePool) -> None:
    assert (square(7) >> pool) == 49
    a, b, c = (square(1) & square(2) & whoami()) >> pool
    assert (a, b) == (1, 4) and c[2] == 2
    assert (sky.gather(*[square(i) for i in range(50)]) >> pool) == tuple(i * i for i in range(50))


def test_broadcast_reaches_every_worker_with_correct_info(pool: sky.ComputePool) -> None:
    infos = whoami() @ pool
    assert [(i[0], i[1]) for i in infos] == [(0, 0), (1, 0)]
    assert [i[4] for i in infos] == [True, False]
    assert {i[5] for i in infos} == {pool.spec.pool_id}


@sky.compute
def cuda_visible_devices() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def test_a_pool_that_asks_for_no_accelerator_sees_no_gpu(pool: sky.ComputePool) -> None:
    # as on a CPU cloud node; every local node seeing every GPU made two ranks share one
    assert cuda_visible_devices() @ pool == ("", "")


def test_remote_exception_keeps_its_type_and_traceback(pool: sky.ComputePool) -> None:
    with pytest.raises(CustomError) as caught:
        fail(42) >> pool
    assert caught.value.code == 42
    cause = caught.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "in fail" in cause.tb and "raise CustomError(code)" in cause.tb


def test_first_failure_in_a_batch_is_raised(pool: sky.ComputePool) -> None:
    with pytest.raises(CustomError, match="custom failure 3"):
        sky.gather(square(1), fail(3), square(2)) >> pool
    assert (square(3) >> pool) == 9  # the pool still serves


@pytest.mark.parametrize(("how", "signal_name"), [("kill", "SIGKILL"), ("segfault", "SIGSEGV"), ("exit", "status 7")])
def test_a_dying_worker_fails_its_task_and_is_replaced(pool: sky.ComputePool, how: str, signal_name: str) -> None:
    before = set(pid() @ pool)
    with pytest.raises(WorkerDiedError, match=rf"worker 0 on node \d .*{signal_name}"):
        die(how) >> pool
    after = set(pid() @ pool)
    assert len(after) == 2 and after != before  # one worker replaced, both serving


def test_unpicklable_argument_is_named_and_nothing_is_sent(pool: sky.ComputePool) -> None:
    with pytest.raises(ConfigurationError, match=r"keyword argument 'x' \(lock\) cannot be pickled"):
        square(x=threading.Lock()) >> pool  # type: ignore[arg-type]


def test_large_arrays_travel_out_of_band_and_come_back(pool: sky.ComputePool) -> None:
    data = np.arange(16 * 2**20 // 8, dtype=np.float64)  # 16 MiB
    result = echo_array(data) >> pool
    assert result.shape == data.shape and result.flags.writeable
    np.testing.assert_array_equal(result, data + 1)


def test_logs_stream_back_while_the_task_runs(tmp_path: Path) -> None:
    seen: list[str] = []
    marker = tmp_path / "first line seen"

    @sky.compute
    def chatty(marker: str) -> bool:
        """Prints, then waits for the client to say it saw the first line: the answer is
        whether it did while the task was still running (no wall-clock bound)."""
        import os

        for i in range(5):
            print(f"tick {i}", flush=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not os.path.exists(marker):
            time.sleep(0.02)
        return os.path.exists(marker)

    def on_line(event: sky.LogLine) -> None:
        seen.append(event.line)
        if event.line == "tick 0":
            marker.touch()

    with sky.ComputePool(display="quiet") as p:
        p.on(sky.LogLine, on_line)
        assert (chatty(str(marker)) >> p) is True  # the first line arrived before the task returned
    assert [line for line in seen if line.startswith("tick")] == [f"tick {i}" for i in range(5)]


def test_concurrency_gives_parallel_slots_per_node() -> None:
    @sky.compute
    def nap() -> tuple[int, int, float, float]:
        started = time.time()
        time.sleep(0.5)
        info = sky.instance_info()
        return info.node, info.worker, started, time.time()

    with sky.ComputePool(nodes=1, concurrency=3, display="quiet") as p:
        assert sorted(n[:2] for n in nap() @ p) == [(0, 0), (0, 1), (0, 2)]
        naps = sky.gather(*[nap() for _ in range(3)]) >> p
    # Three slots ran at once: every nap began before any ended (recorded on the node,
    # so a slow shared machine cannot fake or hide it the way a wall-clock bound could).
    assert max(start for *_, start, _ in naps) < min(end for *_, end in naps)


@pytest.mark.slow
def test_a_burst_of_100k_tasks_completes_without_loss(pool: sky.ComputePool) -> None:
    results = sky.gather(*[square(i) for i in range(100_000)]) >> pool
    assert len(results) == 100_000
    assert results[99_999] == 99_999**2 and sum(results) == sum(i * i for i in range(100_000))


def test_pool_stops_itself_after_its_timeout() -> None:
    @sky.compute
    def slow() -> None:
        time.sleep(30)

    with sky.ComputePool(timeout=2, display="quiet") as p:
        started = time.monotonic()
        with pytest.raises(sky.PoolTimeoutError, match="timeout of 2 s"):
            slow() >> p
        assert time.monotonic() - started < 10
        assert not p.is_active


def test_a_different_python_is_refused_at_construction_naming_both() -> None:
    other = "3.12" if sky.Image().python != "3.12" else "3.13"
    with pytest.raises(ConfigurationError, match=rf"python='{other}'.*client's Python {sky.Image().python}"):
        sky.ComputePool(image=sky.Image(python=other), display="quiet")


def test_local_apt_lists_missing_packages() -> None:
    with pytest.raises(sky.ProvisioningError, match="skyward-no-such-package"):
        with sky.ComputePool(image=sky.Image(apt=["skyward-no-such-package"]), display="quiet"):
            pass
