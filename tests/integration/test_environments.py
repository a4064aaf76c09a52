"""Image(pip=...) builds a uv environment once, cached by the image's content hash."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import skyward as sky


@sky.compute
def probe() -> tuple[str, str]:
    import sys

    import six  # only in the pool's environment

    return sys.prefix, six.__version__


@pytest.mark.slow
def test_pip_environment_is_built_once_and_reused() -> None:
    image = sky.Image(pip=["six==1.16.0"])
    started = time.monotonic()
    with sky.ComputePool(image=image, display="quiet") as pool:
        prefix, version = probe() >> pool
    first = time.monotonic() - started
    assert version == "1.16.0"
    env_dir = Path(prefix)
    assert env_dir.parent == Path(os.environ["SKYWARD_HOME"]) / "envs"
    assert env_dir.name.startswith(image.content_hash())
    marker = env_dir / ".skyward-complete"
    built_at = marker.stat().st_mtime

    started = time.monotonic()
    with sky.ComputePool(image=image, nodes=2, display="quiet") as pool:
        prefixes = {p for p, _ in probe() @ pool}
    second = time.monotonic() - started
    assert prefixes == {prefix}
    assert marker.stat().st_mtime == built_at  # nothing was rebuilt
    assert second < first
