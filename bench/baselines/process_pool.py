"""concurrent.futures.ProcessPoolExecutor, the standard library's answer."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.baselines.base import WORKERS


class ProcessPoolSystem:
    name = "processpool"

    def __init__(self, workers: int = WORKERS) -> None:
        # forkserver: fork from a process that already runs threads (zmq, Ray, Dask
        # clients) is unsafe, and forkserver is the default from Python 3.14 on.
        self._executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver"))

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._executor.submit(fn, *args).result()

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        futures = [self._executor.submit(fn, item) for item in items]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
