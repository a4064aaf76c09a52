"""Shared fixtures. Every pool a test opens is small, quiet and short-lived."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _isolated_skyward_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Environments built by tests go to a per-session temp dir, never ~/.skyward."""
    home = os.environ.get("SKYWARD_TEST_HOME")
    if home is None:
        home = str(tmp_path_factory.getbasetemp() / "skyward-home")
    monkeypatch.setenv("SKYWARD_HOME", home)
    yield
