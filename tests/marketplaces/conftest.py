"""Fixtures for the tests both container marketplaces pass: each test here runs once on
the fake RunPod API and once on the fake VastAI API (``market_type`` is parametrized).
Tests marked ``cloud`` run only inside a network namespace where only loopback is up::

    unshare --net -- sh -c 'ip link set lo up && \\
        SKYWARD_TEST_NETNS=1 .venv/bin/python -m pytest tests/marketplaces -m cloud'
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `*_support`

from marketplace_support import Marketplace, RunPodMarket, VastMarket, api_key, config, fake, isolated, market, world  # noqa: F401 (fixtures)

pytest_runtest_setup = isolated("marketplaces")


@pytest.fixture(params=[RunPodMarket, VastMarket], ids=lambda kind: kind.name)
def market_type(request: pytest.FixtureRequest) -> type[Marketplace[Any]]:
    kind: type[Marketplace[Any]] = request.param
    return kind
