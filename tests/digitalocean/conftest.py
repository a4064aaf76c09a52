"""Fixtures for the DigitalOcean provider tests, and the guard that keeps them local.

Tests marked ``cloud`` talk to a fake DigitalOcean API (tests/fakes) and to emulated
droplets (tests/harness) at the loopback addresses the fake hands out. They must run
inside a network namespace where only loopback is up, so that no address, whatever a bug
makes of it, leaves this machine: ``python3 tasks.py test`` arranges it; by hand::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/digitalocean -m cloud'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`

from do_support import DropletWorld, emulate
from fakes.digitalocean import TOKEN, FakeDigitalOcean
from providers_support import fail_cloud_test_outside_isolation, quick_settings, serve


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "digitalocean")


@pytest.fixture
def fake_do() -> Iterator[FakeDigitalOcean]:
    yield from serve(FakeDigitalOcean, "DigitalOcean")


@pytest.fixture
def do_token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    return TOKEN


@pytest.fixture
def do_config(fake_do: FakeDigitalOcean, do_token: str) -> object:
    from skyward_digitalocean import DigitalOcean

    return DigitalOcean(region="tor1", api_url=fake_do.url, **quick_settings(fake_do))


@pytest.fixture
def droplets(fake_do: FakeDigitalOcean) -> Iterator[DropletWorld]:
    yield from emulate(fake_do)
