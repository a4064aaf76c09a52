"""MIG on cloud nodes: the bootstrap's partitioning script, reading nvidia-smi -L, and
giving each worker its partition (pure parts; end to end in tests/digitalocean)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.accelerators.mig_node import MigSetupError, assign_mig_devices, mig_devices, mig_setup_script

LISTING = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa)
  MIG 3g.20gb     Device  0: (UUID: MIG-11111111-2222-3333-4444-555555555555)
  MIG 3g.20gb     Device  1: (UUID: MIG-66666666-7777-8888-9999-000000000000)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbbb)
  MIG 7g.40gb     Device  0: (UUID: MIG-GPU-bbbb/1/0)
"""


def test_mig_devices_are_read_in_order_and_gpus_are_skipped() -> None:
    assert mig_devices(LISTING) == [
        "MIG-11111111-2222-3333-4444-555555555555",
        "MIG-66666666-7777-8888-9999-000000000000",
        "MIG-GPU-bbbb/1/0",  # the older driver's form
    ]
    assert mig_devices("GPU 0: NVIDIA H100 (UUID: GPU-1234)\n") == []


@given(st.integers(1, 8), st.integers(1, 4))
def test_each_partition_serves_consecutive_workers(devices: int, per_device: int) -> None:
    names = [f"MIG-{i}" for i in range(devices)]
    assigned = assign_mig_devices(names, devices * per_device, devices)
    assert len(assigned) == devices * per_device
    assert sorted(set(assigned), key=lambda n: int(str(n)[4:])) == names
    assert all(assigned.count(n) == per_device for n in names)
    assert assigned == sorted(assigned, key=lambda n: int(str(n)[4:]))


def test_a_node_without_the_partitions_it_should_have_is_an_error() -> None:
    with pytest.raises(MigSetupError, match="should have 2 MIG devices; nvidia-smi -L lists none"):
        assign_mig_devices([], 2, 2)
    with pytest.raises(MigSetupError, match="lists MIG-a"):
        assign_mig_devices(["MIG-a"], 2, 2)


def test_the_setup_script_is_valid_bash_and_names_the_partitions() -> None:
    script = mig_setup_script(("3g.40gb", "2g.20gb"), gpus=2)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert "mig_want=4" in script
    assert "-cgi 3g.40gb,2g.20gb -C" in script
    assert "$(seq 0 1)" in script
    with pytest.raises(ValueError):
        mig_setup_script((), gpus=1)
