"""Cold-start tests: the AWS fixtures (moto, the recording proxy, emulated instances) and
the DigitalOcean fake, shared with tests/aws and tests/digitalocean. Tests marked
``cloud`` run only in an isolated network namespace (see tests/aws/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `aws`, `fakes`, `harness`

from aws.conftest import aws, emulate, emulated, moto_server
from fakes.digitalocean import TOKEN, FakeDigitalOcean
from harness.netns import isolation_problem
from providers_support import quick_settings, serve

__all__ = ["aws", "do_config", "emulate", "emulated", "fake_do", "moto_server"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cloud") is not None:
        problem = isolation_problem()
        if problem is not None:
            pytest.fail(f"cloud test outside an isolated network namespace: {problem}", pytrace=False)


@pytest.fixture
def fake_do() -> Iterator[FakeDigitalOcean]:
    yield from serve(FakeDigitalOcean, "DigitalOcean")


@pytest.fixture
def do_config(fake_do: FakeDigitalOcean, monkeypatch: pytest.MonkeyPatch) -> object:
    from skyward_digitalocean import DigitalOcean

    monkeypatch.setenv("DIGITALOCEAN_TOKEN", TOKEN)
    return DigitalOcean(region="tor1", api_url=fake_do.url, **quick_settings(fake_do))
