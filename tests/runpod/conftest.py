"""Fixtures for the RunPod provider tests. Tests marked ``cloud`` talk to the fake RunPod
API and to emulated pods behind a port mapping; they run only inside a network namespace
where only loopback is up::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/runpod -m cloud'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`

from fakes.runpod import API_KEY, FakeRunPod
from providers_support import World, emulate, fail_cloud_test_outside_isolation, quick_settings, serve

from skyward_runpod import RunPod


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "runpod")


@pytest.fixture
def runpod_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RUNPOD_API_KEY", API_KEY)
    return API_KEY


@pytest.fixture
def fake_runpod() -> Iterator[FakeRunPod]:
    yield from serve(FakeRunPod, "RunPod")


@pytest.fixture
def runpod_config(fake_runpod: FakeRunPod, runpod_key: str) -> RunPod:
    return RunPod(api_url=f"{fake_runpod.url}/graphql", **quick_settings(fake_runpod))


@pytest.fixture
def runpod_world(fake_runpod: FakeRunPod) -> Iterator[World[FakeRunPod]]:
    yield from emulate(fake_runpod, fake_runpod.shut_down)
