"""``joblib_backend`` / ``sklearn_backend`` (an existing pool) and ``JoblibPool`` /
``ScikitLearnPool`` (a pool of their own), all exported as ``skyward.integrations.*``.

Importing this module imports neither joblib nor scikit-learn: the plugin's exports are
resolved in every process that looks up a plugin-provided name.

Versions. Client and workers must run the same joblib and scikit-learn: batches and
estimators are pickles, and neither library promises to load another version's. The
pools add ``name==<client version>`` pins to their image; on a Local pool with no pip
packages the nodes run on this very interpreter, which has those versions already, so
nothing is added there (a pin would only build, once, an environment holding what is
already installed). Entering either backend asks one worker which versions it has
(one quick task, once per pool) and refuses clearly when they differ, before any batch
is pickled.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Unpack

from joblib import parallel_config

from skyward.api.compute import PendingCompute
from skyward.api.failover import ProviderChoice
from skyward.api.options import PoolOptions
from skyward.api.pool import ComputePool
from skyward.errors import ConfigurationError, PoolClosedError, VersionMismatchError
from skyward.image import Image
from skyward.providers.local import Local
from skyward_sklearn.backend import BACKEND_NAME, active_pool, register
from skyward_sklearn.versions import (
    JOBLIB,
    SKLEARN,
    SKLEARN_COMPANIONS,
    Wanted,
    installed_versions,
    pins_to_add,
    version_problems,
)

PROBED = (JOBLIB, SKLEARN)

_worker_versions: weakref.WeakKeyDictionary[ComputePool, dict[str, str | None]] = weakref.WeakKeyDictionary()


def _probe(pool: ComputePool) -> dict[str, str | None]:
    """The joblib and scikit-learn versions on the pool's workers (asked once per pool:
    every node of a pool is built from the same image)."""
    known = _worker_versions.get(pool)
    if known is None:
        try:
            # a partial travels by reference, as payload.RUN_BATCH explains
            known = pool.run(PendingCompute(functools.partial(installed_versions, PROBED), (), {}))
        except ModuleNotFoundError as exc:
            raise VersionMismatchError(
                f"the pool's workers cannot load the joblib integration ({exc}): skyward-sklearn must be "
                "installed on the workers too (pip install 'skyward[sklearn]' in their image)"
            ) from exc
        _worker_versions[pool] = known
    return dict(known)


def check_versions(pool: ComputePool, sklearn: bool) -> None:
    """Raise VersionMismatchError when the pool's workers run another joblib (or, for
    scikit-learn work, another scikit-learn) than this client."""
    required = {JOBLIB, SKLEARN} if sklearn else {JOBLIB}
    problems = version_problems(installed_versions(PROBED), _probe(pool), required)
    if problems:
        pins = " ".join(
            f"'{name}=={version}'" for name, version in installed_versions(sorted(required)).items() if version
        )
        raise VersionMismatchError(
            f"the workers of {pool!r} cannot run this client's joblib tasks: {'; '.join(problems)}. "
            "Batches and estimators are pickled here and loaded there, which only works between identical "
            f"versions. Use {'ScikitLearnPool' if sklearn else 'JoblibPool'}(...), which installs this client's "
            f"versions on the workers, or add {pins} to the pool's Image(pip=...)"
        )


def _check_pool(pool: object, owner: str) -> ComputePool:
    if not isinstance(pool, ComputePool):
        raise ConfigurationError(f"{owner}(pool) takes a skyward.ComputePool, got {pool!r}")
    if not pool.is_active:
        raise PoolClosedError(
            f"{owner}(pool): the pool is not active; use it inside 'with ComputePool(...) as pool:' (or after "
            "pool.open())"
        )
    return pool


def _check_n_jobs(n_jobs: object, owner: str) -> int | None:
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise ConfigurationError(
            f"{owner}(n_jobs={n_jobs!r}): use a non-zero integer (-1: every worker slot of the pool) or None"
        )
    return n_jobs


def _check_threads(value: object, owner: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"{owner}(inner_max_num_threads={value!r}): use an integer >= 1, or None for CPUs / worker slots"
        )
    return value


@contextmanager
def _activate(pool: ComputePool, n_jobs: int | None, inner_max_num_threads: int | None) -> Iterator[None]:
    register()
    with (
        active_pool(pool),
        parallel_config(backend=BACKEND_NAME, n_jobs=n_jobs, inner_max_num_threads=inner_max_num_threads, pool=pool),
    ):
        yield


@contextmanager
def joblib_backend(
    pool: ComputePool, n_jobs: int | None = -1, inner_max_num_threads: int | None = None
) -> Iterator[ComputePool]:
    """Inside the block, joblib's ``Parallel`` runs on ``pool``'s workers.

    ``n_jobs`` is the default for ``Parallel(n_jobs=None)`` (as in
    ``joblib.parallel_backend``): -1, every worker slot of the pool. An explicit
    ``Parallel(n_jobs=...)`` still wins, and ``n_jobs=1`` runs locally.
    ``inner_max_num_threads`` limits BLAS/OpenMP threads per task (default: the
    machine's CPUs divided by the worker slots sharing them, as loky does).
    The backend is joblib's thread-local configuration: it applies to this thread.
    """
    checked = _check_pool(pool, "joblib_backend")
    jobs = _check_n_jobs(n_jobs, "joblib_backend")
    threads = _check_threads(inner_max_num_threads, "joblib_backend")
    check_versions(checked, sklearn=False)
    with _activate(checked, jobs, threads):
        yield checked


@contextmanager
def sklearn_backend(
    pool: ComputePool, n_jobs: int | None = -1, inner_max_num_threads: int | None = None
) -> Iterator[ComputePool]:
    """``joblib_backend`` for scikit-learn: also requires the workers to run this
    client's scikit-learn, so ``GridSearchCV(..., n_jobs=-1)`` and friends run there."""
    checked = _check_pool(pool, "sklearn_backend")
    jobs = _check_n_jobs(n_jobs, "sklearn_backend")
    threads = _check_threads(inner_max_num_threads, "sklearn_backend")
    if installed_versions([SKLEARN])[SKLEARN] is None:
        raise ConfigurationError(
            "sklearn_backend(pool) needs scikit-learn installed on this client: pip install scikit-learn"
        )
    check_versions(checked, sklearn=True)
    with _activate(checked, jobs, threads):
        yield checked


def _reuses_client_interpreter(provider: ProviderChoice | None, image: Image | None, pip: Sequence[str] | None) -> bool:
    """True when the nodes run on this interpreter: the Local provider, no pip packages."""
    local = provider is None or isinstance(provider, Local)
    return local and not (image.pip if image is not None else ()) and not pip


class _IntegrationPool(ComputePool):
    """A ComputePool whose ``with`` block also activates the joblib backend."""

    _owner = "JoblibPool"
    _sklearn = False
    _integration: ExitStack | None = None  # the backend, active while the with block runs

    def _pinned(self, provider: ProviderChoice | None, options: PoolOptions, wanted: Sequence[Wanted]) -> PoolOptions:
        """``options`` with ``pip`` extended by the pins of ``wanted`` this client's
        versions need (none when the nodes run on this very interpreter)."""
        image, pip = options.get("image"), options.get("pip")
        if image is not None and not isinstance(image, Image):
            return options  # ComputePool says what is wrong with it
        if isinstance(pip, str):
            return options
        image_pip = [*(image.pip if image is not None else ()), *(pip or ())]
        pins = pins_to_add(
            wanted,
            installed_versions([w.name for w in wanted]),
            image_pip,
            _reuses_client_interpreter(provider, image, pip),
            owner=f"{self._owner}(...)",
        )
        if not pins:
            return options
        pinned = options.copy()
        pinned["pip"] = [*(pip or ()), *pins]
        return pinned

    def __enter__(self) -> _IntegrationPool:
        self.open()
        self._integration = ExitStack()
        try:
            activate = sklearn_backend if self._sklearn else joblib_backend
            self._integration.enter_context(activate(self))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._integration is not None:
                self._integration.close()
        finally:
            self.close()


def _signature_with(extra: str) -> inspect.Signature:
    """What ``help()``, ``inspect.signature`` and editors show for a pool class taking
    ``**options: Unpack[PoolOptions]``: ComputePool's parameters by name and default (as
    this class takes them: ``provider`` first, the others by keyword), then ``extra``;
    ``**options`` alone would hide every option."""
    parameters = list(inspect.signature(ComputePool.__init__).parameters.values())[1:]  # without self
    keyword = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature(
        [
            parameters[0],
            *(p.replace(kind=keyword) for p in parameters[1:]),
            inspect.Parameter(extra, keyword, default=None, annotation="str | None"),
        ],
        return_annotation="None",
    )


class JoblibPool(_IntegrationPool):
    """A ComputePool that runs joblib's ``Parallel(n_jobs=-1)`` on its workers inside its
    ``with`` block. Takes ComputePool's parameters (``provider`` first, the others by
    keyword: ``PoolOptions``), plus ``joblib_version`` (default: this client's joblib,
    the only version that can load this client's batches)."""

    _owner = "JoblibPool"
    _sklearn = False
    __signature__ = _signature_with("joblib_version")

    def __init__(
        self,
        provider: ProviderChoice | None = None,
        *,
        joblib_version: str | None = None,
        **options: Unpack[PoolOptions],
    ) -> None:
        super().__init__(provider, **self._pinned(provider, options, [Wanted(JOBLIB, joblib_version)]))

    def __enter__(self) -> JoblibPool:
        super().__enter__()
        return self


class ScikitLearnPool(_IntegrationPool):
    """A ComputePool for distributed scikit-learn: inside its ``with`` block,
    ``GridSearchCV(..., n_jobs=-1)`` and every other joblib-parallel estimator run on its
    workers. Takes ComputePool's parameters (``provider`` first, the others by keyword:
    ``PoolOptions``), plus ``sklearn_version`` (default: this client's). The workers get
    this client's scikit-learn, joblib, numpy and scipy."""

    _owner = "ScikitLearnPool"
    _sklearn = True
    __signature__ = _signature_with("sklearn_version")

    def __init__(
        self,
        provider: ProviderChoice | None = None,
        *,
        sklearn_version: str | None = None,
        **options: Unpack[PoolOptions],
    ) -> None:
        wanted = [Wanted(SKLEARN, sklearn_version), *(Wanted(name, required=False) for name in SKLEARN_COMPANIONS)]
        super().__init__(provider, **self._pinned(provider, options, wanted))

    def __enter__(self) -> ScikitLearnPool:
        super().__enter__()
        return self
