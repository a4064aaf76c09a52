"""End to end on the fake Google Cloud with emulated VMs: a GPU VM pool runs ``>>``; a
preempted spot VM is noticed, its task runs again and the node is replaced; a
stocked-out zone moves the pool to the next zone and a region out of GPU quota moves it to
the next candidate; a SIGKILLed client's VM and firewall rules are found by ``skyward ls``
and removed by ``skyward down``. Nothing is left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import gcp_config
from fakes.gcp import FakeGCP
from providers_support import World, client_script, vanish_client, wait_until
from typer.testing import CliRunner

import skyward as sky
from skyward.cli.app import make_app
from skyward.events import CandidateFailed, InstanceInterrupted, Notice

pytestmark = [pytest.mark.cloud, pytest.mark.slow]


@sky.compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def _left(fake: FakeGCP) -> dict[str, list[str]]:
    return {k: v for k, v in fake.live().items() if v}


def test_a_gpu_vm_pool_runs_tasks_and_leaves_nothing(gcp_world: World[FakeGCP], gcp_credentials: Path) -> None:
    fake = gcp_world.fake
    with sky.ComputePool(provider=gcp_config(fake, zone="us-central1-a"), accelerator="L4", nodes=2,
                         display="quiet") as pool:  # fmt: skip
        results = sky.gather(*(square(i) for i in range(4))) >> pool
        assert [r[0] for r in results] == [0, 1, 4, 9]
        assert sorted(r[1] for r in square(1) @ pool) == [0, 1]
        with fake.lock:
            vms = [i for i in fake.instances.values() if not i.deleted]
        assert [i.machine_type for i in vms] == ["g2-standard-4", "g2-standard-4"]
        assert all(i.labels["skyward-pool"] == pool.spec.pool_id for i in vms)
        assert len(fake.firewalls) == 2
    assert _left(fake) == {}
    assert not fake.violations


def test_a_preempted_spot_vm_s_task_runs_again_and_the_node_is_replaced(
    gcp_world: World[FakeGCP], gcp_credentials: Path
) -> None:
    fake = gcp_world.fake
    seen: list[object] = []
    # STOP: the preempted VM stays, TERMINATED, so the pool must read preemption from its status
    config = gcp_config(fake, zone="us-central1-b", spot_termination="STOP")
    with sky.ComputePool(provider=config, nodes=2, spot=sky.Spot.Always(retries=0), display="quiet",
                         on_event=seen.append) as pool:  # fmt: skip
        assert all(n.spot for n in pool.nodes)
        with fake.lock:
            assert all(i.spot for i in fake.instances.values())
        preempted = pool.nodes[1].instance_id
        fake.preempt(preempted.rsplit("/", 1)[-1])
        wait_until(lambda: any(isinstance(e, InstanceInterrupted) for e in seen), timeout=30)
        results = sky.gather(*(square(x) for x in range(4))) >> pool  # the work goes on
        assert [r[0] for r in results] == [0, 1, 4, 9]

        def at_one() -> str | None:
            return next((n.instance_id for n in pool.nodes if n.node == 1), None)

        wait_until(lambda: at_one() not in (preempted, None), timeout=90)
        assert at_one() not in (preempted, None)
        assert sorted(r[1] for r in square(2) @ pool) == [0, 1]  # both nodes serve again
    interrupted = [e for e in seen if isinstance(e, InstanceInterrupted)]
    assert [(e.node, e.instance_id) for e in interrupted] == [(1, preempted)]
    assert any(isinstance(e, Notice) and "replaced" in e.message for e in seen)
    assert _left(fake) == {}
    assert not fake.violations


def test_a_stocked_out_zone_moves_the_pool_on_and_a_quota_moves_it_to_the_next_candidate(
    gcp_world: World[FakeGCP], gcp_credentials: Path
) -> None:
    fake = gcp_world.fake
    fake.stock_out("us-central1-a", "a2-highgpu-1g")
    seen: list[object] = []
    with sky.ComputePool(provider=gcp_config(fake, region="us-central1"), accelerator="A100", nodes=1,
                         display="quiet", on_event=seen.append) as pool:  # fmt: skip
        assert pool.nodes[0].instance_id.startswith("us-central1-b/")
        assert (square(3) >> pool)[0] == 9
    assert any(isinstance(e, Notice) and "us-central1-a" in e.message and "us-central1-b" in e.message for e in seen)
    assert _left(fake) == {}

    fake.set_quota("us-central1", "NVIDIA_T4_GPUS", 0)
    candidates = [gcp_config(fake, region="us-central1"), gcp_config(fake, region="us-east1")]
    with sky.ComputePool(provider=candidates, accelerator="T4", nodes=1, display="quiet",
                         on_event=seen.append) as pool:  # fmt: skip
        assert pool.nodes[0].instance_id.startswith("us-east1-")
        assert (square(2) >> pool)[0] == 4
    (failed,) = [e for e in seen if isinstance(e, CandidateFailed)]
    assert (failed.candidate, failed.region, failed.reason) == (0, "us-central1", "quota")
    assert "NVIDIA_T4_GPUS" in failed.message
    assert _left(fake) == {}
    assert not fake.violations


CLIENT = client_script(
    "skyward_gcp", "GCP", "zone='us-central1-c', compute_api_url=sys.argv[1], tpu_api_url=sys.argv[1], ", grace=60.0
)


def test_a_sigkilled_client_s_vm_and_firewall_rules_are_listed_and_removed_by_skyward_down(
    gcp_world: World[FakeGCP], gcp_credentials: Path
) -> None:
    fake = gcp_world.fake
    instance_id = vanish_client(CLIENT, fake.url)  # nobody will delete its VM
    vm = fake.instance(instance_id.rsplit("/", 1)[-1])
    pool_id = vm.labels["skyward-pool"]
    app, runner = make_app(configs={"gcp": gcp_config(fake, zone="us-central1-c")}), CliRunner()
    listed = runner.invoke(app, ["ls", "--json", "-p", "gcp"])
    assert listed.exit_code == 0, listed.output
    mine = [r for r in json.loads(listed.stdout)["resources"] if r["pool_id"] == pool_id]
    assert sorted(r["kind"] for r in mine) == ["firewall", "firewall", "instance"]
    assert next(r for r in mine if r["kind"] == "instance")["hourly_price"] > 0
    down = runner.invoke(app, ["down", pool_id, "-p", "gcp", "--json"])
    assert down.exit_code == 0, down.output
    assert all(r["removed"] for r in json.loads(down.stdout)["removals"])
    wait_until(lambda: _left(fake) == {}, timeout=10)
    assert _left(fake) == {}
    assert not fake.violations
