"""Transport faults on a real Local pool: cancellation reaches workers, futures keep the
``concurrent.futures`` contract, a short task never waits behind a long one, remote exits
stay remote, unreadable results read the same on every path, closing waits for the
teardown, a forked child cannot use its parent's pool."""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import skyward as sky
from skyward.errors import PoolClosedError, RemoteExitError, UnreadableResultError
from skyward.transport.client import RemoteTraceback


@sky.compute
def step(index: int, mode: str, journal: str) -> int:
    """One function for every role, so the client measures it as one (its window)."""
    if mode == "record":
        with open(journal, "a") as f:
            f.write(f"{index}\n")
        time.sleep(0.5)
    elif mode == "fail-when-told":
        while not os.path.exists(journal + ".go"):
            time.sleep(0.005)
        raise ValueError("the first task fails")
    elif mode == "sleep":
        with open(journal, "a") as f:
            f.write(f"start {index}\n")
        time.sleep(index / 1000)
    return index


@sky.compute
def leave(how: str) -> None:
    if how == "exit":
        sys.exit(3)
    raise KeyboardInterrupt


@sky.compute
def return_a_worker_only_type(directory: str) -> object:
    """An instance of a class whose module exists only where the task ran."""
    import importlib

    Path(directory, "only_on_the_worker.py").write_text("class Thing:\n    pass\n")
    sys.path.insert(0, directory)
    module = importlib.import_module("only_on_the_worker")
    return module.Thing()


@sky.compute
def agent_pid() -> int:
    return os.getppid()


@pytest.fixture(scope="module")
def one_worker() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=1, display="quiet", provider=sky.Local(grace_period=10)) as p:
        yield p


def _journal(tmp_path: Path) -> str:
    path = tmp_path / "journal"
    path.write_text("")
    return str(path)


def _recorded(journal: str) -> list[str]:
    return Path(journal).read_text().split()


def test_after_a_gather_fails_the_tasks_a_worker_had_not_begun_never_start(
    one_worker: sky.ComputePool, tmp_path: Path
) -> None:
    journal = _journal(tmp_path)
    sky.gather(*(step(i, "noop", journal) for i in range(8))) >> one_worker  # measured quick: window 16
    batch = sky.gather(step(0, "fail-when-told", journal), *(step(i, "record", journal) for i in range(1, 16)))
    Path(journal + ".go").touch()
    with pytest.raises(ValueError, match="the first task fails"):
        batch >> one_worker
    time.sleep(2.5)  # had the rest not been recalled, five more would have started by now
    ran = _recorded(journal)
    assert len(ran) <= 2, f"tasks {ran} ran after the gather had failed"
    assert step(99, "noop", journal) >> one_worker == 99  # and the worker is free for the next call


def test_a_queued_future_that_is_cancelled_never_runs_and_counts_as_done(
    one_worker: sky.ComputePool, tmp_path: Path
) -> None:
    journal = _journal(tmp_path)
    running = one_worker.submit(step(1500, "sleep", journal))
    queued = [one_worker.submit(step(i, "sleep", journal)) for i in (2, 3, 4, 5)]
    deadline = time.monotonic() + 10
    while not running.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.running()
    assert [f.cancel() for f in queued] == [True] * 4
    assert running.cancel() is False  # it is running: honest, as concurrent.futures specifies
    done, not_done = cf.wait(queued, timeout=5)
    assert len(done) == 4 and not not_done
    assert set(cf.as_completed([running, *queued], timeout=10)) == {running, *queued}
    assert running.result() == 1500
    time.sleep(0.3)
    assert _recorded(journal) == ["start", "1500"]


def test_abandoned_futures_that_a_worker_had_not_begun_never_start(one_worker: sky.ComputePool, tmp_path: Path) -> None:
    """joblib's abort_everything: the backend abandons every future it submitted."""
    journal = _journal(tmp_path)
    sky.gather(*(step(i, "noop", journal) for i in range(40))) >> one_worker  # measured quick: all go at once
    futures = [one_worker.submit(step(ms, "sleep", journal)) for ms in (600, 1, 2, 3, 4, 5)]
    deadline = time.monotonic() + 10
    while not all(f.running() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the first one has begun
    one_worker.abandon(futures)
    assert futures[0].result(timeout=10) == 600
    for future in futures[1:]:  # cancelled while queued here, or taken back from the worker
        assert future.cancelled() or isinstance(future.exception(timeout=10), sky.AbandonedError)
    assert _recorded(journal) == ["start", "600"]


def test_futures_follow_the_standard_state_machine(one_worker: sky.ComputePool, tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    future = one_worker.submit(step(300, "sleep", journal))
    deadline = time.monotonic() + 10
    while not future.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert future.running()
    with pytest.raises(RuntimeError):  # the executor made the transition to running itself
        future.set_running_or_notify_cancel()
    assert future.result(timeout=10) == 300
    assert future.done() and not future.running() and not future.cancelled()
    assert list(cf.as_completed([future])) == [future]


def test_a_short_task_never_waits_behind_a_long_one_while_a_worker_is_idle(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    with sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period=10)) as pool:
        futures = [pool.submit(step(ms, "sleep", journal)) for ms in (2000, 100, 100, 100, 100, 100)]
        order = [f.result() for f in cf.as_completed(futures, timeout=60)]
    assert order[-1] == 2000, f"a 0.1 s task finished after the 2 s one: {order}"


def test_a_remote_sys_exit_is_raised_wrapped_never_as_an_exit_here(one_worker: sky.ComputePool) -> None:
    with pytest.raises(RemoteExitError, match=r"SystemExit\(3\)") as caught:
        leave("exit") >> one_worker
    assert isinstance(caught.value.exception, SystemExit)
    assert isinstance(caught.value.__cause__, RemoteTraceback) and "in leave" in caught.value.__cause__.tb
    with pytest.raises(RemoteExitError, match="KeyboardInterrupt"):
        sky.gather(leave("interrupt")) >> one_worker
    with pytest.raises(RemoteExitError):
        one_worker.submit(leave("exit")).result()


def test_an_unreadable_result_is_the_same_clear_error_on_every_path(
    one_worker: sky.ComputePool, tmp_path: Path
) -> None:
    directory = str(tmp_path / "worker-only")
    os.makedirs(directory)
    errors: list[BaseException] = []
    for run in (
        lambda: return_a_worker_only_type(directory) >> one_worker,
        lambda: sky.gather(return_a_worker_only_type(directory)) >> one_worker,
        lambda: one_worker.submit(return_a_worker_only_type(directory)).result(),
    ):
        with pytest.raises(UnreadableResultError) as caught:
            run()
        errors.append(caught.value)
    for error in errors:
        assert "module 'only_on_the_worker' is not installed on this machine" in str(error)
    assert step(7, "noop", "") >> one_worker == 7


def test_using_a_closed_pool_says_it_was_closed_not_that_a_task_was_outstanding() -> None:
    with sky.ComputePool(display="quiet") as pool:
        pass
    with pytest.raises(PoolClosedError) as caught:
        step(1, "noop", "") >> pool
    assert "outstanding" not in str(caught.value) and "closed" in str(caught.value)


def test_a_forked_child_using_its_parents_pool_gets_a_clear_error(one_worker: sky.ComputePool) -> None:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            step(1, "noop", "") >> one_worker
            message = b"no error"
        except PoolClosedError as error:
            message = str(error).encode()
        except BaseException as error:
            message = f"wrong error {error!r}".encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        finished, _ = os.waitpid(child, os.WNOHANG)
        if finished:
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
        pytest.fail("the forked child blocked on its parent's pool")
    message = os.read(read, 4096).decode()
    os.close(read)
    assert "forked" in message and str(os.getpid()) in message
    assert step(2, "noop", "") >> one_worker == 2  # the parent's pool is untouched


def test_leaving_the_pool_waits_for_a_teardown_its_timeout_started(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    with sky.ComputePool(timeout=3, display="quiet") as pool:
        agent = agent_pid() >> pool
        with pytest.raises(sky.PoolTimeoutError):
            step(30_000, "sleep", journal) >> pool
    with pytest.raises(ProcessLookupError):
        os.kill(agent, 0)  # the node was terminated before the with block returned


@dataclasses.dataclass
class Reading:
    sensor: str
    value: float


class Hostile:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, ("echo a compromised node ran this on the client",)


@sky.compute
def produce(kind: str) -> object:
    if kind == "reading":
        return {"r": Reading("a", 1.5), "array": np.arange(3)}
    if kind == "hostile":
        return Hostile()
    raise CustomFailure("remote")


class CustomFailure(Exception):
    pass


def test_safe_mode_reads_data_and_refuses_a_result_that_would_run_code_here() -> None:
    with sky.ComputePool(display="quiet", safe_results=True) as pool:
        got = produce("reading") >> pool
        assert got["r"] == Reading("a", 1.5) and type(got["r"]) is Reading
        assert list(got["array"]) == [0, 1, 2]
        with pytest.raises(CustomFailure):  # the user's own exceptions are read too
            produce("fail") >> pool
        for run in (lambda: produce("hostile") >> pool, lambda: sky.gather(produce("hostile")) >> pool):
            with pytest.raises(UnreadableResultError, match=r"safe mode refused posix\.system.*allow_results"):
                run()
        assert produce("reading") >> pool is not None  # the pool goes on serving


def test_safe_results_must_be_a_boolean() -> None:
    with pytest.raises(sky.ConfigurationError, match="safe_results"):
        sky.ComputePool(safe_results="yes")  # type: ignore[arg-type]


def test_a_gather_cut_short_by_the_pools_timeout_raises_the_timeout(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    with sky.ComputePool(timeout=2, display="quiet") as pool:
        with pytest.raises(sky.PoolTimeoutError):  # not a socket error from recalling the rest
            sky.gather(*(step(5000, "sleep", journal) for _ in range(3))) >> pool
        assert not pool.is_active


@sky.compute
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return time.monotonic()


def test_tasks_never_wait_behind_a_long_call_made_on_another_thread() -> None:
    with sky.ComputePool(nodes=2, display="quiet", provider=sky.Local(grace_period=10)) as pool:
        sky.gather(*(nap(0) for _ in range(40))) >> pool  # measured quick: 16 travel at once
        slow = cf.ThreadPoolExecutor(1).submit(lambda: nap(2.0) >> pool)
        time.sleep(0.2)  # the long call is on one worker
        quick = [pool.submit(nap(0.1)) for _ in range(6)]
        last_quick = max(f.result(timeout=30) for f in quick)
        assert last_quick < slow.result(timeout=30), "a 0.1 s task waited behind the 2 s call"
