"""The RunPod tests' fixtures: marketplace_support's, on the fake RunPod API."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`, `harness`, `*_support`

from marketplace_support import RunPodMarket, api_key, config, fake, for_market, market, world  # noqa: F401 (fixtures)

market_type, pytest_runtest_setup = for_market(RunPodMarket)
