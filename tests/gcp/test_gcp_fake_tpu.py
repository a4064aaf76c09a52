"""The fake Cloud TPU API v2, driven by google-cloud-tpu's REST client: slices of one or more
hosts, each running the node's startup-script, long-running operations, stock-outs and preemption."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes.gcp import FakeGCP
from gcp_fake_support import FAST_POLLING, GcpWorld, clients, emulate, nothing_left
from google.api_core import exceptions
from google.cloud import tpu_v2
from providers_support import serve, wait_until

pytestmark = pytest.mark.cloud


@pytest.fixture(scope="module")
def shared_gcp() -> Iterator[FakeGCP]:
    """One fake for the tests that leave nothing behind (refusals, the catalog): starting and
    stopping a fake costs about half a second (its server's shutdown poll)."""
    yield from serve(FakeGCP, "Google Cloud")


SCRIPT = "#!/bin/bash\necho tpu-host-up\nsleep 30\n"


@pytest.fixture
def world(fake_gcp: FakeGCP) -> Iterator[GcpWorld]:
    yield from emulate(fake_gcp)


def _node(kind: str, runtime: str, *, spot: bool = False, script: str = SCRIPT) -> tpu_v2.Node:
    return tpu_v2.Node(
        accelerator_type=kind,
        runtime_version=runtime,
        metadata={"startup-script": script},
        labels={"skyward-pool": "p1"},
        network_config=tpu_v2.NetworkConfig(enable_external_ips=True),
        scheduling_config=tpu_v2.SchedulingConfig(spot=spot),
    )


def _parent(fake: FakeGCP, zone: str) -> str:
    return f"projects/{fake.project}/locations/{zone}"


def test_a_multi_host_slice_runs_the_startup_script_on_every_host(fake_gcp: FakeGCP, world: GcpWorld) -> None:
    tpu = clients(fake_gcp).tpu
    operation = tpu.create_node(
        parent=_parent(fake_gcp, "us-central2-b"), node_id="slice-1", node=_node("v4-32", "tpu-ubuntu2204-base")
    )
    node = operation.result(polling=FAST_POLLING)
    assert node.state == tpu_v2.Node.State.READY and node.accelerator_type == "v4-32"
    hosts = [f"slice-1-w-{i}" for i in range(4)]  # v4-32: 16 chips, 4 a host
    addresses = [world.harness.address_for(h) for h in hosts]
    assert [e.ip_address for e in node.network_endpoints] == addresses
    assert [e.access_config.external_ip for e in node.network_endpoints] == addresses
    for host in hosts:
        wait_until(lambda host=host: "tpu-host-up" in world.harness.log(host), timeout=10)
        assert "tpu-host-up" in world.harness.log(host)
    listed = tpu.list_nodes(parent=_parent(fake_gcp, "us-central2-b"))
    assert [n.name.rsplit("/", 1)[-1] for n in listed] == ["slice-1"]
    tpu.delete_node(name=node.name).result(polling=FAST_POLLING)
    wait_until(lambda: not any(world.harness.is_running(h) for h in hosts), timeout=10)
    assert not any(world.harness.is_running(h) for h in hosts)
    assert nothing_left(fake_gcp) == {}
    with pytest.raises(exceptions.NotFound):
        tpu.get_node(name=node.name)


@pytest.mark.parametrize(
    ("zone", "kind", "runtime", "hosts"),
    [
        ("us-central2-b", "v4-8", "tpu-ubuntu2204-base", 1),
        ("us-east5-a", "v5p-8", "v2-alpha-tpuv5", 1),
        ("us-east5-a", "v5p-32", "v2-alpha-tpuv5", 4),
        ("us-central1-a", "v5litepod-4", "v2-alpha-tpuv5-lite", 1),
        ("us-central1-a", "v5litepod-16", "v2-alpha-tpuv5-lite", 4),
        ("europe-west4-a", "v6e-8", "v2-alpha-tpuv6e", 1),
    ],
)
def test_a_slice_has_one_endpoint_a_host(shared_gcp: FakeGCP, zone: str, kind: str, runtime: str, hosts: int) -> None:
    tpu, parent = clients(shared_gcp).tpu, _parent(shared_gcp, zone)
    node = tpu.create_node(parent=parent, node_id="n", node=_node(kind, runtime)).result(polling=FAST_POLLING)
    assert len(node.network_endpoints) == hosts
    assert shared_gcp.node("n").hosts == [f"n-w-{i}" for i in range(hosts)]
    tpu.delete_node(name=node.name).result(polling=FAST_POLLING)


def test_a_stock_out_fails_the_create_operation_with_resource_exhausted(fake_gcp: FakeGCP) -> None:
    fake_gcp.stock_out("us-east5-a", "v5p-8")
    tpu = clients(fake_gcp).tpu
    operation = tpu.create_node(
        parent=_parent(fake_gcp, "us-east5-a"), node_id="n1", node=_node("v5p-8", "v2-alpha-tpuv5")
    )
    with pytest.raises(exceptions.GoogleAPICallError, match="There is no more capacity in the zone") as failed:
        operation.result(polling=FAST_POLLING)
    assert failed.value.grpc_status_code is not None and failed.value.grpc_status_code.name == "RESOURCE_EXHAUSTED"
    assert nothing_left(fake_gcp) == {}


def test_a_preempted_spot_node_is_preempted_and_its_hosts_stop(fake_gcp: FakeGCP, world: GcpWorld) -> None:
    tpu = clients(fake_gcp).tpu
    parent = _parent(fake_gcp, "us-central1-a")
    spot = tpu.create_node(parent=parent, node_id="spot", node=_node("v5litepod-16", "v2-alpha-tpuv5-lite", spot=True))
    node = spot.result(polling=FAST_POLLING)
    assert node.scheduling_config.spot
    wait_until(lambda: world.harness.is_running("spot-w-3"), timeout=10)
    fake_gcp.preempt("spot")
    assert tpu.get_node(name=node.name).state == tpu_v2.Node.State.PREEMPTED
    wait_until(lambda: not any(world.harness.is_running(f"spot-w-{i}") for i in range(4)), timeout=10)
    assert not any(world.harness.is_running(f"spot-w-{i}") for i in range(4))
    on_demand = tpu.create_node(parent=parent, node_id="steady", node=_node("v5litepod-4", "v2-alpha-tpuv5-lite"))
    on_demand.result(polling=FAST_POLLING)
    with pytest.raises(ValueError, match="not spot"):
        fake_gcp.preempt("steady")


@pytest.mark.parametrize(
    ("node_id", "kind", "runtime", "match"),
    [
        ("Bad_Name", "v4-8", "tpu-ubuntu2204-base", "node_id"),
        ("n", "v5p-8", "v2-alpha-tpuv5", "not available in zone"),  # v5p is not in us-central2-b
        ("n", "v4-8", "v2-alpha-tpuv6e", "does not support"),
    ],
)
def test_a_node_google_refuses_is_refused_with_a_400(
    shared_gcp: FakeGCP, node_id: str, kind: str, runtime: str, match: str
) -> None:
    fake_gcp = shared_gcp
    tpu = clients(fake_gcp).tpu
    with pytest.raises(exceptions.BadRequest, match=match):
        tpu.create_node(parent=_parent(fake_gcp, "us-central2-b"), node_id=node_id, node=_node(kind, runtime))
    assert nothing_left(fake_gcp) == {} and len(fake_gcp.violations) == 1
    fake_gcp.violations.clear()


def test_accelerator_types_and_runtime_versions_are_listed_per_zone(shared_gcp: FakeGCP) -> None:
    fake_gcp = shared_gcp
    tpu = clients(fake_gcp).tpu
    kinds = {
        t.type_: t.accelerator_configs[0] for t in tpu.list_accelerator_types(parent=_parent(fake_gcp, "us-east5-a"))
    }
    assert set(kinds) == {"v5p-8", "v5p-32"}
    assert kinds["v5p-32"].type_ == tpu_v2.AcceleratorConfig.Type.V5P
    versions = [v.version for v in tpu.list_runtime_versions(parent=_parent(fake_gcp, "us-central2-b"))]
    assert "tpu-ubuntu2204-base" in versions


def test_a_node_deleted_while_creating_fails_its_create_operation(fake_gcp: FakeGCP) -> None:
    fake_gcp.boot_delay = 5.0
    tpu = clients(fake_gcp).tpu
    creating = tpu.create_node(
        parent=_parent(fake_gcp, "us-central2-b"), node_id="early", node=_node("v4-8", "tpu-ubuntu2204-base")
    )
    name = f"{_parent(fake_gcp, 'us-central2-b')}/nodes/early"
    assert tpu.get_node(name=name).state == tpu_v2.Node.State.CREATING
    tpu.delete_node(name=name).result(polling=FAST_POLLING)
    with pytest.raises(exceptions.GoogleAPICallError, match="deleted while it was being created"):
        creating.result(polling=FAST_POLLING)
    assert nothing_left(fake_gcp) == {}
