"""Samples of a node's load: psutil always, NVIDIA GPUs through nvidia-ml-py when present."""

from __future__ import annotations

from typing import Any

import psutil


class MetricsSampler:
    def __init__(self) -> None:
        psutil.cpu_percent(interval=None)  # primes the counter; the first reading is 0
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml  # noqa: PLC0415  # optional (skyward-core[nvidia]), and only on a GPU node

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no package, no driver, no GPU: CPU metrics only
            self._nvml = None

    def sample(self) -> dict[str, float | None]:
        memory = psutil.virtual_memory()
        sample: dict[str, float | None] = {
            "cpu_percent": psutil.cpu_percent(interval=None),
            "memory_percent": memory.percent,
            "memory_used_mb": (memory.total - memory.available) / 2**20,
            "memory_total_mb": memory.total / 2**20,
            "gpu_utilization": None,
            "gpu_memory_used_mb": None,
            "gpu_memory_total_mb": None,
            "gpu_temperature": None,
        }
        if self._nvml is not None and self._handles:
            nv = self._nvml
            util = [nv.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            mem = [nv.nvmlDeviceGetMemoryInfo(h) for h in self._handles]
            temp = [nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU) for h in self._handles]
            sample["gpu_utilization"] = sum(util) / len(util)
            sample["gpu_memory_used_mb"] = sum(m.used for m in mem) / 2**20
            sample["gpu_memory_total_mb"] = sum(m.total for m in mem) / 2**20
            sample["gpu_temperature"] = max(temp)
        return sample
