"""The container settings both marketplaces check the same way (skyward.providers.cloud.marketplace)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward.providers.cloud.marketplace import check_container, check_number


@pytest.mark.parametrize(
    ("image", "disk_gb", "wrong"),
    [("", 32, "image=''"), (" ", 32, "image=' '"), ("img", 7, "disk_gb=7"), ("img", True, "disk_gb=True"),
     ("img", 32.0, "disk_gb=32.0"), ("img", 10_001, "disk_gb=10001")],
)  # fmt: skip
def test_a_bad_container_setting_is_refused_naming_the_parameter(image: object, disk_gb: object, wrong: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"^Cloud\({wrong}\) must "):
        check_container("Cloud", image, disk_gb)


def test_the_smallest_and_largest_disks_are_allowed() -> None:
    check_container("Cloud", "img", 8)
    check_container("Cloud", "img", 10_000)


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.booleans())
def test_a_number_is_accepted_exactly_when_it_is_a_real_number_in_range(value: float | int | bool) -> None:
    inside = not isinstance(value, bool) and 0.0 <= value <= 10.0
    if inside:
        check_number("Cloud", "bid_margin", value, 0.0, 10.0)
    else:
        with pytest.raises(ConfigurationError, match=r"^Cloud\(bid_margin=.*\) must be a number from 0 to 10$"):
            check_number("Cloud", "bid_margin", value, 0.0, 10.0)
