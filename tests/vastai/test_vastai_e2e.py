"""End to end: ComputePool(provider=VastAI(...)) on the fake VastAI API, each rented
container an emulated instance reached only through its host's port mapping."""

from __future__ import annotations

import pytest
from fakes.vastai import FakeVastAI
from lifecycle_support import lifecycle_problems
from providers_support import World, wait_until

import skyward as sky
from skyward import ComputePool, compute, gather
from skyward.errors import ProvisioningError
from skyward.events import InstanceInterrupted, Notice
from skyward_vastai import VastAI

pytestmark = pytest.mark.cloud


@compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def test_a_pool_runs_through_the_port_mapping_on_the_cheapest_reliable_offers_and_destroys_them(
    vast_world: World[FakeVastAI], vast_config: VastAI
) -> None:
    fake = vast_world.fake
    seen: list[object] = []
    with ComputePool(provider=vast_config, nodes=2, display="quiet", on_event=seen.append) as pool:
        ids = [int(n.instance_id) for n in pool.nodes]
        rented = sorted(fake.instances[i].offer["id"] for i in ids)
        assert rented == [101, 102]  # the two cheapest verified, reliable single-GPU offers
        for node in pool.nodes:
            mapped = fake.instances[int(node.instance_id)].mapped
            assert node.endpoint == f"tcp://127.0.0.1:{mapped[vast_config.agent_port]}"
            assert all(host != container for container, host in mapped.items())
        assert (square(3) >> pool)[0] == 9
        assert sorted(n for _, n in square(2) @ pool) == [0, 1]
        assert [r for r, _ in gather(*(square(x) for x in range(6))) >> pool] == [x * x for x in range(6)]
    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    assert sorted(fake.destroyed) == sorted(ids) and fake.instances == {}
    assert fake.violations == []


def test_an_outbid_node_is_interrupted_its_work_moves_and_it_is_replaced(
    vast_world: World[FakeVastAI], vast_config: VastAI
) -> None:
    fake = vast_world.fake
    seen: list[object] = []
    with ComputePool(
        provider=vast_config, nodes=2, spot=sky.Spot.Always(retries=0), display="quiet", on_event=seen.append
    ) as pool:
        assert all(n.spot for n in pool.nodes)
        assert all(fake.instances[int(n.instance_id)].bid is not None for n in pool.nodes)
        outbid = pool.nodes[1].instance_id
        fake.outbid(outbid)
        wait_until(lambda: any(isinstance(e, InstanceInterrupted) for e in seen), timeout=30)
        results = gather(*(square(x) for x in range(4))) >> pool  # the work goes on meanwhile
        assert [r[0] for r in results] == [0, 1, 4, 9]
        wait_until(lambda: pool.nodes[1].instance_id != outbid, timeout=90)
        assert pool.nodes[1].instance_id != outbid
        assert sorted(n for _, n in square(2) @ pool) == [0, 1]  # the replacement serves, through its own mapping
    interrupted = [e for e in seen if isinstance(e, InstanceInterrupted)]
    assert [(e.node, e.instance_id) for e in interrupted] == [(1, outbid)]
    assert any(isinstance(e, Notice) and "replaced" in e.message for e in seen)
    assert fake.instances == {} and int(outbid) in fake.destroyed  # the stopped one was destroyed too
    assert fake.violations == []


def test_an_offer_rented_by_someone_else_is_skipped_and_a_failed_rent_destroys_the_others(
    vast_world: World[FakeVastAI], vast_config: VastAI
) -> None:
    fake = vast_world.fake
    fake.offers[101]["rented"] = True  # taken between our search and our rent... and gone from the search
    fake.fail("PUT", r"/api/v0/asks/\d+/", 400, {"success": False, "msg": "insufficient credit"}, after=2)
    with pytest.raises(ProvisioningError, match="insufficient credit"):
        with ComputePool(provider=vast_config, nodes=3, display="quiet"):
            pass
    assert fake.instances == {} and len(fake.destroyed) == 2


def test_a_rate_limited_and_slow_api_still_starts_the_pool(vast_world: World[FakeVastAI], vast_config: VastAI) -> None:
    fake = vast_world.fake
    fake.rate_limit("POST", r"/api/v0/bundles/", times=2)
    fake.rate_limit("GET", r"/api/v0/instances/", times=3)
    fake.boot_delay = 1.5  # containers that take a while to pull their image
    with ComputePool(provider=vast_config, nodes=1, display="quiet") as pool:
        assert (square(4) >> pool)[0] == 16
    assert fake.count("POST", r"/api/v0/bundles/", 429) == 2
    assert fake.instances == {}


def test_no_offer_left_for_spot_always_fails_after_its_retries_and_leaves_nothing(
    vast_world: World[FakeVastAI], vast_config: VastAI
) -> None:
    fake = vast_world.fake
    for ident in (101, 102):
        fake.offers[ident]["rented"] = True  # one fitting single RTX 4090 left for a pool of two
    with pytest.raises(ProvisioningError, match="no VastAI spot offer left"):
        with ComputePool(
            provider=vast_config, nodes=2, machine="1x RTX 4090", spot=sky.Spot.Always(retries=1, interval=0.01),
            display="quiet",
        ):  # fmt: skip
            pass
    assert fake.instances == {} and len(fake.destroyed) == 1  # the node that got the last offer
    assert len(fake.searches) >= 3  # the pool's search, then one more per try of the unlucky node


@compute
def one() -> int:
    return 1


@compute
def two() -> int:
    return 2


def test_the_seed_s_quick_example_runs_with_provider_vastai(vast_world: World[FakeVastAI], vast_config: VastAI) -> None:
    """The README's example with ``provider=sky.VastAI()`` (pointed at the fake), an
    ``accelerator=sky.accelerators.A100()`` node and each execution operator."""
    from dataclasses import asdict

    provider = sky.VastAI(**asdict(vast_config))
    with sky.ComputePool(provider=provider, accelerator=sky.accelerators.A100(), display="quiet") as pool:
        assert vast_world.fake.instances[int(pool.nodes[0].instance_id)].offer["gpu_name"] == "A100 PCIE"  # cheapest
        assert (square(7) >> pool)[0] == 49
        assert [r for r, _ in square(3) @ pool] == [9]
        assert ((one() & two()) >> pool) == (1, 2)
    assert vast_world.fake.instances == {}
