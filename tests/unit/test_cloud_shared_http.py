"""The pieces of an HTTP client that every provider shares (one home each)."""

from __future__ import annotations

import harness
import pytest

import skyward.testing
from skyward.providers.cloud.addresses import is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("", False),
        (None, False),
        ("10.0.0.1", False),
        ("api.example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_only_this_machine_counts_as_loopback(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_verda_retries_by_the_core_rules() -> None:
    pytest.importorskip("skyward_verda")
    from skyward.providers.cloud import http
    from skyward_verda import api

    assert api.classify is http.classify
    assert api.HTTPStatusError is http.HTTPStatusError


def test_the_test_harness_exports_exactly_the_public_testing_names() -> None:
    assert harness.__all__ == skyward.testing.__all__
    assert all(getattr(harness, name) is getattr(skyward.testing, name) for name in skyward.testing.__all__)
