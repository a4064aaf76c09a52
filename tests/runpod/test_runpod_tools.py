"""The ``skyward`` command's RunPod part (ls, down, offers, doctor) and the pool-start
sweep, against the fake RunPod API."""

from __future__ import annotations

import json
import time

import pytest
from fakes.runpod import FakeRunPod
from typer.testing import CliRunner

from skyward import ComputePool, compute
from skyward.cli.app import make_app
from skyward.events import Notice
from skyward_runpod import RunPod

pytestmark = pytest.mark.cloud
runner = CliRunner()


def _leftovers(fake: FakeRunPod) -> tuple[str, str, str, str]:
    now = int(time.time())
    exited = fake.add_pod(f"skyward-sky-0000000a-{now + 3600}-0", status="EXITED")  # stopped: bills its disk
    expired = fake.add_pod(f"skyward-sky-0000000b-{now - 60}-0")
    alive = fake.add_pod(f"skyward-sky-0000000c-{now + 3600}-1")
    foreign = fake.add_pod("my-comfyui", status="EXITED")
    return exited, expired, alive, foreign


def test_ls_lists_skyward_pods_and_down_expired_terminates_the_exited_and_expired_only(
    fake_runpod: FakeRunPod, runpod_config: RunPod
) -> None:
    exited, expired, alive, foreign = _leftovers(fake_runpod)
    app = make_app(configs={"runpod": runpod_config})
    listed = json.loads(runner.invoke(app, ["ls", "--json", "-p", "runpod"]).stdout)["resources"]
    assert {(r["id"], r["idle"]) for r in listed} == {(exited, True), (expired, False), (alive, False)}
    result = runner.invoke(app, ["down", "--expired", "-p", "runpod"])
    assert result.exit_code == 0, result.output
    assert set(fake_runpod.pods) == {alive, foreign}
    assert fake_runpod.violations == []


def test_offers_and_doctor_speak_for_runpod(fake_runpod: FakeRunPod, runpod_config: RunPod) -> None:
    app = make_app(configs={"runpod": runpod_config})
    offers = json.loads(runner.invoke(app, ["offers", "H100", "--json"]).stdout)["offers"]
    assert [o["instance"] for o in offers][:2] == ["1x H100 PCIe", "1x H100 SXM"]  # cheapest first
    report = json.loads(runner.invoke(app, ["doctor", "--json", "-p", "runpod"]).stdout)
    assert [(p["provider"], p["credentials_valid"]) for p in report["providers"]] == [("runpod", True)]


def test_a_pool_start_terminates_what_earlier_pools_left_exited_or_expired(
    runpod_world: object, fake_runpod: FakeRunPod, runpod_config: RunPod
) -> None:
    _, _, alive, foreign = _leftovers(fake_runpod)
    seen: list[object] = []
    with ComputePool(provider=runpod_config, display="quiet", on_event=seen.append) as pool:
        assert (compute(abs)(-3) >> pool) == 3
    assert set(fake_runpod.pods) == {alive, foreign}
    assert sum(isinstance(e, Notice) and "left by an earlier pool" in e.message for e in seen) == 2
