"""How a batch is pickled for a worker, thread limits, and the backend's sizing rules."""

from __future__ import annotations

import pickle
import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward_sklearn import payload
from skyward_sklearn.backend import SkywardBackend, current_pool
from skyward_sklearn.payload import ThreadPolicy, encode, thread_limit, warning_category


def decode(stream: Any, buffers: list[Any]) -> Any:
    # what a worker gets: the buffers as plain memoryviews
    return pickle.loads(stream, buffers=[memoryview(b) for b in buffers])


def test_arrays_travel_out_of_band_and_round_trip() -> None:
    big = np.arange(100_000, dtype=np.float64)
    stream, buffers = encode({"x": big, "y": [1, 2]})
    assert len(buffers) == 1 and buffers[0].raw().nbytes == big.nbytes
    assert len(stream.raw()) < 1_000  # the array is not in the pickle stream
    back = decode(stream, buffers)
    np.testing.assert_array_equal(back["x"], big)
    assert back["y"] == [1, 2]


@pytest.fixture
def third_party_module() -> Iterator[types.ModuleType]:
    """A module standing in for an installed package the workers may lack."""
    module = types.ModuleType("skyward_test_absent_pkg")
    module.__file__ = f"{sys.prefix}/lib/skyward_test_absent_pkg/__init__.py"

    class AbsentPkgWarning(UserWarning):
        pass

    AbsentPkgWarning.__module__ = module.__name__
    AbsentPkgWarning.__qualname__ = "AbsentPkgWarning"
    module.AbsentPkgWarning = AbsentPkgWarning  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    sys.modules.pop(module.__name__, None)


def test_a_warning_category_travels_by_name(third_party_module: types.ModuleType) -> None:
    category = third_party_module.AbsentPkgWarning  # type: ignore[attr-defined]
    filters = [("error", None, category, None, 0), ("ignore", None, DeprecationWarning, None, 0)]
    stream, buffers = encode(filters)
    assert b"warning_category" in stream.raw().tobytes()  # named, not pickled by value
    assert decode(stream, buffers)[0][2] is category  # the worker has the package: the real class


def test_a_warning_category_the_worker_lacks_becomes_a_stand_in(third_party_module: types.ModuleType) -> None:
    category = third_party_module.AbsentPkgWarning  # type: ignore[attr-defined]
    stream, buffers = encode([("error", None, category, None, 0)])
    del sys.modules[third_party_module.__name__]  # now, like a worker, we cannot import it
    stand_in = decode(stream, buffers)[0][2]
    assert stand_in is not category
    assert issubclass(stand_in, Warning)
    assert (stand_in.__module__, stand_in.__qualname__) == ("skyward_test_absent_pkg", "AbsentPkgWarning")
    assert warning_category("skyward_test_absent_pkg", "AbsentPkgWarning") is stand_in  # one per name
    # the filter can be installed and never matches anything real
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", category=stand_in)
        warnings.warn("harmless", UserWarning, stacklevel=1)
    assert len(seen) == 1


def test_standard_categories_are_untouched() -> None:
    stream, buffers = encode([DeprecationWarning, RuntimeWarning])
    assert decode(stream, buffers) == [DeprecationWarning, RuntimeWarning]


def test_skyward_functions_travel_by_reference() -> None:
    # skyward's packages are installed editable in this checkout, which the pool's
    # "user module" rule cannot tell from a user's project; by value they would drag locks
    stream, _ = encode(payload.warning_category)
    assert b"skyward_sklearn.payload" in stream.raw().tobytes()
    assert len(stream.raw()) < 200


def test_an_explicit_thread_limit_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert thread_limit(ThreadPolicy(explicit=3, sharing=2)) == 3


def test_a_thread_variable_in_the_environment_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert thread_limit(ThreadPolicy(explicit=None, sharing=2)) is None


@given(st.integers(1, 512))
def test_the_default_limit_shares_the_cpus(sharing: int) -> None:
    import os

    for var in payload.THREAD_VARS:
        os.environ.pop(var, None)
    limit = thread_limit(ThreadPolicy(explicit=None, sharing=sharing))
    assert limit is not None and limit >= 1
    assert limit == max(1, payload._cpu_count() // sharing)


@dataclass
class FakeSpec:
    total_workers: int


@dataclass
class FakePool:
    spec: FakeSpec
    is_active: bool = True
    submitted: list[Any] = field(default_factory=list)


@given(st.integers(1, 64), st.integers(-100, 100).filter(lambda n: n != 0))
def test_effective_n_jobs_is_between_one_and_the_pool(total: int, n_jobs: int) -> None:
    backend = SkywardBackend(pool=FakePool(FakeSpec(total)))  # type: ignore[arg-type]
    effective = backend.effective_n_jobs(n_jobs)
    assert 1 <= effective <= total
    if n_jobs == -1 or n_jobs >= total:
        assert effective == total
    assert backend.effective_n_jobs(None) == total  # n_jobs=None: the whole pool


def test_n_jobs_zero_is_meaningless() -> None:
    backend = SkywardBackend(pool=FakePool(FakeSpec(4)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_jobs == 0"):
        backend.effective_n_jobs(0)


def test_the_backend_without_a_pool_says_where_to_use_it() -> None:
    with pytest.raises(ConfigurationError, match="inside 'with joblib_backend"):
        current_pool()
    with pytest.raises(ConfigurationError, match="has no pool"):
        SkywardBackend()
