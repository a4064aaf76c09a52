"""The ``skyward`` command's VastAI part (ls, down, offers, doctor) and the pool-start
sweep, against the fake VastAI API."""

from __future__ import annotations

import json
import time

import pytest
from fakes.vastai import FakeVastAI
from typer.testing import CliRunner

from skyward import ComputePool, compute
from skyward.cli.app import make_app
from skyward.events import Notice
from skyward_vastai import VastAI

pytestmark = pytest.mark.cloud
runner = CliRunner()


def _leftovers(fake: FakeVastAI) -> tuple[int, int, int, int]:
    now = int(time.time())
    stopped = fake.add_instance(f"skyward-sky-0000000a-{now + 3600}-0", status="exited")  # stopped: bills its disk
    expired = fake.add_instance(f"skyward-sky-0000000b-{now - 60}-0")
    alive = fake.add_instance(f"skyward-sky-0000000c-{now + 3600}-1")
    foreign = fake.add_instance("my-notebook", status="exited")
    return stopped, expired, alive, foreign


def test_ls_lists_skyward_instances_and_down_expired_destroys_the_stopped_and_expired_only(
    fake_vast: FakeVastAI, vast_config: VastAI
) -> None:
    stopped, expired, alive, foreign = _leftovers(fake_vast)
    app = make_app(configs={"vastai": vast_config})
    listed = json.loads(runner.invoke(app, ["ls", "--json", "-p", "vastai"]).stdout)["resources"]
    assert {(r["id"], r["idle"]) for r in listed} == {(str(stopped), True), (str(expired), False), (str(alive), False)}
    result = runner.invoke(app, ["down", "--expired", "-p", "vastai"])
    assert result.exit_code == 0, result.output
    assert set(fake_vast.instances) == {alive, foreign}
    assert fake_vast.violations == []


def test_offers_and_doctor_speak_for_vastai(fake_vast: FakeVastAI, vast_config: VastAI) -> None:
    app = make_app(configs={"vastai": vast_config})
    offers = json.loads(runner.invoke(app, ["offers", "A100", "--json"]).stdout)["offers"]
    assert [o["instance"] for o in offers][:2] == ["1x A100 PCIE", "1x A100 SXM4"]  # cheapest first
    doctor = runner.invoke(app, ["doctor", "--json", "-p", "vastai"])
    report = json.loads(doctor.stdout)
    assert [(p["provider"], p["credentials_valid"]) for p in report["providers"]] == [("vastai", True)]


def test_a_pool_start_destroys_what_earlier_pools_left_stopped_or_expired(
    vast_world: object, fake_vast: FakeVastAI, vast_config: VastAI
) -> None:
    _, _, alive, foreign = _leftovers(fake_vast)
    seen: list[object] = []
    with ComputePool(provider=vast_config, display="quiet", on_event=seen.append) as pool:
        assert (compute(abs)(-3) >> pool) == 3
    assert set(fake_vast.instances) == {alive, foreign}
    assert sum(isinstance(e, Notice) and "left by an earlier pool" in e.message for e in seen) == 2
