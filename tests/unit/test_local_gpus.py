"""The Local provider's GPUs: NVML detection (faked) and assigning GPUs to nodes."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from skyward.accelerators import Accelerator
from skyward.errors import ConfigurationError
from skyward.providers.local_gpus import (
    LocalGPU,
    assign_gpus,
    describe_gpus,
    detect_gpus,
    identify_gpu,
    visible_gpus,
)

MIB = 1024**2


pytestmark = pytest.mark.usefixtures("core_catalog")  # tests/unit/conftest.py


def gpus(*specs: tuple[str, int]) -> list[LocalGPU]:
    return [
        LocalGPU(index=i, name=name, memory=mib * MIB, uuid=f"GPU-{i:04d}-aaaa") for i, (name, mib) in enumerate(specs)
    ]


@pytest.mark.parametrize(
    ("name", "mib", "variant"),
    [
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", 81920, "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB-SXM"),
        ("NVIDIA H100 PCIe", 81559, "H100-80GB-PCIe"),
        ("NVIDIA H100 NVL", 95830, "H100-94GB-NVL"),
        ("NVIDIA H200", 143771, "H200-141GB"),
        ("NVIDIA GH200 480GB", 97871, "GH200-96GB"),
        ("Tesla T4", 15360, "T4-16GB"),
        ("NVIDIA A10G", 23028, "A10G-24GB"),
        ("NVIDIA A10", 23028, "A10-24GB"),
        ("NVIDIA L40S", 46068, "L40S-48GB"),
        ("Tesla V100-SXM2-32GB", 32768, "V100-32GB"),
        ("Tesla V100-SXM2-16GB", 16384, "V100-16GB"),
        ("NVIDIA RTX 6000 Ada Generation", 49140, "RTX6000-Ada-48GB"),
        ("NVIDIA RTX A6000", 49140, "A6000-48GB"),
        ("NVIDIA GeForce RTX 4090", 24564, "RTX4090-24GB"),
        ("NVIDIA GeForce RTX 3060", 12288, "RTX3060-12GB"),
        ("NVIDIA RTX A5000", 24564, "A5000-24GB"),
    ],
)
def test_identify(name: str, mib: int, variant: str) -> None:
    entry = identify_gpu(LocalGPU(0, name, mib * MIB))
    assert entry is not None
    assert entry.variant == variant


def test_identify_unknown() -> None:
    assert identify_gpu(LocalGPU(0, "NVIDIA GeForce GTX 1080 Ti", 11264 * MIB)) is None


def test_no_accelerator_means_no_gpus() -> None:
    assert assign_gpus(3, None, gpus(("Tesla T4", 15360))) == [[], [], []]


def test_assigns_disjoint_gpus_per_node() -> None:
    machine = gpus(
        ("Tesla T4", 15360),
        ("NVIDIA A100-SXM4-80GB", 81920),
        ("NVIDIA A100-SXM4-40GB", 40960),
        ("NVIDIA A100-SXM4-80GB", 81920),
        ("NVIDIA A100-SXM4-80GB", 81920),
    )
    assert assign_gpus(1, "T4", machine) == [[0]]
    assert assign_gpus(2, "A100", machine) == [[1], [2]]
    assert assign_gpus(1, "A100:4", machine) == [[1, 2, 3, 4]]
    assert assign_gpus(3, "A100-80GB", machine) == [[1], [3], [4]]
    two_40gb = gpus(
        ("NVIDIA A100-SXM4-80GB", 81920), ("NVIDIA A100-SXM4-40GB", 40960), ("NVIDIA A100-SXM4-40GB", 40960)
    )
    assert assign_gpus(1, Accelerator.NVIDIA.A100(count=2, memory="40GB"), two_40gb) == [[1, 2]]


def test_too_few_gpus() -> None:
    with pytest.raises(ConfigurationError) as info:
        assign_gpus(2, "A100", [])
    assert str(info.value).startswith(
        "accelerator='A100' on the Local provider needs 2 NVIDIA A100 GPUs (1 per node x 2 nodes); "
        "this machine has: none"
    )
    machine = gpus(("NVIDIA A100-SXM4-40GB", 40960), ("Tesla T4", 15360))
    with pytest.raises(ConfigurationError, match=r"needs 1 NVIDIA A100-80GB GPU \(1 per node x 1 node\)"):
        assign_gpus(1, "A100-80GB", machine)
    with pytest.raises(
        ConfigurationError, match=r"this machine has: 1x NVIDIA A100-SXM4-40GB \(0\), 1x Tesla T4 \(1\)"
    ):
        assign_gpus(1, "T4:2", machine)


def test_mig_and_other_vendors_are_refused() -> None:
    machine = gpus(("NVIDIA H100 80GB HBM3", 81559))
    with pytest.raises(ConfigurationError, match="MIG partitioning is not supported on the Local provider"):
        assign_gpus(1, Accelerator.NVIDIA.H100(mig="3g.40gb"), machine)
    with pytest.raises(ConfigurationError, match="only NVIDIA GPUs"):
        assign_gpus(1, "Trainium2", machine)
    with pytest.raises(ConfigurationError, match="nodes must be a positive int"):
        assign_gpus(0, "H100", machine)


def test_visible_devices() -> None:
    machine = gpus(("Tesla T4", 15360), ("Tesla T4", 15360), ("Tesla T4", 15360))
    assert visible_gpus(machine, None) == machine
    assert visible_gpus(machine, "") == []
    assert [g.index for g in visible_gpus(machine, "2,0")] == [2, 0]
    assert [g.index for g in visible_gpus(machine, "GPU-0001")] == [1]
    assert [g.index for g in visible_gpus(machine, "1,7,2")] == [1]  # ends at the first bad entry
    assert [g.index for g in visible_gpus(machine, "-1")] == []
    assert describe_gpus(machine) == "3x Tesla T4 (0, 1, 2)"


# ------------------------------------------------------------------ NVML (faked)


class FakeNVMLError(Exception):
    pass


@dataclass
class _Memory:
    total: int


def fake_nvml(devices: list[tuple[str, int]], *, init_fails: bool = False, as_bytes: bool = False) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise FakeNVMLError("NVML Shared Library Not Found")

    def name(handle: int) -> str | bytes:
        text = devices[handle][0]
        return text.encode() if as_bytes else text

    module.NVMLError = FakeNVMLError  # type: ignore[attr-defined]
    module.nvmlInit = init  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: len(devices)  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    module.nvmlDeviceGetName = name  # type: ignore[attr-defined]
    module.nvmlDeviceGetMemoryInfo = lambda h: _Memory(devices[h][1] * MIB)  # type: ignore[attr-defined]
    module.nvmlDeviceGetUUID = lambda h: f"GPU-{h:04d}-bbbb"  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    return module


def test_detect_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = fake_nvml([("NVIDIA A100-SXM4-80GB", 81920), ("Tesla T4", 15360)], as_bytes=True)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    found = detect_gpus()
    assert found == [
        LocalGPU(0, "NVIDIA A100-SXM4-80GB", 81920 * MIB, "GPU-0000-bbbb"),
        LocalGPU(1, "Tesla T4", 15360 * MIB, "GPU-0001-bbbb"),
    ]
    assert nvml.calls == ["init", "shutdown"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [g.index for g in detect_gpus()] == [1]
    assert len(detect_gpus(respect_visible_devices=False)) == 2


def test_detect_without_nvml_or_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    assert detect_gpus() == []
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_fails=True))
    assert detect_gpus() == []
