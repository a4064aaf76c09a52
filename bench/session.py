"""One benchmark run: its plan, its warm systems, and progress output."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.baselines.base import System
from bench.env import ROOT, TMP, WORK
from bench.plan import Plan


def start_system(name: str) -> System:
    """Start one system by name, with 2 worker processes (the imports are lazy so quick
    mode never needs Ray or Dask)."""
    if name in ("floor", "floor+curve"):
        from bench.baselines.floor import FloorSystem

        return FloorSystem(TMP / "floor", transport="ipc" if name == "floor" else "curve", repo_root=ROOT)
    if name == "processpool":
        from bench.baselines.process_pool import ProcessPoolSystem

        return ProcessPoolSystem()
    if name == "loky":
        from bench.baselines.loky_pool import LokySystem

        return LokySystem()
    if name == "ray":
        from bench.baselines.ray_pool import RaySystem

        return RaySystem(WORK / "ray")  # short: Ray's socket paths are limited to 107 bytes
    if name == "dask":
        from bench.baselines.dask_pool import DaskSystem

        return DaskSystem(TMP / "dask")
    if name in ("skyward", "skyward+curve"):
        from bench.subject import SkywardSystem

        # skyward+curve stands for a cloud node: its buffers go through CURVE, never shared memory
        return (
            SkywardSystem(transport="ipc", name=name)
            if name == "skyward"
            else SkywardSystem(transport="tcp", shared_memory=False, name=name)
        )
    if name == "skyward-socket":  # large buffers through the socket: the baseline of the shm path
        from bench.subject import SkywardSystem

        return SkywardSystem(transport="ipc", shared_memory=False, name=name)
    raise ValueError(f"unknown system {name!r}")


def preimport(names: Sequence[str]) -> None:
    """Import each system's library before anything is timed: an import is paid once per
    process, not per pool start."""
    # skyward's pool module is imported on first use of sky.ComputePool (skyward/__init__.py)
    modules = {"loky": "loky", "ray": "ray", "dask": "distributed", "skyward": "skyward.api.pool"}
    for name in names:
        if name in modules:
            __import__(modules[name])


class Session:
    def __init__(self, plan: Plan, starter: Callable[[str], System] = start_system) -> None:
        self.plan = plan
        self._starter = starter
        self._warm: dict[str, System] = {}
        self.started = time.monotonic()
        self.notes: list[str] = []

    def log(self, message: str) -> None:
        print(f"[bench {time.monotonic() - self.started:6.1f}s] {message}", file=sys.stderr, flush=True)

    def fresh(self, name: str) -> System:
        """A newly started system, not shared: the caller closes it."""
        return self._starter(name)

    def warm(self, name: str) -> System:
        """A started system shared by the measures that need a warm pool."""
        system = self._warm.get(name)
        if system is None:
            t0 = time.perf_counter()
            system = self._warm[name] = self._starter(name)
            self.log(f"started {name} in {time.perf_counter() - t0:.2f} s")
        return system

    def close_warm(self) -> None:
        """Close every warm system (each is closed even when another fails to)."""
        systems, self._warm = list(self._warm.values()), {}
        errors: list[str] = []
        for system in systems:
            try:
                system.close()
            except Exception as exc:
                errors.append(f"{system.name}: {exc!r}")
        if errors:
            raise RuntimeError(f"closing systems failed: {'; '.join(errors)}")

    @property
    def work_dir(self) -> Path:
        return WORK
