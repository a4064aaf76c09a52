"""TPU VMs on the fake Cloud TPU API with emulated hosts: a 4-host slice is one pool whose
nodes are the slice's hosts, ``@`` runs on every host, each host knows its index, and
``jax.distributed`` is wired from the pool (coordinator on host 0, one process a host)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import gcp_config
from fakes.gcp import FakeGCP
from providers_support import World, wait_until
from typer.testing import CliRunner

import skyward as sky
from skyward.cli.app import make_app
from skyward.errors import ConfigurationError
from skyward.events import InstanceInterrupted

pytestmark = [pytest.mark.cloud, pytest.mark.slow]


@sky.compute
def where_am_i() -> dict[str, Any]:
    from skyward.distributed.backends.jax_backend import initialize_arguments

    info = sky.instance_info()
    return {
        "node": info.node,
        "nodes": info.total_nodes,
        "jax": initialize_arguments(info, None, None, "jax"),
    }


def test_a_four_host_slice_is_one_pool_whose_hosts_run_at_and_know_their_index(
    gcp_tpu_world: World[FakeGCP], gcp_credentials: Path
) -> None:
    fake = gcp_tpu_world.fake
    config = gcp_config(fake, zone="us-central1-a")
    accelerator = sky.Accelerator.Google.TPUSlice("v5litepod-16")
    with sky.ComputePool(provider=config, accelerator=accelerator, nodes=4, display="quiet") as pool:
        results = where_am_i() @ pool
        assert sorted(r["node"] for r in results) == [0, 1, 2, 3]
        assert {r["nodes"] for r in results} == {4}
        with fake.lock:
            (node,) = [n for n in fake.nodes.values() if not n.deleted]
            assert node.type.name == "v5litepod-16" and node.hosts == [f"{node.node_id}-w-{i}" for i in range(4)]
            head_ip = node.endpoints[0]
        by_node = {r["node"]: r["jax"] for r in results}
        for index, arguments in by_node.items():
            assert arguments["num_processes"] == 4
            assert arguments["process_id"] == index
            assert arguments["coordinator_address"].split(":")[0] == head_ip
        assert len({a["coordinator_address"] for a in by_node.values()}) == 1
        assert [n.instance_id.rsplit("-w-", 1)[1] for n in sorted(pool.nodes, key=lambda n: n.node)] == list("0123")
        listed = CliRunner().invoke(make_app(configs={"gcp": config}), ["ls", "--json", "-p", "gcp"])
        assert listed.exit_code == 0, listed.output
        (tpu,) = [r for r in json.loads(listed.stdout)["resources"] if r["id"].endswith(f"/tpu/{node.node_id}")]
        assert tpu["pool_id"] == pool.spec.pool_id and tpu["hourly_price"] > 0 and tpu["state"] == "ready"
    assert {k: v for k, v in fake.live().items() if v} == {}
    assert not fake.violations


def test_a_pool_whose_size_is_not_the_slice_s_hosts_is_refused_before_anything_is_made(
    fake_gcp: FakeGCP, gcp_credentials: Path
) -> None:
    accelerator = sky.Accelerator.Google.TPUSlice("v5litepod-16")
    with pytest.raises(ConfigurationError, match=r"nodes=4"):
        with sky.ComputePool(provider=gcp_config(fake_gcp, zone="us-central1-a"), accelerator=accelerator, nodes=2,
                             display="quiet"):  # fmt: skip
            pass
    assert {k: v for k, v in fake_gcp.live().items() if v} == {}


def test_a_spot_tpu_is_created_on_the_spot_market_and_its_preemption_interrupts_its_host(
    gcp_tpu_world: World[FakeGCP], gcp_credentials: Path
) -> None:
    fake = gcp_tpu_world.fake
    seen: list[object] = []
    accelerator = sky.Accelerator.Google.TPUSlice("v5litepod-4")
    with sky.ComputePool(provider=gcp_config(fake, zone="us-central1-a"), accelerator=accelerator, nodes=1,
                         spot="always", display="quiet", on_event=seen.append) as pool:  # fmt: skip
        assert [r["node"] for r in where_am_i() @ pool] == [0]
        (node,) = [n for n in fake.nodes.values() if not n.deleted]
        assert node.spot and pool.nodes[0].spot
        fake.preempt(node.node_id)
        wait_until(lambda: any(isinstance(e, InstanceInterrupted) for e in seen), timeout=30)
    (interrupted,) = [e for e in seen if isinstance(e, InstanceInterrupted)]
    assert interrupted.instance_id.endswith(f"{node.node_id}-w-0") and "PREEMPTED" in interrupted.reason
    assert {k: v for k, v in fake.live().items() if v} == {}
