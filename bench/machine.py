"""A description of the machine a run happened on, for the results table."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe() -> dict[str, Any]:
    versions = {
        name: _version(name)
        for name in ("skyward-core", "pyzmq", "cloudpickle", "numpy", "loky", "ray", "dask", "distributed")
    }
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "memory_gib": memory_gib(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": {k: v for k, v in versions.items() if v is not None},
        "loadavg_start": list(os.getloadavg()),
    }


def summary(machine: dict[str, Any]) -> str:
    load = machine.get("loadavg_start") or []
    load_text = f", load average at start {load[0]:.2f}" if load else ""
    end = machine.get("loadavg_end") or []
    load_text += f", at end {end[0]:.2f}" if end else ""
    return (
        f"{machine['nproc']} CPUs ({machine['cpu']}), {machine['memory_gib']} GiB, "
        f"Python {machine['python']}, {machine['platform']}{load_text}"
    )
