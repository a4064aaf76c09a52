"""A large numpy array as the argument and the result: ``echo(array) >> pool``.

GB/s counts the bytes moved both ways (2 x the array's size) over the round trip. The
floor keeps every buffer out of band and never copies it in user space; ``+curve``
systems run over tcp loopback with CURVE encryption, the cross-machine path.
"""

from __future__ import annotations

import time

import numpy as np

from bench.measures.common import WrongResultError, rotated
from bench.model import Measurement
from bench.session import Session
from bench.stats import median
from bench.workload import echo

MEASURE = "bandwidth"


def run(session: Session, systems: list[str]) -> list[Measurement]:
    plan = session.plan
    size = plan.bandwidth_mb * 2**20
    array = np.arange(size // 8, dtype=np.float64)
    started = [session.warm(name) for name in systems]
    rates: dict[str, list[float]] = {s.name: [] for s in started}
    for system in started:  # warm-up: first touch of buffers and pages
        _verify(system.name, system.call(echo, array), array)
    for r in range(plan.bandwidth_rounds):
        for system in rotated(started, r):
            t0 = time.perf_counter()
            result = system.call(echo, array)
            elapsed = time.perf_counter() - t0
            _verify(system.name, result, array)
            del result
            rates[system.name].append(2 * size / elapsed / 1e9)
            session.log(f"{plan.bandwidth_mb} MB round trip on {system.name}: {2 * size / elapsed / 1e9:.2f} GB/s")
    return [
        Measurement(MEASURE, name, "gb_per_s", median(values), "GB/s", len(values),
                    note=f"{plan.bandwidth_mb} MB each way")
        for name, values in rates.items()
    ]  # fmt: skip


def _verify(system: str, got: object, want: np.ndarray) -> None:
    if not isinstance(got, np.ndarray) or got.shape != want.shape or not np.array_equal(got, want):
        raise WrongResultError(f"{system} did not return the array it was sent")
