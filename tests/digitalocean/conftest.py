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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes` and `harness`

from do_support import DropletWorld, emulate
from fakes.digitalocean import TOKEN, FakeDigitalOcean
from harness.netns import isolation_problem


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cloud") is not None:
        problem = isolation_problem()
        if problem is not None:
            pytest.fail(
                f"cloud test outside an isolated network namespace: {problem}. Run it with: unshare --net -- sh -c "
                "'ip link set lo up && SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/digitalocean -m cloud', "
                "or python3 tasks.py test",
                pytrace=False,
            )


@pytest.fixture
def fake_do() -> Iterator[FakeDigitalOcean]:
    problem = isolation_problem()
    if problem is not None:  # a fake that hands out addresses runs only where nothing else is reachable
        pytest.fail(f"refusing to start the fake DigitalOcean API outside an isolated namespace: {problem}")
    fake = FakeDigitalOcean()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def do_token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    return TOKEN


@pytest.fixture
def do_config(fake_do: FakeDigitalOcean, do_token: str) -> object:
    from skyward_digitalocean import DigitalOcean

    return DigitalOcean(
        region="tor1",
        api_url=fake_do.url,
        address_url=f"{fake_do.url}/whoami",
        poll_interval=0.02,
        provision_timeout=20.0,
        bootstrap_timeout=120.0,
        grace_period=5.0,
        api_timeout=5.0,
        api_retries=4,
        api_backoff=0.02,
    )


@pytest.fixture
def droplets(fake_do: FakeDigitalOcean) -> Iterator[DropletWorld]:
    yield from emulate(fake_do)
