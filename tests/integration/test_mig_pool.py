"""A MIG-partitioned node has one worker per partition, and `@` returns one result each."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

import skyward as sky
from skyward.plugins.contributions import ProviderPlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import registry
from skyward.providers.local import Local, LocalDriver


@dataclass(frozen=True)
class PretendGPU:
    """Local nodes that claim a MIG-partitioned GPU (no CUDA is touched by the task)."""


class PretendGPUDriver(LocalDriver):
    def __init__(self, config: PretendGPU) -> None:
        super().__init__(Local(grace_period=10))

    def validate(self, spec: Any) -> None:
        pass

    def visible_devices(self, spec: Any) -> list[list[str | None]]:
        return [[f"MIG-{n}-{w}" for w in range(spec.workers_per_node)] for n in range(spec.nodes)]


class _Plugin:
    @hookimpl
    def skyward_providers(self) -> Sequence[ProviderPlugin]:
        return [ProviderPlugin(name="pretend-gpu", config_type=PretendGPU, create_driver=PretendGPUDriver)]


@pytest.fixture
def pretend_gpu() -> Iterator[None]:
    plugin = _Plugin()
    registry.register(plugin)
    yield
    registry.unregister(plugin)


@sky.compute
def slot() -> tuple[int, int, int, str, str | None]:
    import os

    info = sky.instance_info()
    return info.node, info.worker, info.workers_per_node, os.environ["CUDA_VISIBLE_DEVICES"], sky.current_accelerator()


def test_mig_partitions_become_workers(pretend_gpu: None) -> None:
    accelerator = sky.Accelerator.NVIDIA.H100(mig="3g.40gb")
    with sky.ComputePool(provider=PretendGPU(), accelerator=accelerator, display="quiet") as pool:
        assert pool.spec.workers_per_node == 2
        results = slot() @ pool
    assert [(r[0], r[1], r[2]) for r in results] == [(0, 0, 2), (0, 1, 2)]
    assert [r[3] for r in results] == ["MIG-0-0", "MIG-0-1"]  # each worker sees its own partition
    assert all(r[4] is not None and r[4].startswith("H100") for r in results)
