"""Fixtures for the Google Cloud tests, and the guard that keeps them local.

Tests marked ``cloud`` talk to the fake Google Cloud (tests/fakes/gcp.py) and to emulated
machines at the loopback addresses it hands out. They must run inside a network namespace
where only loopback is up, so that no address, whatever a bug makes of it, leaves this
machine: ``python3 tasks.py test`` arranges it; by hand::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/gcp -m cloud'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`

from fakes.gcp import FakeGCP
from gcp_fake_support import write_credentials
from providers_support import fail_cloud_test_outside_isolation, serve


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "gcp")


@pytest.fixture
def fake_gcp() -> Iterator[FakeGCP]:
    yield from serve(FakeGCP, "Google Cloud")


@pytest.fixture
def gcp_credentials(fake_gcp: FakeGCP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake's service-account key file, named by GOOGLE_APPLICATION_CREDENTIALS."""
    path = write_credentials(fake_gcp, tmp_path)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return path
