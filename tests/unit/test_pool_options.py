"""``PoolOptions`` (what JoblibPool and ScikitLearnPool take as ``**options``) and
``ComputePool``'s explicit signature name the same parameters with the same types: the
one definition cannot drift from the signature the API reference shows."""

from __future__ import annotations

import inspect
from typing import get_type_hints

import pytest

import skyward as sky
from skyward.api.options import PoolOptions
from skyward.api.pool import ComputePool


def _pool_parameters() -> dict[str, object]:
    hints = get_type_hints(ComputePool.__init__)
    hints.pop("return")
    return hints


def test_pool_options_are_every_computepool_parameter_but_the_provider_with_its_type() -> None:
    parameters = _pool_parameters()
    assert next(iter(parameters)) == "provider"
    del parameters["provider"]
    assert get_type_hints(PoolOptions) == parameters


def test_every_pool_option_is_a_keyword_computepool_also_takes_by_keyword() -> None:
    signature = inspect.signature(ComputePool.__init__)
    for name in PoolOptions.__annotations__:
        assert signature.parameters[name].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


@pytest.mark.parametrize("pool_class", ["JoblibPool", "ScikitLearnPool"])
def test_the_integration_pools_pass_every_option_on(pool_class: str) -> None:
    pools = pytest.importorskip("skyward_sklearn.pools")
    events: list[object] = []
    pool = getattr(pools, pool_class)(
        sky.Local(), nodes=2, concurrency=3, timeout=120, display="quiet", on_event=events.append,
        collect_metrics=False, max_hourly_cost=5.0, env={"A": "1"},
    )  # fmt: skip
    assert isinstance(pool, ComputePool)
    assert (pool.spec.nodes, pool.spec.concurrency, pool.spec.timeout) == (2, 3, 120.0)
    assert (pool.spec.display, pool.spec.collect_metrics, pool.spec.max_hourly_cost) == ("quiet", False, 5.0)
    assert pool.spec.image.env == {"A": "1"}
