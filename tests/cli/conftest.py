"""Fixtures for the ``skyward`` command's tests.

Tests marked ``cloud`` drive the command against moto (AWS) and the fake DigitalOcean and
Verda APIs; like every cloud test they must run in a network namespace with only loopback
up (``python3 tasks.py test`` arranges it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verda"))  # verda_support
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "digitalocean"))  # do_support
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `aws`, `fakes`, `providers_support`

from aws.conftest import AwsWorld, aws, emulate, emulated, moto_server  # noqa: F401  (fixtures, re-exported)
from do_fixtures import do_config, fake_do  # noqa: F401  (fixtures, re-exported)
from fakes.verda import CLIENT_ID, CLIENT_SECRET, FakeVerda
from providers_support import fail_cloud_test_outside_isolation, quick_settings, serve


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "cli")


@pytest.fixture
def fake_verda() -> Iterator[FakeVerda]:
    yield from serve(FakeVerda, "Verda")


@pytest.fixture
def verda_config(fake_verda: FakeVerda, monkeypatch: pytest.MonkeyPatch) -> object:
    from skyward_verda import Verda

    monkeypatch.setenv("VERDA_CLIENT_ID", CLIENT_ID)
    monkeypatch.setenv("VERDA_CLIENT_SECRET", CLIENT_SECRET)
    return Verda(api_url=f"{fake_verda.url}/v1", **quick_settings(fake_verda))


__all__ = ["AwsWorld"]
