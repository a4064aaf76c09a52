"""Ray on this machine: ``ray.init(num_cpus=2)``, one remote function per callable."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.baselines.base import WORKERS


class RaySystem:
    name = "ray"

    def __init__(self, temp_dir: Path, workers: int = WORKERS) -> None:
        import ray

        self._ray = ray
        # Ray's socket paths must stay under 107 bytes: the caller passes a short path.
        self._temp_dir = temp_dir
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            _temp_dir=str(temp_dir),
            logging_level="WARNING",
            log_to_driver=False,
        )
        self._remote: dict[Callable[..., Any], Any] = {}

    def _fn(self, fn: Callable[..., Any]) -> Any:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(fn)
        return remote

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._ray.get(self._fn(fn).remote(*args))

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        remote = self._fn(fn)
        return list(self._ray.get([remote.remote(item) for item in items]))

    def close(self) -> None:
        self._ray.shutdown()
        shutil.rmtree(self._temp_dir, ignore_errors=True)
