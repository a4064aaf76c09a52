"""Verda gives no notice before it takes a spot instance back: the pool notices by
describing its spot nodes, moves their work, and under Spot.Always replaces them."""

from __future__ import annotations

import pytest
from providers_support import wait_until
from verda_support import InstanceWorld, nothing_left

import skyward as sky
from skyward import ComputePool, compute, gather
from skyward.events import InstanceInterrupted, Notice
from skyward_verda import Verda

pytestmark = pytest.mark.cloud


@compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def _reclaim(world: InstanceWorld, instance_id: str) -> None:
    """What Verda does to a spot instance it needs back: gone, with its disk."""
    with world.fake.lock:
        instance = world.fake.instances[instance_id]
        instance.status = "deleted"
        world.fake.volumes[instance.os_volume_id] = "deleted"
    world.harness.stop(instance_id, reason="reclaimed by the provider")


def test_a_reclaimed_spot_instance_is_interrupted_its_work_moves_and_it_is_replaced(
    instances: InstanceWorld, verda_config: Verda
) -> None:
    seen: list[object] = []
    with ComputePool(
        provider=verda_config, nodes=2, spot=sky.Spot.Always(retries=0), display="quiet", on_event=seen.append
    ) as pool:
        assert all(n.spot for n in pool.nodes)
        reclaimed = pool.nodes[1].instance_id
        _reclaim(instances, reclaimed)
        wait_until(lambda: any(isinstance(e, InstanceInterrupted) for e in seen), timeout=30)
        results = gather(*(square(x) for x in range(4))) >> pool  # the work goes on during the replacement
        assert [r[0] for r in results] == [0, 1, 4, 9]

        def at_one() -> str | None:  # node 1 (none while it is being replaced)
            return next((n.instance_id for n in pool.nodes if n.node == 1), None)

        wait_until(lambda: at_one() not in (reclaimed, None), timeout=90, interval=0.1)
        replacement = at_one()
        assert replacement is not None and instances.harness.is_running(replacement)
        assert sorted(r[1] for r in square(2) @ pool) == [0, 1]  # both nodes serve again
    interrupted = [e for e in seen if isinstance(e, InstanceInterrupted)]
    assert [(e.node, e.instance_id) for e in interrupted] == [(1, reclaimed)]
    assert "without notice" in interrupted[0].reason
    assert any(isinstance(e, Notice) and "replaced" in e.message for e in seen)
    assert nothing_left(instances.fake) == {}
