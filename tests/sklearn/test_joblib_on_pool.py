"""joblib's own behaviour, with its batches running on a real Local pool of two nodes."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import pytest
from joblib import Parallel, delayed, parallel_config

import skyward as sky
from skyward.errors import ConfigurationError, PoolClosedError
from skyward.transport.client import RemoteTraceback
from skyward_sklearn.backend import SkywardBackend


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.ComputePool]:
    with sky.ComputePool(nodes=2, display="quiet", timeout=600) as p:
        yield p


@pytest.fixture(scope="module")
def worker_pids(pool: sky.ComputePool) -> set[int]:
    return set(sky.compute(os.getpid)() @ pool)


def double(x: int) -> int:
    return 2 * x


def pid_of(_: int) -> int:
    return os.getpid()


def fail_at(x: int, bad: int) -> int:
    if x == bad:
        raise ValueError(f"task {x} refused")
    return x


def mark_then_sleep(x: int, folder: str, bad: int, seconds: float) -> int:
    Path(folder, str(x)).touch()
    if x == bad:
        raise KeyError(f"task {x} failed")
    time.sleep(seconds)
    return x


def nested(x: int) -> tuple[int, list[int], str]:
    inner = Parallel(n_jobs=2)(delayed(pid_of)(i) for i in range(4))
    backend, _ = joblib.parallel.get_active_backend()
    return os.getpid(), inner, type(backend).__name__


def test_n_jobs_minus_one_is_every_slot_of_the_pool(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        assert joblib.effective_n_jobs(-1) == pool.spec.total_workers == 2
        assert joblib.effective_n_jobs(-2) == 1
        assert joblib.effective_n_jobs(64) == 2


def test_results_come_back_in_order_from_the_workers(pool: sky.ComputePool, worker_pids: set[int]) -> None:
    with sky.integrations.joblib_backend(pool):
        assert Parallel(n_jobs=-1)(delayed(double)(i) for i in range(200)) == [2 * i for i in range(200)]
        pids = Parallel(n_jobs=-1, batch_size=1)(delayed(pid_of)(i) for i in range(40))
    assert set(pids) <= worker_pids
    assert os.getpid() not in pids


def test_parallel_with_n_jobs_none_uses_the_pool(pool: sky.ComputePool, worker_pids: set[int]) -> None:
    with sky.integrations.joblib_backend(pool):
        assert set(Parallel()(delayed(pid_of)(i) for i in range(8))) <= worker_pids


def test_n_jobs_one_runs_here_as_with_every_joblib_backend(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        assert Parallel(n_jobs=1)(delayed(pid_of)(i) for i in range(3)) == [os.getpid()] * 3


def test_the_backend_is_registered_under_skyward(pool: sky.ComputePool, worker_pids: set[int]) -> None:
    with sky.integrations.joblib_backend(pool):
        assert joblib.parallel.BACKENDS["skyward"] is SkywardBackend  # the type it makes, as joblib's own
        parallel = Parallel(backend="skyward", n_jobs=-1)
        assert isinstance(parallel._backend, SkywardBackend) and parallel._backend.pool is pool
        assert set(parallel(delayed(pid_of)(i) for i in range(4))) <= worker_pids
        with parallel_config(backend="skyward"):  # the name alone finds the pool of the block
            assert set(Parallel(n_jobs=2)(delayed(pid_of)(i) for i in range(4))) <= worker_pids
    with pytest.raises(ConfigurationError, match="has no pool"):
        Parallel(backend="skyward")


def test_generator_output(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        ordered = Parallel(n_jobs=-1, return_as="generator")(delayed(double)(i) for i in range(50))
        assert not isinstance(ordered, list)
        assert list(ordered) == [2 * i for i in range(50)]
        unordered = Parallel(n_jobs=-1, return_as="generator_unordered")(delayed(double)(i) for i in range(50))
        assert sorted(unordered) == [2 * i for i in range(50)]


def test_an_exception_in_one_task_surfaces_as_itself(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        with pytest.raises(ValueError, match="task 7 refused") as raised:
            Parallel(n_jobs=-1)(delayed(fail_at)(i, 7) for i in range(20))
    cause = raised.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert "fail_at" in cause.tb  # the worker's traceback, as loky attaches its own


def test_an_error_stops_the_rest_early_and_the_pool_keeps_serving(pool: sky.ComputePool, tmp_path: Path) -> None:
    total = 80
    with sky.integrations.joblib_backend(pool):
        with pytest.raises(KeyError, match="task 3 failed"):
            Parallel(n_jobs=-1, batch_size=1)(delayed(mark_then_sleep)(i, str(tmp_path), 3, 0.05) for i in range(total))
        time.sleep(0.5)  # whatever was already on a worker finishes
        started = len(list(tmp_path.iterdir()))
        assert started < total / 2, f"{started} of {total} tasks ran after the failure"
        assert Parallel(n_jobs=-1)(delayed(double)(i) for i in range(10)) == [2 * i for i in range(10)]


def test_an_error_stops_batches_already_sent_to_workers(pool: sky.ComputePool, tmp_path: Path) -> None:
    """Batches joblib dispatched ahead (pre_dispatch="all") are on the workers when the first
    one fails: abort_everything takes back every one that has not begun."""
    with sky.integrations.joblib_backend(pool):
        Parallel(n_jobs=-1, batch_size=1)(delayed(double)(i) for i in range(200))  # measured quick
        with pytest.raises(KeyError, match="task 0 failed"):
            Parallel(n_jobs=-1, batch_size=1, pre_dispatch="all")(
                delayed(mark_then_sleep)(i, str(tmp_path), 0, 0.5) for i in range(20)
            )
        time.sleep(3.0)  # had they stayed on the workers, a dozen would have started by now
        started = sorted(int(p.name) for p in tmp_path.iterdir())
        assert len(started) <= 6, f"batches {started} started after the failure"


def test_dropping_a_generator_cancels_what_is_left(pool: sky.ComputePool, tmp_path: Path) -> None:
    total = 80
    with sky.integrations.joblib_backend(pool):
        output = Parallel(n_jobs=-1, batch_size=1, return_as="generator")(
            delayed(mark_then_sleep)(i, str(tmp_path), -1, 0.05) for i in range(total)
        )
        assert [next(output) for _ in range(3)] == [0, 1, 2]
        with pytest.warns(
            UserWarning, match="tasks have been successfully executed|not been executed|have been cancelled"
        ):
            output.close()  # what `break` out of a for loop does
        time.sleep(0.5)
        assert len(list(tmp_path.iterdir())) < total / 2
        assert Parallel(n_jobs=-1)(delayed(double)(i) for i in range(4)) == [0, 2, 4, 6]


def test_ten_thousand_small_tasks_complete(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        started = time.monotonic()
        results = Parallel(n_jobs=-1)(delayed(double)(i) for i in range(10_000))
        elapsed = time.monotonic() - started
    assert results == [2 * i for i in range(10_000)]
    assert elapsed < 60


def test_nested_parallel_runs_on_the_worker_in_threads(pool: sky.ComputePool, worker_pids: set[int]) -> None:
    with sky.integrations.joblib_backend(pool):
        results = Parallel(n_jobs=-1, batch_size=1)(delayed(nested)(i) for i in range(4))
    for pid, inner, backend in results:
        assert pid in worker_pids
        assert inner == [pid] * 4  # threads of that same worker process
        assert backend == "ThreadingBackend"


def test_sharedmem_requirements_fall_back_to_local_threads(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        assert Parallel(n_jobs=2, require="sharedmem")(delayed(pid_of)(i) for i in range(3)) == [os.getpid()] * 3


def test_an_argument_that_cannot_be_pickled_is_named(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool):
        with pytest.raises(pickle.PicklingError, match=r"could not pickle the task.*lock"):
            Parallel(n_jobs=-1)(delayed(id)(threading.Lock()) for _ in range(2))
        assert Parallel(n_jobs=-1)(delayed(double)(i) for i in range(3)) == [0, 2, 4]


def test_the_backend_needs_an_open_pool() -> None:
    closed = sky.ComputePool(display="quiet")
    with pytest.raises(PoolClosedError, match="not active"):
        with sky.integrations.joblib_backend(closed):
            pass
    with pytest.raises(ConfigurationError, match=r"takes a skyward\.ComputePool"):
        with sky.integrations.joblib_backend("not a pool"):  # type: ignore[arg-type]
            pass


@pytest.mark.parametrize("n_jobs", [0, 1.5, True, "all"])
def test_bad_n_jobs_is_refused(pool: sky.ComputePool, n_jobs: object) -> None:
    with pytest.raises(ConfigurationError, match="n_jobs"):
        with sky.integrations.joblib_backend(pool, n_jobs=n_jobs):  # type: ignore[arg-type]
            pass


def test_a_one_slot_pool_still_runs_the_work_there() -> None:
    with sky.ComputePool(nodes=1, display="quiet") as one, sky.integrations.joblib_backend(one):
        pids = Parallel(n_jobs=-1)(delayed(pid_of)(i) for i in range(6))
        assert os.getpid() not in pids


def blas_threads(data: object) -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def wait_for_release(folder: str) -> str:
    """Block until the test creates ``released`` (at most 60 s), and record which came
    first: the caller's release, or this task giving up on it."""
    deadline = time.monotonic() + 60  # bounds a regression's failure, never a pass
    while not Path(folder, "released").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    outcome = "released" if Path(folder, "released").exists() else "gave up"
    Path(folder, "outcome").write_text(outcome)
    return outcome


def test_a_timeout_surfaces_as_joblib_raises_it(pool: sky.ComputePool, tmp_path: Path) -> None:
    # The slow task ends only after the test releases it, which the test does only once
    # Parallel has raised: a timeout that waited for the task would see it give up instead.
    with sky.integrations.joblib_backend(pool):
        with pytest.raises(multiprocessing.TimeoutError):  # what joblib raises with loky too
            Parallel(n_jobs=-1, timeout=0.3)(delayed(wait_for_release)(str(tmp_path)) for _ in range(1))
        Path(tmp_path, "released").touch()
        assert Parallel(n_jobs=-1)(delayed(double)(i) for i in range(3)) == [0, 2, 4]
    outcome = Path(tmp_path, "outcome")
    deadline = time.monotonic() + 60
    while not outcome.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert outcome.read_text() == "released"


def test_blas_threads_are_limited_to_the_cpus_per_slot(pool: sky.ComputePool) -> None:
    import numpy as np

    from skyward_sklearn.payload import THREAD_VARS, _cpu_count

    if any(var in os.environ for var in THREAD_VARS):
        pytest.skip("this environment sets its own thread limits, which the workers respect")
    data = np.ones(4)  # loads numpy, and its BLAS, before the batch starts
    with sky.integrations.joblib_backend(pool):
        seen = Parallel(n_jobs=-1)(delayed(blas_threads)(data) for _ in range(2))
    expected = max(1, _cpu_count() // pool.spec.total_workers)
    assert seen and all(counts and set(counts) == {expected} for counts in seen)
    with sky.integrations.joblib_backend(pool, inner_max_num_threads=3):
        explicit = Parallel(n_jobs=-1)(delayed(blas_threads)(data) for _ in range(2))
    assert all(set(counts) == {3} for counts in explicit)


def _note_init(folder: str, value: str) -> None:
    os.environ["SKYWARD_TEST_INIT"] = value
    Path(folder, f"{os.getpid()}-{value}").touch()


def _init_value(_: int) -> tuple[int, str | None]:
    return os.getpid(), os.environ.get("SKYWARD_TEST_INIT")


def test_an_initializer_runs_once_on_each_worker_before_its_batches(
    pool: sky.ComputePool, worker_pids: set[int], tmp_path: Path
) -> None:
    with sky.integrations.joblib_backend(pool):
        results = Parallel(n_jobs=-1, batch_size=1, initializer=_note_init, initargs=(str(tmp_path), "first"))(
            delayed(_init_value)(i) for i in range(40)
        )
        again = Parallel(n_jobs=-1, batch_size=1, initializer=_note_init, initargs=(str(tmp_path), "second"))(
            delayed(_init_value)(i) for i in range(40)
        )
    assert {value for _, value in results} == {"first"}  # every batch ran after it
    assert {value for _, value in again} == {"second"}  # a new Parallel call, a new initializer
    runs = [p.name for p in tmp_path.iterdir()]
    for value, batch in (("first", results), ("second", again)):
        ran_on = [name for name in runs if name.endswith(value)]
        assert len(ran_on) == len(set(ran_on)) == len({pid for pid, _ in batch})  # once per worker used
        assert {int(name.split("-")[0]) for name in ran_on} <= worker_pids


def test_an_initializer_that_is_not_callable_is_refused(pool: sky.ComputePool) -> None:
    with sky.integrations.joblib_backend(pool), pytest.raises(TypeError, match="initializer"):
        Parallel(n_jobs=2, initializer=42)(delayed(double)(i) for i in range(2))


def explicit_nested(x: int) -> tuple[int, list[int], str, list[bool], int]:
    """A task that names the backend itself, then once more a level deeper (in a thread)."""
    inner = Parallel(n_jobs=2, backend="skyward")(delayed(pid_of)(i) for i in range(4))
    deeper = Parallel(n_jobs=2, backend="skyward")(delayed(runs_in_the_calling_thread)(i) for i in range(2))
    backend, _ = joblib.parallel.get_active_backend()
    with parallel_config(backend="skyward") as config:  # the level comes from the backend around it
        level = config["backend"].nesting_level
    return os.getpid(), inner, type(backend).__name__, deeper, level


def runs_in_the_calling_thread(_: int) -> bool:
    caller = threading.get_ident()
    return Parallel(n_jobs=2, backend="skyward")(delayed(threading.get_ident)() for _ in range(4)) == [caller] * 4


def test_a_nested_parallel_naming_the_backend_runs_on_that_worker(pool: sky.ComputePool, worker_pids: set[int]) -> None:
    # as loky's name does inside a loky worker: the work stays on the worker, in threads at
    # the first level of nesting and sequentially below it
    with sky.integrations.joblib_backend(pool):
        results = Parallel(n_jobs=-1, batch_size=1)(delayed(explicit_nested)(i) for i in range(4))
    for pid, inner, backend, deeper, level in results:
        assert pid in worker_pids
        assert inner == [pid] * 4
        assert backend == "ThreadingBackend"
        assert deeper == [True, True]  # sequential below the first level
        assert level == 1


def add_to(shared: Any, lock: Any, x: int) -> int:
    with lock:
        shared[x] = x * x
    return os.getpid()


def test_manager_proxies_passed_to_tasks_work_on_a_local_pool(pool: sky.ComputePool, worker_pids: set[int]) -> None:
    # loky's workers accept them; a Local pool's workers get the client's authkey to do so
    with multiprocessing.Manager() as manager, sky.integrations.joblib_backend(pool):
        shared, lock = manager.dict(), manager.Lock()
        pids = Parallel(n_jobs=-1, batch_size=1)(delayed(add_to)(shared, lock, i) for i in range(6))
        assert dict(shared) == {i: i * i for i in range(6)}
    assert set(pids) <= worker_pids


def _use_backend_in_a_forked_child(report: Any) -> None:
    try:
        Parallel(n_jobs=-1)(delayed(double)(i) for i in range(4))
    except PoolClosedError as exc:
        report.send(f"PoolClosedError: {exc}")
    except BaseException as exc:  # what else arrived, for the assertion message
        report.send(f"{type(exc).__name__}: {exc}")
    else:
        report.send("no error")


def test_a_forked_child_of_a_process_that_used_the_backend_is_refused_not_stuck(pool: sky.ComputePool) -> None:
    fork = multiprocessing.get_context("fork")
    receive, send = fork.Pipe(duplex=False)
    with sky.integrations.joblib_backend(pool):
        assert Parallel(n_jobs=-1)(delayed(double)(i) for i in range(4)) == [0, 2, 4, 6]  # completion thread started
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # forking a process with threads: the point here
            child = fork.Process(target=_use_backend_in_a_forked_child, args=(send,))
            child.start()
    try:
        # 60 s bounds a regression (the child waiting forever on its result), never a pass
        answered = receive.poll(60)
        report = receive.recv() if answered else "no answer: the child is stuck"
    finally:
        if child.is_alive():
            child.kill()
        child.join()
    assert report.startswith("PoolClosedError") and "forked" in report, report
