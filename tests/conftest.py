"""Shared fixtures. Every pool a test opens is small, quiet and short-lived."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from skip_policy import required_import_skipped, required_imports

pytest_plugins = ["volume_support"]  # moto's S3 server, a bucket and a mount path, for volume tests

# Properties are checked by what they find, not by how fast a shared 2-core machine draws
# examples: a per-example deadline or the "generation is slow" health check fails a correct
# test under load (seen with -n 2 beside other work), and says nothing about the code.
settings.register_profile("skyward", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("skyward")

_REQUIRED = required_imports((Path(__file__).resolve().parents[1] / "requirements-dev.txt").read_text())
# uv's cache as this session found it: a test that moves HOME (to keep the user's key files
# out of reach) still builds the checkout's wheels (skyward.wheels) from it, offline.
_UV_CACHE = os.environ.get("UV_CACHE_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "uv"
)


def _fail_required_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    """A skip for want of a package the test requirements pin is a broken install: fail."""
    if not report.skipped or os.environ.get("SKYWARD_TEST_ALLOW_MISSING") == "1":
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    module = required_import_skipped(reason, _REQUIRED)
    if module is not None:
        report.outcome = "failed"
        report.longrepr = (
            f"{reason}: {module} is pinned in requirements-dev.txt, so missing it is a broken install, "
            "not a reason to skip (install the test requirements, or set SKYWARD_TEST_ALLOW_MISSING=1 locally)"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_required_skip(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _fail_required_skip(outcome.get_result())  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _isolated_skyward_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Environments built by tests go to a per-session temp dir, never ~/.skyward."""
    home = os.environ.get("SKYWARD_TEST_HOME")
    if home is None:
        home = str(tmp_path_factory.getbasetemp() / "skyward-home")
    monkeypatch.setenv("SKYWARD_HOME", home)
    monkeypatch.setenv("UV_CACHE_DIR", _UV_CACHE)
    yield
