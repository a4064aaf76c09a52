"""Fixtures for the Google Cloud provider tests, and the guard that keeps them local.

Tests marked ``cloud`` talk to the fake Google Cloud (tests/fakes/gcp.py: OAuth token
endpoint, Compute Engine and Cloud TPU REST APIs) and to emulated VMs (tests/harness) at
loopback addresses. They must run inside a network namespace where only loopback is up::

    SKYWARD_TEST_NETNS=1 unshare --net -- sh -c 'ip link set lo up && \\
        exec .venv/bin/python -m pytest -p no:cacheprovider -q -m cloud tests/gcp'
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `providers_support`

from providers_support import fail_cloud_test_outside_isolation


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "gcp")


@pytest.fixture
def no_google_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No credentials anywhere google-auth looks: no env file, no gcloud config, no metadata server."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # google-auth's switch: do not probe a metadata server
    yield
