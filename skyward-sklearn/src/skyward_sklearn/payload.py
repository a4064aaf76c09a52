"""How a joblib batch travels to a worker and runs there.

The client pickles each batch itself, with cloudpickle and protocol 5, and hands the
pool one fixed function (``run_batch``) whose arguments are that pickle and its
out-of-band buffers. So workers unpickle ``run_batch`` once and keep it cached, large
arrays travel as separate frames without being copied into one bytes object, and the
pickler can make two adjustments that a batch needs and a plain task does not:

- Functions and classes from the user's own modules (a project that is not installed on
  the nodes, a test module) travel by value, wherever they sit in the batch: joblib
  wraps the user's function, so the pool only ever sees joblib's callable.
- Warning categories travel by name and resolve on the worker if they can. scikit-learn
  pickles the client's whole ``warnings.filters`` list into every task, and that list
  names categories from whatever the client has imported (pytest, cloud SDKs); a worker
  without that package would otherwise fail to load the batch at all. A category the
  worker cannot import becomes a stand-in ``Warning`` subclass of the same name, which
  only ever feeds a filter that can never match.

On the worker, the batch runs with BLAS/OpenMP thread pools limited the way loky limits
its workers (CPUs / worker slots on the machine), so concurrent slots do not
oversubscribe the CPUs.
"""

from __future__ import annotations

import functools
import importlib
import io
import multiprocessing
import os
import pickle
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import cloudpickle

from skyward.runtime.context import instance_info
from skyward.transport import serialize
from skyward_sklearn.nesting import register_on_worker

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True, slots=True)
class ThreadPolicy:
    """How many BLAS/OpenMP threads a batch may use on its worker.

    explicit: the caller's ``inner_max_num_threads``; it always wins.
    sharing:  worker slots sharing one machine's CPUs, when the client knows it (every
              node of a Local pool is this machine); None: the worker's own node's slots.
    """

    explicit: int | None = None
    sharing: int | None = None


@functools.cache
def _skyward_packages() -> frozenset[str]:
    """Top-level packages of skyward and its plugins: every node installs them (an
    editable checkout included), so they always travel by reference."""
    names = {"skyward"}
    for entry_point in metadata.entry_points(group="skyward"):
        names.add(entry_point.value.split(":", 1)[0].split(".", 1)[0])
    return frozenset(names)


def _is_user_module(name: str) -> bool:
    """The user's own code, which the nodes cannot import: it travels by value. Uses the
    pool's own rule, except for skyward's packages, which that rule cannot tell from a
    user's project when they are installed editable (a checkout, like this repository)."""
    if name.split(".", 1)[0] in _skyward_packages():
        return False
    return serialize._is_user_module(name)


def _by_name(cls: type) -> bool:
    """True for a warning category that pickle would name by reference and that a worker
    may lack: from an installed third-party package, importable under its own name."""
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str) or module in ("builtins", "__main__"):
        return False
    if module.split(".", 1)[0] in sys.stdlib_module_names or _is_user_module(module):
        return False
    found: Any = sys.modules.get(module)
    for part in getattr(cls, "__qualname__", "").split("."):
        found = getattr(found, part, None)
    return found is cls


def _send_module_by_value(module: str) -> None:
    if module == "__main__" or not _is_user_module(module):
        return
    try:
        cloudpickle.register_pickle_by_value(sys.modules[module])
    except (KeyError, ValueError):
        pass


class BatchPickler(cloudpickle.Pickler):  # type: ignore[misc]
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type) and issubclass(obj, Warning) and _by_name(obj):
            return warning_category, (obj.__module__, obj.__qualname__)
        if isinstance(obj, type | types.FunctionType):
            module = getattr(obj, "__module__", None)
            if isinstance(module, str):
                _send_module_by_value(module)
        return super().reducer_override(obj)


def encode(obj: object) -> tuple[pickle.PickleBuffer, list[pickle.PickleBuffer]]:
    """Pickle ``obj`` for a worker: the pickle stream and its out-of-band buffers, each
    wrapped so the pool's own pickling passes them on as frames, uncopied."""
    buffers: list[pickle.PickleBuffer] = []
    stream = io.BytesIO()
    BatchPickler(stream, protocol=5, buffer_callback=buffers.append).dump(obj)
    return pickle.PickleBuffer(stream.getbuffer()), buffers


_stand_ins: dict[tuple[str, str], type[Warning]] = {}
_stand_ins_lock = threading.Lock()


def warning_category(module: str, qualname: str) -> type[Warning]:
    """The warning category ``module.qualname`` on this worker, or a stand-in for it."""
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        if isinstance(found, type) and issubclass(found, Warning):
            return found
    except Exception:
        pass
    with _stand_ins_lock:
        stand_in = _stand_ins.get((module, qualname))
        if stand_in is None:
            stand_in = types.new_class(qualname.rsplit(".", 1)[-1], (Warning,))
            stand_in.__module__ = module
            stand_in.__qualname__ = qualname
            stand_in.__doc__ = f"Stand-in for {module}.{qualname}, which this worker cannot import."
            _stand_ins[(module, qualname)] = stand_in
        return stand_in


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_limit(policy: ThreadPolicy) -> int | None:
    """The per-batch thread limit on this worker, or None to leave the libraries alone
    (the node's environment already sets one, as loky also respects)."""
    if policy.explicit is not None:
        return policy.explicit
    if any(var in os.environ for var in THREAD_VARS):
        return None
    sharing = policy.sharing
    if sharing is None:
        sharing = instance_info().workers_per_node
    return max(1, _cpu_count() // max(1, sharing))


_controller: Any = None
_controller_modules = -1


@contextmanager
def _limited_threads(limit: int | None) -> Iterator[None]:
    """Limit BLAS/OpenMP thread pools for the duration of one batch (threadpoolctl, which
    scikit-learn depends on; without it the libraries keep their own defaults)."""
    global _controller, _controller_modules
    if limit is None:
        yield
        return
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]  # noqa: PLC0415  # optional
    except ImportError:
        yield
        return
    # Listing the loaded libraries takes milliseconds: do it again only when new modules
    # (and so perhaps new native libraries) were imported since the last time.
    if _controller is None or _controller_modules != len(sys.modules):
        _controller = ThreadpoolController()
        _controller_modules = len(sys.modules)
    with _controller.limit(limits=limit):
        yield


Initializer = tuple[Callable[..., Any], tuple[Any, ...], str]
"""``Parallel(initializer=fn, initargs=args)`` as ``(fn, args, token)``: run once on each
worker before its first batch of that ``Parallel`` configuration (``token``), as loky runs
it once in each worker process it starts. A plain tuple, so nothing of this module has to
travel by value with it."""

_initialized: set[str] = set()  # worker side: the tokens whose initializer ran here
_initialized_lock = threading.Lock()


def _initialize(init: Initializer | None) -> None:
    if init is None:
        return
    fn, args, token = init
    with _initialized_lock:
        if token in _initialized:
            return
        fn(*args)
        _initialized.add(token)


def _adopt_authkey(authkey: bytes | None) -> None:
    """Take the client's multiprocessing authkey (sent to Local workers only, as
    skyward_sklearn.backend._client_authkey explains), before the batch is unpickled: a
    manager proxy in it connects to its manager while it is being loaded."""
    if authkey is not None and bytes(multiprocessing.current_process().authkey) != authkey:
        multiprocessing.current_process().authkey = authkey


def run_batch(
    stream: Any,
    buffers: list[Any],
    policy: ThreadPolicy,
    init: Initializer | None = None,
    authkey: bytes | None = None,
) -> Any:
    """Runs on a worker: load a batch that ``encode`` pickled and call it (after the
    ``Parallel`` call's initializer, the first time this worker sees it)."""
    register_on_worker()
    _adopt_authkey(authkey)
    _initialize(init)
    batch: Callable[[], Any] = pickle.loads(stream, buffers=buffers)
    with _limited_threads(thread_limit(policy)):
        return batch()


# What the pool is given to run. The partial matters: the pool sends a task function's
# module by value when it looks like the user's own code, and an editable install of
# this package (a checkout) looks exactly like that; by value, this module would drag
# its locks along. A partial's module is functools, so run_batch travels by reference.
RUN_BATCH: Callable[..., Any] = functools.partial(run_batch)
