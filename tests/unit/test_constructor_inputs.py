"""Every public constructor, given any value for any parameter, accepts it as documented
or refuses it with ``ConfigurationError`` naming that parameter, in bounded time.

The hand-picked odd values and the parameter table live in ``constructor_inputs.py``
(its survey gives the figures in docs/reliability.md); hypothesis adds generated values.
"""

from __future__ import annotations

import math

import pytest
from constructor_inputs import ODD_VALUES, PARAMETERS, Parameter, bounded, try_value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skyward.errors import ConfigurationError

pytestmark = pytest.mark.usefixtures("core_catalog")

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.binary(max_size=8),
    st.complex_numbers(max_magnitude=1e6),
)
ODD = st.one_of(
    st.sampled_from(ODD_VALUES),
    _scalars,
    st.lists(_scalars, max_size=4),
    st.tuples(_scalars),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), _scalars, max_size=3),
    st.frozensets(st.text(max_size=4), max_size=2),
)


@pytest.mark.parametrize("parameter", PARAMETERS, ids=str)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=ODD)
def test_every_constructor_accepts_or_refuses_by_name_any_value(parameter: Parameter, value: object) -> None:
    verdict = try_value(parameter, value)
    assert verdict.outcome in ("accepted", "refused"), f"{parameter} {value!r}: {verdict.outcome}: {verdict.detail}"


def test_the_survey_of_hand_picked_values_finds_no_failure() -> None:
    failures = []
    for parameter in PARAMETERS:
        for value in ODD_VALUES:
            verdict = try_value(parameter, value)
            if verdict.outcome not in ("accepted", "refused"):
                failures.append(f"{parameter} {value!r:.40}: {verdict.outcome} {verdict.detail:.120}")
    assert not failures, "\n".join(failures[:40])


# The cases the issue names, spelled out.


def _refused(make: object, name: str, value: object) -> str:
    assert callable(make)
    with bounded(), pytest.raises(ConfigurationError) as info:
        make(**{name: value})
    assert name in str(info.value)
    return str(info.value)


def test_a_pool_of_ten_to_the_thirty_nodes_is_refused_at_once() -> None:
    from skyward import ComputePool

    _refused(ComputePool, "nodes", 10**30)


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 1e30, -1.0, 0])
def test_a_pool_timeout_that_is_not_a_finite_positive_number_is_refused(timeout: float) -> None:
    from skyward import ComputePool

    _refused(ComputePool, "timeout", timeout)


@pytest.mark.parametrize("name,value", [("env", 1), ("pip", 1), ("env", {1: "x"}), ("pip", [[1]])])
def test_pool_environment_and_packages_of_the_wrong_shape_are_refused_by_name(name: str, value: object) -> None:
    from skyward import ComputePool

    _refused(ComputePool, name, value)


def test_a_mig_list_of_numbers_is_refused_naming_mig() -> None:
    from skyward import Accelerator

    _refused(Accelerator.NVIDIA.A100, "mig", [1])


@pytest.mark.parametrize("provider", ["DigitalOcean", "Verda", "AWS", "Local"])
def test_a_grace_period_of_nan_is_refused_by_every_provider(provider: str) -> None:
    from skyward import Local

    configs = {"Local": Local}
    if provider != "Local":
        import importlib

        module = importlib.import_module(f"skyward_{provider.lower()}")
        configs[provider] = getattr(module, provider)
    _refused(configs[provider], "grace_period", math.nan)
    _refused(configs[provider], "grace_period", "x")


@pytest.mark.parametrize("provider", ["DigitalOcean", "Verda"])
def test_a_client_address_that_is_a_number_is_not_read_as_an_address(provider: str) -> None:
    import importlib

    config = getattr(importlib.import_module(f"skyward_{provider.lower()}"), provider)
    _refused(config, "client_address", 1)


@pytest.mark.parametrize("provider", ["DigitalOcean", "Verda"])
def test_reap_takes_only_true_or_false(provider: str) -> None:
    import importlib

    config = getattr(importlib.import_module(f"skyward_{provider.lower()}"), provider)
    _refused(config, "reap", "no")
    assert config(reap=False).reap is False
