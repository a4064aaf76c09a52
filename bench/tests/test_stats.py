from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.measures.common import rotated
from bench.stats import median, percentile, ratio

samples = st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=1, max_size=200)


@given(samples, st.floats(min_value=0, max_value=100))
def test_percentile_lies_within_the_samples(values: list[float], q: float) -> None:
    assert min(values) <= percentile(values, q) <= max(values)


@given(samples, st.floats(min_value=0, max_value=100), st.floats(min_value=0, max_value=100))
def test_percentile_is_monotone_in_q(values: list[float], q1: float, q2: float) -> None:
    low, high = sorted((q1, q2))
    assert percentile(values, low) <= percentile(values, high)


def test_known_values() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert percentile(list(map(float, range(101))), 99) == 99.0
    assert percentile([5.0], 99) == 5.0


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], 101)


def test_ratio_by_zero_is_infinite_not_zero() -> None:
    assert ratio(1.0, 0.0) == math.inf
    assert ratio(3.0, 2.0) == 1.5


@given(st.lists(st.integers(), max_size=10), st.integers(min_value=0, max_value=50))
def test_rotation_keeps_every_item(items: list[int], r: int) -> None:
    out = rotated(items, r)
    assert sorted(out) == sorted(items)
    if items:
        assert out[0] == items[r % len(items)]
