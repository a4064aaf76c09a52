"""Fixtures for the VastAI provider tests. Tests marked ``cloud`` talk to the fake VastAI
API and to emulated instances behind a port mapping; they run only inside a network
namespace where only loopback is up::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/vastai -m cloud'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`

from fakes.vastai import API_KEY, FakeVastAI
from providers_support import World, emulate, fail_cloud_test_outside_isolation, quick_settings, serve

from skyward_vastai import VastAI


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "vastai")


@pytest.fixture
def vast_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("VAST_API_KEY", API_KEY)
    monkeypatch.setenv("HOME", str(tmp_path))  # no key file of the user's is read
    return API_KEY


@pytest.fixture
def fake_vast() -> Iterator[FakeVastAI]:
    yield from serve(FakeVastAI, "VastAI")


@pytest.fixture
def vast_config(fake_vast: FakeVastAI, vast_key: str) -> VastAI:
    return VastAI(api_url=f"{fake_vast.url}/api/v0", **quick_settings(fake_vast))


@pytest.fixture
def vast_world(fake_vast: FakeVastAI) -> Iterator[World[FakeVastAI]]:
    yield from emulate(fake_vast, fake_vast.shut_down)
