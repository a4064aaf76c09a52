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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes` and `harness`

from fakes.verda import CLIENT_ID, CLIENT_SECRET, FakeVerda
from harness.netns import isolation_problem
from verda_support import InstanceWorld, emulate


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cloud") is not None:
        problem = isolation_problem()
        if problem is not None:
            pytest.fail(
                f"cloud test outside an isolated network namespace: {problem}. Run it with: unshare --net -- sh -c "
                "'ip link set lo up && SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/verda -m cloud', "
                "or python3 tasks.py test",
                pytrace=False,
            )


@pytest.fixture
def fake_verda() -> Iterator[FakeVerda]:
    problem = isolation_problem()
    if problem is not None:
        pytest.fail(f"refusing to start the fake Verda API outside an isolated namespace: {problem}")
    fake = FakeVerda()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def verda_credentials(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv("VERDA_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("VERDA_CLIENT_SECRET", CLIENT_SECRET)
    return CLIENT_ID, CLIENT_SECRET


@pytest.fixture
def verda_config(fake_verda: FakeVerda, verda_credentials: tuple[str, str]) -> object:
    from skyward_verda import Verda

    return Verda(
        api_url=f"{fake_verda.url}/v1",
        address_url=f"{fake_verda.url}/whoami",
        poll_interval=0.02,
        provision_timeout=20.0,
        bootstrap_timeout=120.0,
        grace_period=5.0,
        api_timeout=5.0,
        api_retries=4,
        api_backoff=0.02,
    )


@pytest.fixture
def instances(fake_verda: FakeVerda) -> Iterator[InstanceWorld]:
    yield from emulate(fake_verda)
