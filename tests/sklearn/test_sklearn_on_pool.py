"""scikit-learn on a pool: GridSearchCV matches loky, pools pin versions, drift is refused."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC

import skyward as sky
from skyward.errors import ConfigurationError, VersionMismatchError
from skyward_sklearn import pools
from skyward_sklearn.versions import installed_versions

GRID = {"C": [0.1, 1.0, 10.0], "gamma": [0.01, 0.1, 1.0]}
CLIENT = installed_versions(["scikit-learn", "joblib", "numpy", "scipy"])


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_iris(return_X_y=True)
    return X, y


def pid_scorer(estimator: object, X: np.ndarray, y: np.ndarray) -> float:
    """A scorer defined here, in a module the workers cannot import: it travels by value
    and reports where each fit was scored."""
    return float(os.getpid())


def search(X: np.ndarray, y: np.ndarray) -> GridSearchCV:
    return GridSearchCV(SVC(), GRID, cv=5, n_jobs=-1, return_train_score=True).fit(X, y)


def test_grid_search_on_two_nodes_matches_loky(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    with parallel_config(backend="loky", n_jobs=2):
        expected = search(X, y)
    with sky.ComputePool(nodes=2, display="quiet") as pool, sky.integrations.sklearn_backend(pool):
        got = search(X, y)
        pids = set(sky.compute(os.getpid)() @ pool)
        placed = GridSearchCV(SVC(), {"C": [0.5, 1.0]}, cv=3, scoring=pid_scorer, n_jobs=-1).fit(X, y)
    assert got.best_params_ == expected.best_params_
    assert got.best_index_ == expected.best_index_
    for key in expected.cv_results_:
        if "score" in key and "time" not in key:
            np.testing.assert_array_equal(got.cv_results_[key], expected.cv_results_[key], err_msg=key)
    assert list(got.cv_results_["params"]) == list(expected.cv_results_["params"])
    scored_on = {int(placed.cv_results_[f"split{i}_test_score"][j]) for i in range(3) for j in range(2)}
    assert scored_on <= pids and os.getpid() not in scored_on


def test_scikit_learn_pool_is_exported_and_runs_a_search(data: tuple[np.ndarray, np.ndarray]) -> None:
    from skyward.integrations import JoblibPool, ScikitLearnPool, joblib_backend, sklearn_backend

    assert (JoblibPool, ScikitLearnPool) == (pools.JoblibPool, pools.ScikitLearnPool)
    assert (joblib_backend, sklearn_backend) == (pools.joblib_backend, pools.sklearn_backend)
    X, y = data
    with ScikitLearnPool(nodes=2, display="quiet") as pool:
        assert isinstance(pool, sky.ComputePool) and pool.is_active
        assert pool.spec.image.pip == ()  # Local, this interpreter: nothing to install
        placed = GridSearchCV(SVC(), {"C": [0.5, 1.0]}, cv=2, scoring=pid_scorer, n_jobs=-1).fit(X, y)
        assert os.getpid() not in {int(s) for s in placed.cv_results_["split0_test_score"]}
    assert not pool.is_active
    with pytest.raises(ConfigurationError, match="has no pool"):  # the backend left with the block
        from joblib import Parallel

        Parallel(backend="skyward")


def test_joblib_pool_runs_parallel_on_its_workers() -> None:
    from joblib import Parallel, delayed

    with sky.integrations.JoblibPool(nodes=1, concurrency=2, display="quiet") as pool:
        assert pool.spec.total_workers == 2
        pids = Parallel(n_jobs=-1)(delayed(os.getpid)() for _ in range(6))
    assert os.getpid() not in pids


class NotLocal:
    """Any provider other than Local (construction only; nothing is provisioned)."""


def test_pools_pin_the_client_versions_where_nodes_build_an_environment() -> None:
    pool = pools.ScikitLearnPool(pip=["six==1.16.0"], display="quiet")
    expected = [f"{name}=={version}" for name, version in CLIENT.items() if version]
    assert list(pool.spec.image.pip) == ["six==1.16.0", *expected]
    joblib_pool = pools.JoblibPool(image=sky.Image(pip=["six==1.16.0"]), display="quiet")
    assert list(joblib_pool.spec.image.pip) == ["six==1.16.0", f"joblib=={CLIENT['joblib']}"]


def test_a_non_local_provider_always_gets_the_pins() -> None:
    example = pytest.importorskip("skyward_example_plugin")
    pool = pools.JoblibPool(provider=example.Delayed(), display="quiet")
    assert list(pool.spec.image.pip) == [f"joblib=={CLIENT['joblib']}"]


def test_another_scikit_learn_version_is_refused_before_provisioning() -> None:
    with pytest.raises(ConfigurationError, match=r"scikit-learn 0\.24\.2 was asked for"):
        pools.ScikitLearnPool(sklearn_version="0.24.2", display="quiet")
    with pytest.raises(ConfigurationError, match="excludes joblib"):
        pools.JoblibPool(pip=["joblib<1.0"], display="quiet")


def test_the_pools_take_every_compute_pool_parameter() -> None:
    base = dict(inspect.signature(sky.ComputePool).parameters)
    for cls, extra in ((pools.JoblibPool, "joblib_version"), (pools.ScikitLearnPool, "sklearn_version")):
        params = dict(inspect.signature(cls).parameters)
        assert params.pop(extra).default is None
        assert [(p.name, p.default) for p in params.values()] == [(p.name, p.default) for p in base.values()]


@pytest.fixture
def other_versions(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment whose scikit-learn and joblib metadata say 0.0.1: put first on the
    workers' path, it is what they find, exactly as an older installation would be."""
    for dist in ("scikit_learn", "joblib"):
        info = tmp_path / f"{dist}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: 0.0.1\n")
    yield {"PYTHONPATH": str(tmp_path)}


def test_a_worker_with_another_scikit_learn_is_a_clear_error(other_versions: dict[str, str]) -> None:
    with sky.ComputePool(nodes=1, env=other_versions, display="quiet") as pool:
        with pytest.raises(VersionMismatchError) as raised:
            with sky.integrations.sklearn_backend(pool):
                pytest.fail("the backend must not activate")
        message = str(raised.value)
        assert f"scikit-learn differs: this client runs {CLIENT['scikit-learn']}, the workers run 0.0.1" in message
        assert f"joblib differs: this client runs {CLIENT['joblib']}, the workers run 0.0.1" in message
        assert "ScikitLearnPool" in message
        with pytest.raises(VersionMismatchError, match=r"joblib differs.*Use JoblibPool"):
            with sky.integrations.joblib_backend(pool):
                pytest.fail("the backend must not activate")
        assert pool.is_active  # only the backend was refused


def test_a_scikit_learn_pool_with_drifted_workers_refuses_and_stops(other_versions: dict[str, str]) -> None:
    pool = pools.ScikitLearnPool(nodes=1, env=other_versions, display="quiet")
    with pytest.raises(VersionMismatchError, match="scikit-learn differs"):
        with pool:
            pytest.fail("the block must not run")
    assert not pool.is_active


@pytest.mark.slow
def test_a_pool_with_its_own_environment_runs_a_search(data: tuple[np.ndarray, np.ndarray]) -> None:
    """Nodes in a fresh uv environment (pinned to this client's versions) that lacks
    pytest, while this client's warning filters, which scikit-learn sends with every
    task, name pytest's categories."""
    import warnings

    X, y = data
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=pytest.PytestRemovedIn10Warning)
        with pools.ScikitLearnPool(nodes=1, pip=["six==1.16.0"], display="quiet") as pool:
            prefix = sky.compute(lambda: __import__("sys").prefix)() >> pool
            assert Path(prefix).parent == Path(os.environ["SKYWARD_HOME"]) / "envs"
            got = search(X, y)
    with parallel_config(backend="loky", n_jobs=2):
        expected = search(X, y)
    assert got.best_params_ == expected.best_params_
    np.testing.assert_array_equal(got.cv_results_["mean_test_score"], expected.cv_results_["mean_test_score"])
