"""Spot strategies: the seed's shortcuts and values, normalisation and its errors."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward.spot import (
    Spot,
    SpotAlways,
    SpotIfAvailable,
    SpotLike,
    SpotNever,
    SpotPercent,
    SpotStrategy,
    min_spot_nodes,
    normalize_spot,
    wants_spot,
)


def test_seed_values() -> None:
    assert normalize_spot("always") == SpotAlways()
    assert normalize_spot("if-available") == SpotIfAvailable()
    assert normalize_spot("never") == SpotNever()
    assert normalize_spot(0.8) == SpotPercent(0.8)
    assert normalize_spot(Spot.Always(retries=10, interval=1.0)) == SpotAlways(10, 1.0)
    assert normalize_spot(Spot.IfAvailable()) == SpotIfAvailable()
    assert normalize_spot(Spot.Never) == SpotNever()
    assert normalize_spot(Spot.Percent(0.8)) == SpotPercent(0.8)


def test_lenient_spellings() -> None:
    assert normalize_spot(" Always ") == SpotAlways()
    assert normalize_spot("IF_AVAILABLE") == SpotIfAvailable()
    assert normalize_spot(1) == SpotPercent(1.0)
    assert normalize_spot(Spot.IfAvailable) == SpotIfAvailable()  # the class, uncalled
    assert Spot.Never() is Spot.Never  # calling the value is harmless


def test_values() -> None:
    always = Spot.Always()
    assert (always.retries, always.interval) == (10, 1.0)
    assert isinstance(SpotPercent(1).fraction, float)
    assert pickle.loads(pickle.dumps(Spot.Always(retries=3))) == Spot.Always(retries=3)
    assert {Spot.Never, SpotNever()} == {Spot.Never}


@pytest.mark.parametrize(
    "value",
    ["sometimes", "", 0, 0.0, -0.5, 1.5, math.nan, math.inf, True, None, [0.5], "0.8"],
)
def test_rejected(value: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        normalize_spot(value)  # type: ignore[arg-type]
    assert "'always', 'if-available', 'never'" in str(info.value) or "(0, 1]" in str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Spot.Always(retries=-1),
        lambda: Spot.Always(retries=1.5),  # type: ignore[arg-type]
        lambda: Spot.Always(interval=-1),
        lambda: Spot.Always(interval=math.nan),
        lambda: Spot.Percent(0),
        lambda: Spot.Percent(2),
    ],
)
def test_bad_parameters(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError):
        make()


def test_planning_helpers() -> None:
    assert min_spot_nodes(SpotAlways(), 4) == 4
    assert min_spot_nodes(SpotIfAvailable(), 4) == 0
    assert min_spot_nodes(SpotNever(), 4) == 0
    assert min_spot_nodes(SpotPercent(0.8), 5) == 4
    assert min_spot_nodes(SpotPercent(0.5), 3) == 2
    assert min_spot_nodes(SpotPercent(0.1), 1) == 1
    assert min_spot_nodes(SpotPercent(0.3), 10) == 3  # no float fuzz: 0.3 * 10 is 3
    assert wants_spot(SpotIfAvailable())
    assert not wants_spot(Spot.Never)


spot_likes: st.SearchStrategy[SpotLike] = st.one_of(
    st.sampled_from(["always", "if-available", "never"]),
    st.floats(min_value=0, max_value=1, exclude_min=True),
    st.builds(
        SpotAlways,
        retries=st.integers(0, 100),
        interval=st.floats(0, 60, allow_nan=False, allow_infinity=False),
    ),
    st.just(SpotIfAvailable()),
    st.just(Spot.Never),
    st.floats(min_value=0, max_value=1, exclude_min=True).map(SpotPercent),
)


@given(spot_likes)
def test_normalisation_is_idempotent(value: SpotLike) -> None:
    once: SpotStrategy = normalize_spot(value)
    assert normalize_spot(once) == once
    assert isinstance(once, SpotAlways | SpotIfAvailable | SpotNever | SpotPercent)


@given(st.floats(min_value=0, max_value=1, exclude_min=True), st.integers(1, 1000))
def test_percent_never_asks_for_more_than_the_pool(fraction: float, nodes: int) -> None:
    needed = min_spot_nodes(SpotPercent(fraction), nodes)
    assert 1 <= needed <= nodes
    assert needed >= fraction * nodes - 1e-6
