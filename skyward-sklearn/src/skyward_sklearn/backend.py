"""The joblib parallel backend ``"skyward"``: joblib batches run on a pool's workers.

joblib drives a backend through a small protocol (``ParallelBackendBase``): ``configure``
says how many jobs can run at once, ``submit`` starts one batch and returns a future,
``retrieve_result_callback`` turns a finished future into the batch's results, and
``abort_everything`` stops what is left after a failure. This backend implements it on
``ComputePool.submit``, so joblib's own machinery (auto-batching, ``pre_dispatch``,
ordered and generator output, early stop on the first error) behaves as it does with
loky; only where the batches run changes.

- ``n_jobs=-1`` means every worker slot of the pool (nodes x workers per node), and a
  positive ``n_jobs`` is capped at that. ``n_jobs=1`` runs in the calling process, as
  with every joblib backend.
- An exception in a task surfaces from ``Parallel(...)`` as its original type, with the
  worker's traceback as its ``__cause__``, as loky does.
- Abort (an error, a timeout, a generator dropped early) stops every batch that has not
  begun: queued ones are cancelled and ones already sent to a worker are taken back from
  it; a batch already running on a worker finishes there and its result is dropped
  (workers are shared by the pool and are never killed for this).
- Nested ``Parallel`` calls inside a task run on that worker: threads at the first level
  of nesting, sequentially below it (joblib's default for process backends).
- Completion callbacks run on a thread of their own, never on the pool's I/O thread: a
  callback dispatches the next batch, which pickles it, and that must not stall the
  traffic of every other task.
"""

from __future__ import annotations

import logging
import pickle
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from joblib import register_parallel_backend

# joblib.parallel re-exports these for backends written outside joblib (dask's did too)
from joblib.parallel import (
    AutoBatchingMixin,
    FallbackToBackend,
    ParallelBackendBase,
    SequentialBackend,
    ThreadingBackend,
)

from skyward.api.compute import PendingCompute
from skyward.errors import ConfigurationError, PoolClosedError
from skyward.providers.local import Local
from skyward_sklearn.payload import RUN_BATCH, Initializer, ThreadPolicy, encode

if TYPE_CHECKING:
    from skyward.api.pool import ComputePool

BACKEND_NAME = "skyward"

log = logging.getLogger(__name__)

# Pools made the target of "skyward" by joblib_backend(...), innermost last. A module
# global rather than joblib's thread-local config: Parallel(backend="skyward") called
# from a thread the user started inside the block must still find its pool.
_active: list[ComputePool] = []
_active_lock = threading.Lock()


@contextmanager
def active_pool(pool: ComputePool) -> Iterator[None]:
    with _active_lock:
        _active.append(pool)
    try:
        yield
    finally:
        with _active_lock:
            # remove this entry (blocks may exit out of order across threads)
            for index in range(len(_active) - 1, -1, -1):
                if _active[index] is pool:
                    del _active[index]
                    break


def current_pool() -> ComputePool:
    with _active_lock:
        if _active:
            return _active[-1]
    raise ConfigurationError(
        f"joblib backend {BACKEND_NAME!r} has no pool: use it inside "
        "'with joblib_backend(pool):', 'with sklearn_backend(pool):', JoblibPool(...) or ScikitLearnPool(...) "
        "(from skyward.integrations)"
    )


class _Callbacks:
    """One daemon thread that runs joblib's completion callbacks in order of completion."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[Any], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, callback: Callable[[Any], Any], future: Future[Any]) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="skyward-joblib-callbacks", daemon=True)
                    self._thread.start()
        self._queue.put((callback, future))

    def _run(self) -> None:
        while True:
            callback, future = self._queue.get()
            try:
                callback(future)
            except BaseException:  # as concurrent.futures does: report, keep serving
                log.exception("a joblib completion callback raised")


_callbacks = _Callbacks()


def _sharing(pool: ComputePool) -> int | None:
    """Worker slots sharing one machine's CPUs, when known here: all of a Local pool."""
    return pool.spec.total_workers if isinstance(pool.spec.provider, Local) else None


class SkywardBackend(AutoBatchingMixin, ParallelBackendBase):  # type: ignore[misc]
    """joblib backend running batches on a Skyward pool (registered as ``"skyward"``)."""

    supports_retrieve_callback = True
    supports_inner_max_num_threads = True
    supports_sharedmem = False  # require="sharedmem" falls back to threads, locally
    uses_threads = False
    # Inside joblib_backend(pool), n_jobs=None means the whole pool, as with
    # joblib.parallel_backend("dask") or ("ray").
    default_n_jobs = -1

    def __init__(
        self,
        nesting_level: int | None = None,
        inner_max_num_threads: int | None = None,
        pool: ComputePool | None = None,
        **backend_kwargs: Any,
    ) -> None:
        super().__init__(nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads, **backend_kwargs)
        self.pool: ComputePool = pool if pool is not None else current_pool()
        self.parallel: Any = None
        self._init: Initializer | None = None
        self._outstanding: set[Future[Any]] = set()
        self._outstanding_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SkywardBackend({self.pool!r})"

    # -- sizing ---------------------------------------------------------------------------

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            n_jobs = self.default_n_jobs
        total = self.pool.spec.total_workers
        if n_jobs < 0:
            return max(total + 1 + n_jobs, 1)
        return min(n_jobs, total)

    def configure(
        self,
        n_jobs: int | None = 1,
        parallel: Any = None,
        prefer: str | None = None,
        require: str | None = None,
        **backend_kwargs: Any,
    ) -> int:
        self._init = _initializer({**self.backend_kwargs, **backend_kwargs})
        effective = self.effective_n_jobs(n_jobs)
        if n_jobs == 1:
            # As with loky: one job means no parallelism, in this process.
            raise FallbackToBackend(SequentialBackend(nesting_level=self.nesting_level))
        if not self.pool.is_active:
            raise PoolClosedError(f"joblib backend {BACKEND_NAME!r}: its pool {self.pool!r} is not active")
        self.parallel = parallel
        # joblib runs everything in this process when configure says 1. A pool of one
        # worker slot is still where the user asked the work to run: report 2, and the
        # second batch waits its turn in the pool's queue.
        return max(effective, 2)

    def _policy(self) -> ThreadPolicy:
        # The worker decides the default itself: it sees its own environment (a Local
        # node inherits this one), and a thread variable set there wins, as with loky.
        return ThreadPolicy(explicit=self.inner_max_num_threads, sharing=_sharing(self.pool))

    # -- running --------------------------------------------------------------------------

    def submit(self, func: Callable[[], Any], callback: Callable[[Any], Any] | None = None) -> Future[Any]:
        try:
            future = self._send(func)
        except Exception as exc:
            # As with loky, a batch that cannot be sent fails through its result: this
            # may run on the callback thread, where raising would reach no one.
            future = Future()
            future.set_exception(exc)
        with self._outstanding_lock:
            self._outstanding.add(future)
        future.add_done_callback(self._forget)
        if callback is not None:
            future.add_done_callback(lambda done: _callbacks.put(callback, done))
        return future

    def _send(self, func: Callable[[], Any]) -> Future[Any]:
        try:
            stream, buffers = encode(func)
        except Exception as exc:
            raise pickle.PicklingError(f"could not pickle the task to send it to the pool's workers: {exc}") from exc
        return self.pool.submit(PendingCompute(RUN_BATCH, (stream, buffers, self._policy(), self._init), {}))

    def _forget(self, future: Future[Any]) -> None:
        with self._outstanding_lock:
            self._outstanding.discard(future)

    def retrieve_result_callback(self, out: Future[Any]) -> Any:
        return out.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        """Stop every batch that has not begun: queued ones are cancelled, ones sent to a
        worker but not begun are taken back (``ComputePool.abandon``). The backend stays
        usable whatever ``ensure_ready`` says: it owns no workers to restart."""
        with self._outstanding_lock:
            pending, self._outstanding = self._outstanding, set()
        if self.pool.is_active:
            self.pool.abandon(list(pending))
        else:
            for future in pending:
                future.cancel()

    def terminate(self) -> None:
        self.reset_batch_stats()

    def get_nested_backend(self) -> tuple[ParallelBackendBase, int | None]:
        # Travels inside every batch, so it must not hold the pool: tasks run their
        # nested Parallel calls on their own worker.
        level = (self.nesting_level or 0) + 1
        if level > 1:
            return SequentialBackend(nesting_level=level), None
        return ThreadingBackend(nesting_level=level), None


def _initializer(backend_kwargs: dict[str, Any]) -> Initializer | None:
    """``Parallel(initializer=..., initargs=...)`` for this configuration; each worker runs
    it once, before its first batch (skyward_sklearn.payload.run_batch)."""
    fn = backend_kwargs.get("initializer")
    args = backend_kwargs.get("initargs", ())
    if fn is None:
        if args:
            raise TypeError("Parallel(initargs=...) without an initializer")
        return None
    if not callable(fn):
        raise TypeError(f"Parallel(initializer={fn!r}) must be callable")
    if not isinstance(args, tuple | list):
        raise TypeError(f"Parallel(initargs={args!r}) must be a tuple of arguments")
    return (fn, tuple(args), uuid.uuid4().hex)


def _factory(nesting_level: int | None = None, inner_max_num_threads: int | None = None, **kwargs: Any) -> Any:
    return SkywardBackend(nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads, **kwargs)


def register() -> None:
    """Register ``"skyward"`` with joblib (idempotent). Outside a pool's block the name
    stays registered and says clearly that it has no pool."""
    register_parallel_backend(BACKEND_NAME, _factory)
