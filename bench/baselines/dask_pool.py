"""Dask distributed: ``LocalCluster(n_workers=2, threads_per_worker=1)`` and a Client."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.baselines.base import WORKERS


class DaskSystem:
    name = "dask"

    def __init__(self, local_directory: Path, workers: int = WORKERS) -> None:
        from distributed import Client, LocalCluster

        self._cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            local_directory=str(local_directory),
            silence_logs=logging.ERROR,
        )
        self._client = Client(self._cluster)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        with warnings.catch_warnings():
            # Passing a 256 MB array straight to submit() is what the measure means to
            # time (as every other system is called); Dask's advice to scatter it is noise here.
            warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
            return self._client.submit(fn, *args, pure=False).result()

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        futures = self._client.map(fn, items, pure=False)
        return list(self._client.gather(futures))

    def close(self) -> None:
        self._client.close()
        self._cluster.close()
