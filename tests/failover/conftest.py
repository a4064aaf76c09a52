"""Fixtures for the failover tests: two fake clouds at once (DigitalOcean and Verda).

Tests marked ``cloud`` talk to the fake APIs (tests/fakes) and to emulated machines
(tests/harness) at the loopback addresses the fakes hand out; they must run inside a
network namespace where only loopback is up::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/failover -m cloud'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "digitalocean"))  # do_support
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verda"))  # verda_support

from fakes.digitalocean import TOKEN, FakeDigitalOcean
from fakes.verda import CLIENT_ID, CLIENT_SECRET, FakeVerda
from providers_support import fail_cloud_test_outside_isolation, serve


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "failover")


@pytest.fixture
def fake_do() -> Iterator[FakeDigitalOcean]:
    yield from serve(FakeDigitalOcean, "DigitalOcean")


@pytest.fixture
def fake_verda() -> Iterator[FakeVerda]:
    yield from serve(FakeVerda, "Verda")


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    monkeypatch.setenv("VERDA_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("VERDA_CLIENT_SECRET", CLIENT_SECRET)
