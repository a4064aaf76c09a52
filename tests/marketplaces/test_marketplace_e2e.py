"""End to end on each fake marketplace API (RunPod, VastAI): ComputePool(provider=...)
with every container an emulated instance reached only through its public port mapping."""

from __future__ import annotations

import ipaddress
from dataclasses import asdict
from importlib import metadata
from typing import Any

import pytest
from lifecycle_support import lifecycle_problems
from marketplace_support import Marketplace
from providers_support import wait_until

import skyward as sky
from skyward import ComputePool, compute, gather
from skyward.errors import UnreadableResultError
from skyward.events import InstanceInterrupted, Notice
from skyward.providers.cloud.marketplace_start import START_COMMAND_LIMIT

pytestmark = pytest.mark.cloud


@compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


@compute
def one() -> int:
    return 1


@compute
def two() -> int:
    return 2


@compute
def an_address() -> ipaddress.IPv4Address:
    """A result of a type safe mode's allow-list does not name (stdlib, but not plain data)."""
    return ipaddress.IPv4Address("192.0.2.1")


def test_a_pool_runs_through_the_port_mapping_and_deletes_its_containers(
    world: object, market: Marketplace[Any]
) -> None:
    seen: list[object] = []
    with ComputePool(provider=market.config, nodes=2, display="quiet", on_event=seen.append,
                     **market.first_pool) as pool:  # fmt: skip
        ids = [market.key(n.instance_id) for n in pool.nodes]
        market.check_first_pool(pool)
        for node in pool.nodes:
            mapped = market.mapped(node.instance_id)
            assert node.endpoint == f"tcp://127.0.0.1:{mapped[market.config.agent_port]}"
            assert all(public != private for private, public in mapped.items())
        assert (square(3) >> pool)[0] == 9
        assert sorted(n for _, n in square(2) @ pool) == [0, 1]
        assert [r for r, _ in gather(*(square(x) for x in range(6))) >> pool] == [x * x for x in range(6)]
    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    assert sorted(market.removed()) == sorted(ids) and market.live() == set()
    assert market.fake.violations == []


def _installed(count: int) -> list[str]:
    """Distributions the emulated image's package mirror holds (the test environment's)."""
    names = {d.metadata["Name"].lower() for d in metadata.distributions() if d.metadata["Name"]}
    return sorted(n for n in names if not n.startswith("skyward"))[:count]


def test_a_large_image_from_a_checkout_starts_with_a_start_command_well_under_vastais_limit(
    world: object, market: Marketplace[Any]
) -> None:
    image = sky.Image(
        pip=_installed(20),
        apt=[f"libsomething{i}-dev" for i in range(10)],
        env={f"SETTING_{i}": f"a value that is not short at all {i}" for i in range(10)},
    )
    with ComputePool(provider=market.config, nodes=1, image=image, display="quiet") as pool:
        assert (square(5) >> pool)[0] == 25
        (node,) = pool.nodes
        assert market.start_command_length(node.instance_id) <= START_COMMAND_LIMIT * 3 // 4
    assert market.fake.violations == []


def test_a_spot_container_taken_away_is_interrupted_its_work_moves_and_it_is_replaced(
    world: object, market: Marketplace[Any]
) -> None:
    seen: list[object] = []
    node = market.taken_node
    with ComputePool(
        provider=market.config, nodes=2, spot=sky.Spot.Always(retries=0), display="quiet", on_event=seen.append
    ) as pool:
        assert all(n.spot and market.spot(n.instance_id) for n in pool.nodes)
        taken = pool.nodes[node].instance_id
        market.take_away(taken)
        wait_until(lambda: any(isinstance(e, InstanceInterrupted) for e in seen), timeout=30)
        results = gather(*(square(x) for x in range(4))) >> pool  # the work goes on meanwhile
        assert [r[0] for r in results] == [0, 1, 4, 9]

        def at_node() -> str | None:  # the node at that index (none while it is being replaced)
            return next((n.instance_id for n in pool.nodes if n.node == node), None)

        wait_until(lambda: at_node() not in (taken, None), timeout=90)
        assert sorted(n for _, n in square(2) @ pool) == [0, 1]  # the replacement serves, through its own mapping
    interrupted = [e for e in seen if isinstance(e, InstanceInterrupted)]
    assert [(e.node, e.instance_id) for e in interrupted] == [(node, taken)]
    assert any(isinstance(e, Notice) and "replaced" in e.message for e in seen)
    assert market.live() == set() and market.key(taken) in market.removed()  # the stopped one was deleted too
    assert market.fake.violations == []


def test_the_seed_s_quick_example_runs_on_the_marketplace(world: object, market: Marketplace[Any]) -> None:
    """The README's example with ``provider=sky.RunPod()`` / ``sky.VastAI()`` (pointed at
    the fake), an ``accelerator=sky.accelerators.A100()`` node and each execution operator."""
    provider = market.provider(**asdict(market.config))
    with sky.ComputePool(provider=provider, accelerator=sky.accelerators.A100(), display="quiet") as pool:
        assert market.gpu(pool.nodes[0].instance_id) == market.a100
        assert (square(7) >> pool)[0] == 49
        assert [r for r, _ in square(3) @ pool] == [9]
        assert ((one() & two()) >> pool) == (1, 2)
    assert market.live() == set()


@pytest.mark.parametrize("spelling", ["RTX4090", "RTX 4090", "4090"])
def test_a_consumer_gpu_is_asked_for_by_name_like_a_data_centre_one(
    world: object, market: Marketplace[Any], spelling: str
) -> None:
    """The card marketplaces rent most, by its catalog name or its shorthand: the node gets
    that card, the single-GPU offer (not the two-GPU host), at its price."""
    provider = market.provider(**asdict(market.config))
    with sky.ComputePool(provider=provider, accelerator=spelling, display="quiet") as pool:
        node = pool.nodes[0]
        assert market.gpu(node.instance_id) == market.rtx4090
        assert pool.nodes[0].price_on_demand == pytest.approx(market.rtx4090_price)
        assert (square(5) >> pool)[0] == 25
    assert market.live() == set()
    assert market.fake.violations == []


def test_a_pool_reads_results_with_the_allow_list_unless_told_otherwise(
    world: object, market: Marketplace[Any]
) -> None:
    # a marketplace host is a third party: what its node sends back must not name code
    # to run here, so a pool on it decodes safely without being asked to
    with ComputePool(provider=market.config, display="quiet") as pool:
        assert (one() >> pool) == 1
        with pytest.raises(UnreadableResultError, match=r"ipaddress\.IPv4Address"):
            an_address() >> pool
        assert (two() >> pool) == 2  # a refused result fails its task, not the pool
    assert market.live() == set()
