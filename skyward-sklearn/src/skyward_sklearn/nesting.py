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

from joblib.parallel import (
    BACKENDS,
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


def _worker_factory(nesting_level: int | None = None, **_: object) -> ParallelBackendBase:
    return worker_backend(nesting_level)


def register_on_worker() -> None:
    """Make the name known on a worker, unless this process registered the client's
    backend itself (a task that opened a pool of its own and entered its backend): that
    factory already falls back to ``worker_backend`` where no pool is active."""
    if BACKEND_NAME not in BACKENDS:
        register_parallel_backend(BACKEND_NAME, _worker_factory)
