"""Local(cpu=, memory=): held to what this machine has, or refused by name."""

from __future__ import annotations

import os

import pytest

import skyward as sky
from skyward.errors import ConfigurationError
from skyward.providers.local import check_local_capacity


def test_cpu_and_memory_that_the_machine_has_for_every_worker_are_accepted() -> None:
    check_local_capacity(2, 1024, workers=4, machine_cpus=8, machine_memory_mb=4096)
    check_local_capacity(None, None, workers=1000, machine_cpus=1, machine_memory_mb=1)


@pytest.mark.parametrize(("cpu", "memory_mb", "name"), [(3, None, "cpu=3"), (None, 2048, "memory=2048 MB")])
def test_more_than_the_machine_has_is_refused_naming_the_parameter(
    cpu: int | None, memory_mb: int | None, name: str
) -> None:
    with pytest.raises(ConfigurationError, match=name) as info:
        check_local_capacity(cpu, memory_mb, workers=4, machine_cpus=8, machine_memory_mb=4096)
    assert "this machine" in str(info.value)


def test_a_local_pool_asking_for_more_cores_than_the_machine_has_is_refused_before_it_starts() -> None:
    cores = os.cpu_count() or 1
    with pytest.raises(ConfigurationError, match=rf"cpu={cores + 1} per worker"):
        sky.ComputePool(cpu=cores + 1, display="quiet")
    with pytest.raises(ConfigurationError, match="memory="):
        sky.ComputePool(memory="100000TB", display="quiet")
    assert sky.ComputePool(cpu=1, memory="1MB", display="quiet").spec.cpu == 1
