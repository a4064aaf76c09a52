"""The ``skyward`` command's marketplace parts (ls, down, offers, doctor) and the
pool-start sweep, against each fake marketplace API (RunPod, VastAI)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from marketplace_support import Marketplace, leftovers
from typer.testing import CliRunner

from skyward import ComputePool, compute
from skyward.cli.app import make_app
from skyward.events import Notice

pytestmark = pytest.mark.cloud
runner = CliRunner()


def test_ls_lists_skyward_containers_and_down_expired_deletes_the_stopped_and_expired_only(
    market: Marketplace[Any],
) -> None:
    stopped, expired, alive, foreign = leftovers(market)
    app = make_app(configs={market.name: market.config})
    listed = json.loads(runner.invoke(app, ["ls", "--json", "-p", market.name]).stdout)["resources"]
    assert {(r["id"], r["idle"]) for r in listed} == {(str(stopped), True), (str(expired), False), (str(alive), False)}
    result = runner.invoke(app, ["down", "--expired", "-p", market.name])
    assert result.exit_code == 0, result.output
    assert market.live() == {alive, foreign}
    assert market.fake.violations == []


def test_offers_and_doctor_speak_for_the_marketplace(market: Marketplace[Any]) -> None:
    app = make_app(configs={market.name: market.config})
    offers = json.loads(runner.invoke(app, ["offers", market.offer_query, "--json"]).stdout)["offers"]
    assert [o["instance"] for o in offers][:2] == market.cheapest_offers  # cheapest first
    report = json.loads(runner.invoke(app, ["doctor", "--json", "-p", market.name]).stdout)
    assert [(p["provider"], p["credentials_valid"]) for p in report["providers"]] == [(market.name, True)]


def test_a_pool_start_deletes_what_earlier_pools_left_stopped_or_expired(
    world: object, market: Marketplace[Any]
) -> None:
    _, _, alive, foreign = leftovers(market)
    seen: list[object] = []
    with ComputePool(provider=market.config, display="quiet", on_event=seen.append) as pool:
        assert (compute(abs)(-3) >> pool) == 3
    assert market.live() == {alive, foreign}
    assert sum(isinstance(e, Notice) and "left by an earlier pool" in e.message for e in seen) == 2
