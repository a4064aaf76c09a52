"""Run one provider call per node at once, for drivers that do not use the template's
``launch`` (the template's ``_create_all`` does the same with its spot plan)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from skyward.providers.cloud.template import CREATE_CONCURRENCY

T = TypeVar("T")


def in_parallel(call: Callable[[T], None], items: Sequence[T], concurrency: int = CREATE_CONCURRENCY) -> None:
    """``call(item)`` for every item, at most ``concurrency`` at once; every call has
    returned before this does, so what the others made is known to the caller's cleanup,
    and the first failure in the items' order is then raised.

    Measured on moto (bench/cloudstart.py): one ``RunInstances`` after another, 4 nodes
    took 0.54 s from launch to running against 0.03 s for one node; in parallel the API
    phases of 16 nodes stay within 1.5x one node's (bench/README.md)."""
    if not items:
        return
    errors: list[BaseException | None] = []
    with ThreadPoolExecutor(max_workers=min(len(items), concurrency), thread_name_prefix="skyward-create") as pool:
        for future in [pool.submit(call, item) for item in items]:
            errors.append(future.exception())
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
