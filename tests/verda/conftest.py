"""Fixtures for the Verda provider tests, and the guard that keeps them local.

Tests marked ``cloud`` talk to a fake Verda API (tests/fakes) and to emulated instances
(tests/harness) at the loopback addresses the fake hands out; they must run inside a
network namespace where only loopback is up (``python3 tasks.py test`` arranges it)::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/verda -m cloud'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`

from fakes.verda import CLIENT_ID, CLIENT_SECRET, FakeVerda
from providers_support import fail_cloud_test_outside_isolation, quick_settings, serve
from verda_support import InstanceWorld, emulate


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "verda")


@pytest.fixture
def fake_verda() -> Iterator[FakeVerda]:
    yield from serve(FakeVerda, "Verda")


@pytest.fixture
def verda_credentials(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("VERDA_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("VERDA_CLIENT_SECRET", CLIENT_SECRET)
    return CLIENT_ID, CLIENT_SECRET


@pytest.fixture
def verda_config(fake_verda: FakeVerda, verda_credentials: tuple[str, str]) -> object:
    from skyward_verda import Verda

    return Verda(api_url=f"{fake_verda.url}/v1", **quick_settings(fake_verda))


@pytest.fixture
def instances(fake_verda: FakeVerda) -> Iterator[InstanceWorld]:
    yield from emulate(fake_verda)
