"""Memory sizes: parsing to bytes (binary units) and formatting back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.errors import ConfigurationError
from skyward.units import GIB, KIB, MIB, TIB, format_memory, format_memory_approx, parse_memory


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("32GB", 32 * GIB),
        ("40GiB", 40 * GIB),
        ("512MB", 512 * MIB),
        ("1TB", TIB),
        ("1tb", TIB),
        ("16 gb", 16 * GIB),
        (" 8G ", 8 * GIB),
        ("1.5GB", 3 * GIB // 2),
        (".5TiB", TIB // 2),
        ("64KiB", 64 * KIB),
        ("100B", 100),
        (4096, 4096),
    ],
)
def test_parse(text: str | int, size: int) -> None:
    assert parse_memory(text) == size


@pytest.mark.parametrize("value", ["32", "GB", "32 parsecs", "-1GB", "0GB", "", "1e3GB", 0, -5, True, 3.5, None])
def test_rejected_with_the_allowed_forms(value: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_memory(value)  # type: ignore[arg-type]
    message = str(info.value)
    assert "'32GB'" in message or "positive" in message


def test_format() -> None:
    assert format_memory(32 * GIB) == "32GB"
    assert format_memory(1536 * MIB) == "1536MB"
    assert format_memory(2 * TIB) == "2TB"
    assert format_memory(1000) == "1000B"
    assert format_memory_approx(int(15.6 * GIB)) == "15.6GB"
    assert format_memory_approx(16 * GIB) == "16GB"
    assert format_memory_approx(12) == "12B"
    with pytest.raises(ConfigurationError):
        format_memory(0)


@given(st.integers(min_value=1, max_value=2**60))
def test_bytes_round_trip(size: int) -> None:
    assert parse_memory(format_memory(size)) == size
    assert parse_memory(parse_memory(size)) == parse_memory(size)


@given(
    st.integers(min_value=1, max_value=10**6),
    st.sampled_from(["B", "KB", "KiB", "MB", "MiB", "GB", "GiB", "G", "TB", "TiB", "gb", "mib"]),
)
def test_text_round_trip(amount: int, unit: str) -> None:
    size = parse_memory(f"{amount}{unit}")
    assert parse_memory(format_memory(size)) == size
    assert format_memory(parse_memory(format_memory(size))) == format_memory(size)
