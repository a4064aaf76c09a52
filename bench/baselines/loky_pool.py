"""loky's ProcessPoolExecutor (joblib's backend): cloudpickle, robust worker management."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench.baselines.base import WORKERS


class LokySystem:
    name = "loky"

    def __init__(self, workers: int = WORKERS) -> None:
        from loky import ProcessPoolExecutor

        self._executor = ProcessPoolExecutor(max_workers=workers)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._executor.submit(fn, *args).result()

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        futures = [self._executor.submit(fn, item) for item in items]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._executor.shutdown(wait=True, kill_workers=True)
