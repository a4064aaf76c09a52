"""End to end: ComputePool(provider=RunPod(...)) on the fake RunPod API, each pod an
emulated instance reached only through its public port mapping."""

from __future__ import annotations

import pytest
from fakes.runpod import FakeRunPod
from providers_support import World

import skyward as sky
from skyward import ComputePool, compute
from skyward.errors import ProvisioningError
from skyward.events import Notice
from skyward_runpod import RunPod

pytestmark = pytest.mark.cloud


@compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def test_spot_if_available_falls_back_to_on_demand_when_spot_pods_run_out(
    world: World[FakeRunPod], config: RunPod
) -> None:
    fake = world.fake
    fake.no_capacity(spot=True, left=1)
    seen: list[object] = []
    with ComputePool(provider=config, nodes=2, spot="if-available", display="quiet",
                     on_event=seen.append) as pool:  # fmt: skip
        assert sorted(n.spot for n in pool.nodes) == [False, True]
        assert sorted(fake.pods[n.instance_id].spot for n in pool.nodes) == [False, True]
        assert (square(5) >> pool)[0] == 25
    assert any(isinstance(e, Notice) and "on-demand" in e.message for e in seen)
    assert fake.pods == {}


def test_no_capacity_under_spot_always_fails_with_what_to_try_and_leaves_nothing(
    world: World[FakeRunPod], config: RunPod
) -> None:
    fake = world.fake
    fake.no_capacity(spot=True, left=1)
    with pytest.raises(ProvisioningError, match=r"no spot capacity .* RunPod\(cloud='community'\)"):
        with ComputePool(provider=config, nodes=2, spot=sky.Spot.Always(retries=1, interval=0.01),
                         display="quiet"):  # fmt: skip
            pass
    assert fake.pods == {} and len(fake.terminated) == 1


def test_rate_limits_and_slow_pods_are_waited_out(world: World[FakeRunPod], config: RunPod) -> None:
    fake = world.fake
    fake.rate_limit(times=3, after=1)
    fake.boot_delay = 1.5
    with ComputePool(provider=config, nodes=1, display="quiet") as pool:
        assert (square(4) >> pool)[0] == 16
    assert fake.count("POST", "/graphql", 429) == 3
    assert fake.pods == {}
