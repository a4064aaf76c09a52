"""End to end: ComputePool(provider=RunPod(...)) on the fake RunPod API, each pod an
emulated instance reached only through its public port mapping."""

from __future__ import annotations

import pytest
from fakes.runpod import FakeRunPod
from lifecycle_support import lifecycle_problems
from providers_support import World, wait_until

import skyward as sky
from skyward import ComputePool, compute, gather
from skyward.errors import ProvisioningError
from skyward.events import InstanceInterrupted, Notice
from skyward_runpod import RunPod

pytestmark = pytest.mark.cloud


@compute
def square(x: int) -> tuple[int, int]:
    return x * x, sky.instance_info().node


def test_a_pool_of_h100_pods_runs_through_the_port_mapping_and_terminates_them(
    runpod_world: World[FakeRunPod], runpod_config: RunPod
) -> None:
    fake = runpod_world.fake
    seen: list[object] = []
    with ComputePool(provider=runpod_config, nodes=2, accelerator="H100-SXM", display="quiet",
                     on_event=seen.append) as pool:  # fmt: skip
        ids = [n.instance_id for n in pool.nodes]
        for node in pool.nodes:
            pod = fake.pods[node.instance_id]
            assert pod.input["gpuTypeId"] == "NVIDIA H100 80GB HBM3" and pod.input["cloudType"] == "SECURE"
            assert node.endpoint == f"tcp://127.0.0.1:{pod.mapped[runpod_config.agent_port]}"
            assert all(public != private for private, public in pod.mapped.items())
        assert pool.nodes[0].price_on_demand == pytest.approx(2.99)
        assert (square(3) >> pool)[0] == 9
        assert sorted(n for _, n in square(2) @ pool) == [0, 1]
        assert [r for r, _ in gather(*(square(x) for x in range(6))) >> pool] == [x * x for x in range(6)]
    assert lifecycle_problems(seen, nodes=2, priced=True) == []
    assert sorted(fake.terminated) == sorted(ids) and fake.pods == {}
    assert fake.violations == []


def test_a_preempted_spot_pod_is_interrupted_its_work_moves_and_it_is_replaced(
    runpod_world: World[FakeRunPod], runpod_config: RunPod
) -> None:
    fake = runpod_world.fake
    seen: list[object] = []
    with ComputePool(
        provider=runpod_config, nodes=2, spot=sky.Spot.Always(retries=0), display="quiet", on_event=seen.append
    ) as pool:
        assert all(n.spot and fake.pods[n.instance_id].spot for n in pool.nodes)
        preempted = pool.nodes[0].instance_id
        fake.preempt(preempted)
        wait_until(lambda: any(isinstance(e, InstanceInterrupted) for e in seen), timeout=30)
        results = gather(*(square(x) for x in range(4))) >> pool
        assert [r[0] for r in results] == [0, 1, 4, 9]
        wait_until(lambda: pool.nodes[0].instance_id != preempted, timeout=90)
        assert pool.nodes[0].instance_id != preempted
        assert sorted(n for _, n in square(2) @ pool) == [0, 1]
    interrupted = [e for e in seen if isinstance(e, InstanceInterrupted)]
    assert [(e.node, e.instance_id) for e in interrupted] == [(0, preempted)]
    assert any(isinstance(e, Notice) and "replaced" in e.message for e in seen)
    assert fake.pods == {} and preempted in fake.terminated  # the exited pod was terminated, not left stopped
    assert fake.violations == []


def test_spot_if_available_falls_back_to_on_demand_when_spot_pods_run_out(
    runpod_world: World[FakeRunPod], runpod_config: RunPod
) -> None:
    fake = runpod_world.fake
    fake.no_capacity(spot=True, left=1)
    seen: list[object] = []
    with ComputePool(provider=runpod_config, nodes=2, spot="if-available", display="quiet",
                     on_event=seen.append) as pool:  # fmt: skip
        assert sorted(n.spot for n in pool.nodes) == [False, True]
        assert sorted(fake.pods[n.instance_id].spot for n in pool.nodes) == [False, True]
        assert (square(5) >> pool)[0] == 25
    assert any(isinstance(e, Notice) and "on-demand" in e.message for e in seen)
    assert fake.pods == {}


def test_no_capacity_under_spot_always_fails_with_what_to_try_and_leaves_nothing(
    runpod_world: World[FakeRunPod], runpod_config: RunPod
) -> None:
    fake = runpod_world.fake
    fake.no_capacity(spot=True, left=1)
    with pytest.raises(ProvisioningError, match=r"no spot capacity .* RunPod\(cloud='community'\)"):
        with ComputePool(provider=runpod_config, nodes=2, spot=sky.Spot.Always(retries=1, interval=0.01),
                         display="quiet"):  # fmt: skip
            pass
    assert fake.pods == {} and len(fake.terminated) == 1


def test_rate_limits_and_slow_pods_are_waited_out(runpod_world: World[FakeRunPod], runpod_config: RunPod) -> None:
    fake = runpod_world.fake
    fake.rate_limit(times=3, after=1)
    fake.boot_delay = 1.5
    with ComputePool(provider=runpod_config, nodes=1, display="quiet") as pool:
        assert (square(4) >> pool)[0] == 16
    assert fake.count("POST", "/graphql", 429) == 3
    assert fake.pods == {}


@compute
def one() -> int:
    return 1


@compute
def two() -> int:
    return 2


def test_the_seed_s_quick_example_runs_with_provider_runpod(
    runpod_world: World[FakeRunPod], runpod_config: RunPod
) -> None:
    """The README's example with ``provider=sky.RunPod()`` (pointed at the fake), an
    ``accelerator=sky.accelerators.A100()`` node and each execution operator."""
    from dataclasses import asdict

    provider = sky.RunPod(**asdict(runpod_config))
    with sky.ComputePool(provider=provider, accelerator=sky.accelerators.A100(), display="quiet") as pool:
        assert runpod_world.fake.pods[pool.nodes[0].instance_id].input["gpuTypeId"] == "NVIDIA A100 80GB PCIe"
        assert (square(7) >> pool)[0] == 49
        assert [r for r, _ in square(3) @ pool] == [9]
        assert ((one() & two()) >> pool) == (1, 2)
    assert runpod_world.fake.pods == {}
