"""Fixtures for the RunPod provider tests (written once in marketplace_support, for both
marketplaces). Tests marked ``cloud`` talk to the fake RunPod API and to emulated pods
behind a port mapping; they run only inside a network namespace where only loopback is up::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/runpod -m cloud'

The tests both marketplaces pass the same way are in tests/marketplaces.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `*_support`

from marketplace_support import Marketplace, RunPodMarket, api_key, config, fake, isolated, market, world  # noqa: F401 (fixtures)

pytest_runtest_setup = isolated("runpod")


@pytest.fixture
def market_type() -> type[Marketplace[Any]]:
    return RunPodMarket
