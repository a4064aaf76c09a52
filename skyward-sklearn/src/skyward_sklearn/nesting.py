"""``Parallel(backend="skyward")`` called inside a task, on a worker.

A worker has no pool of its own, so the name cannot mean "the pool's workers" there. It
means what loky's name means inside a loky worker: run on this worker. Implicit nesting
(``Parallel()`` inside a task) already runs in threads at the first level and
sequentially below it (``SkywardBackend.get_nested_backend``, joblib's default for
process backends); an explicit ``backend="skyward"`` at the same depth gets the same
backend, so naming it changes nothing about where the work runs. Without this, joblib
refuses the name on the worker (``Invalid backend: skyward``): the worker never
registered it.
"""

from __future__ import annotations

from typing import Any

from joblib.parallel import (
    BACKENDS,
    FallbackToBackend,
    ParallelBackendBase,
    SequentialBackend,
    ThreadingBackend,
    register_parallel_backend,
)

BACKEND_NAME = "skyward"


def worker_backend(nesting_level: int | None = None) -> ParallelBackendBase:
    """The backend a task's own ``Parallel(backend="skyward")`` runs on, at ``nesting_level``
    (joblib passes the level of the backend active where the call is made: 1 inside a
    batch, 2 inside one of that batch's threads)."""
    level = nesting_level or 0
    if level > 1:
        return SequentialBackend(nesting_level=level)
    return ThreadingBackend(nesting_level=level)


class OnThisWorker(ParallelBackendBase):  # type: ignore[misc]
    """``"skyward"`` as a worker knows it: ``worker_backend`` at the level joblib gives.

    A class rather than a factory that returns ``worker_backend(level)`` at once: joblib
    constructs a named backend before it knows the level (``parallel_config`` fills
    ``nesting_level`` in from the backend active around it afterwards), so the choice
    between threads and sequential waits for ``configure``."""

    supports_sharedmem = True  # it only ever runs in this process: threads or sequential
    supports_return_generator = True
    supports_retrieve_callback = True
    supports_timeout = True

    def _here(self) -> ParallelBackendBase:
        return worker_backend(self.nesting_level)

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        jobs: int = self._here().effective_n_jobs(n_jobs)
        return jobs

    def configure(self, n_jobs: int | None = 1, parallel: Any = None, **backend_kwargs: Any) -> int:
        raise FallbackToBackend(self._here())

    def get_nested_backend(self) -> tuple[ParallelBackendBase, int | None]:
        return worker_backend((self.nesting_level or 0) + 1), None


def register_on_worker() -> None:
    """Make the name known on a worker, unless this process registered the client's
    backend itself (a task that opened a pool of its own and entered its backend)."""
    if BACKEND_NAME not in BACKENDS:
        register_parallel_backend(BACKEND_NAME, OnThisWorker)
