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

from fakes.gcp import FakeGCP
from gcp_fake_support import emulate, write_credentials
from providers_support import World, fail_cloud_test_outside_isolation, quick_settings, serve

from skyward_gcp import GCP


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


@pytest.fixture
def fake_gcp() -> Iterator[FakeGCP]:
    yield from serve(FakeGCP, "Google Cloud")


@pytest.fixture
def gcp_credentials(fake_gcp: FakeGCP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A service-account key of the fake's project, in a 0600 file GOOGLE_APPLICATION_CREDENTIALS names."""
    key = write_credentials(fake_gcp, tmp_path)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    return key


@pytest.fixture
def gcp_world(fake_gcp: FakeGCP) -> Iterator[World[FakeGCP]]:
    """VMs (and TPU hosts) run their startup script in the emulated-instance harness."""
    yield from emulate(fake_gcp)


def gcp_config(fake: FakeGCP, **overrides: object) -> GCP:
    settings: dict[str, object] = {**quick_settings(fake), **overrides}
    return GCP(compute_api_url=fake.url, tpu_api_url=fake.url, **settings)  # type: ignore[arg-type]


# The metadata server of an emulated TPU host, for what the slice's startup script asks it:
# Google sets ``agent-worker-number`` on each host of a slice; here it is the host's index,
# read from the instance's own directory (named after the host, ``<node>-w-<index>``).
METADATA_CURL = """#!/bin/bash
case "$*" in
  *computeMetadata/v1/instance/attributes/agent-worker-number*)
    d="{control}"; d="${d%/control}"; printf '%s' "${d##*-w-}";;
  *) exec /usr/bin/curl "$@";;
esac
"""


@pytest.fixture
def gcp_tpu_world(fake_gcp: FakeGCP) -> Iterator[World[FakeGCP]]:
    """As ``gcp_world``, each TPU host answering the metadata server's worker number."""
    yield from emulate(fake_gcp, extra_stubs={"curl": METADATA_CURL})
