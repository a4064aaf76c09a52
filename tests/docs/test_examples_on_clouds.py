"""Every example, switched to each cloud with ``SKYWARD_PROVIDER``, builds its cloud pools:
run as far as its first pool's start (see run_snippet.py), with placeholder credentials
and nothing sent anywhere. CI runs the examples on Local for real (``tasks.py examples``);
this checks the other side of the switch, which CI cannot run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_snippets import PLACEHOLDER_CREDENTIALS, RUNNER

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("[0-9][0-9]_*.py"))
CLOUDS = ("aws", "digitalocean", "gcp", "verda", "vastai", "runpod")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_builds_its_pools_on_each_cloud(example: Path) -> None:
    env = dict(os.environ, **PLACEHOLDER_CREDENTIALS, PYTHONPATH=str(example.parent))
    result = subprocess.run(
        [sys.executable, str(RUNNER), "cloud", str(example), *CLOUDS],  # every cloud in one process
        cwd=example.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{example.name}:\n{result.stdout}\n{result.stderr}"
    assert [c for c in CLOUDS if f"ran with SKYWARD_PROVIDER={c}\n" not in result.stderr] == []


def test_there_are_at_least_22_examples() -> None:
    assert len(EXAMPLES) >= 22
