"""ComputePool validates every parameter at construction and provisions nothing."""

from __future__ import annotations

import os
from typing import Any

import pytest

import skyward as sky
from skyward.api.pool import version_mismatch
from skyward.errors import ConfigurationError


def _no_skyward_processes() -> bool:
    import psutil

    me = psutil.Process(os.getpid())
    return not any("skyward.agent" in " ".join(c.cmdline()) for c in me.children(recursive=True))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, r"nodes=0.*integer >= 1"),
        ({"nodes": 1.5}, r"nodes=1.5"),
        ({"nodes": True}, r"nodes=True"),
        ({"concurrency": 0}, r"concurrency=0.*integer >= 1"),
        ({"display": "fancy"}, r"display='fancy'.*'log', 'spinner', 'quiet'"),
        ({"timeout": 0}, r"timeout=0"),
        ({"timeout": -5}, r"timeout=-5"),
        ({"pip": "numpy"}, r"list of packages"),
        ({"image": "python:3.11"}, r"skyward.Image"),
        ({"on_event": 3}, r"on_event=3"),
        ({"collect_metrics": "yes"}, r"collect_metrics='yes'"),
        ({"spot": "always"}, r"no spot market"),
        ({"machine": "p5.48xlarge"}, r"machine='p5.48xlarge'.*Local"),
        ({"volume": ["/data"]}, r"'/data' is not a volume"),
        ({"nodes": (3, 2)}, r"nodes=\(3, 2\).*max >= desired"),
        ({"nodes": (1, 2, 3)}, r"nodes=\(1, 2, 3\).*\(desired, max\)"),
        ({"nodes": -1}, r"nodes=-1"),
        ({"autoscale_cooldown": -1}, r"autoscale_cooldown=-1"),
        ({"autoscale_idle_timeout": float("inf")}, r"autoscale_idle_timeout=inf"),
        ({"replace_lost_nodes": "yes"}, r"replace_lost_nodes='yes'"),
    ],
)
def test_bad_parameters_fail_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        sky.ComputePool(**kwargs)
    assert _no_skyward_processes()


def test_unknown_provider_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown provider.*Local"):
        sky.ComputePool(provider="aws")


def test_unknown_keyword_names_the_keyword() -> None:
    with pytest.raises(TypeError, match="nodez"):
        sky.ComputePool(nodez=2)  # type: ignore[call-arg]


def test_missing_plugin_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from skyward.plugins.registry import registry

    monkeypatch.setattr(registry, "exports", dict)
    with pytest.raises(AttributeError, match=r"pip install 'skyward\[aws\]'"):
        _ = sky.AWS
    with pytest.raises(AttributeError, match=r"skyward\[sklearn\]"):
        _ = sky.integrations.JoblibPool
    with pytest.raises(AttributeError, match="has no attribute 'Nonexistent'"):
        _ = sky.Nonexistent


def test_pip_shorthand_and_env_merge_into_the_image() -> None:
    pool = sky.ComputePool(pip=["six"], env={"A": "1"}, display="quiet")
    assert pool.spec.image.pip == ("six",)
    assert pool.spec.image.env == {"A": "1"}
    assert pool.instance_count == 1 and not pool.is_active


def test_worker_slots_multiply_concurrency() -> None:
    pool = sky.ComputePool(nodes=3, concurrency=2, display="quiet")
    assert pool.spec.workers_per_node == 2 and pool.spec.total_workers == 6


def test_using_a_pool_outside_its_block_is_a_clear_error() -> None:
    @sky.compute
    def f() -> int:
        return 1

    pool = sky.ComputePool(display="quiet")
    with pytest.raises(sky.PoolClosedError, match="not active"):
        f() >> pool


def test_version_mismatch_names_both_sides() -> None:
    assert version_mismatch(0, {"python": "3.11.7", "cloudpickle": "3.1.2"}, "3.11", "3.1.2") is None
    problem = version_mismatch(1, {"python": "3.12.1", "cloudpickle": "3.1.2"}, "3.11", "3.1.2")
    assert problem is not None and "3.12.1" in problem and "3.11" in problem and "node 1" in problem
    problem = version_mismatch(0, {"python": "3.11.2", "cloudpickle": "3.0.0"}, "3.11", "3.1.2")
    assert problem is not None and "3.0.0" in problem and "3.1.2" in problem


def test_a_fixed_pool_s_spec_carries_its_size_as_bounds() -> None:
    pool = sky.ComputePool(nodes=3, display="quiet")
    assert pool.spec.nodes == 3 and pool.spec.scaling == sky.Nodes(3) and pool.spec.max_nodes == 3
    assert pool.desired_nodes == 3


def test_a_bad_nodes_value_in_sky_nodes_is_refused_naming_its_field() -> None:
    with pytest.raises(ConfigurationError, match=r"sky.Nodes\(desired=2, min=3\)"):
        sky.ComputePool(nodes=sky.Nodes(2, min=3))
