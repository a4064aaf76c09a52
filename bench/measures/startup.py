"""Pool start to first result, 2 workers, no dependencies.

Skyward: ``ComputePool(nodes=2)`` opened and ``inc(1) >> pool`` answered. Ray:
``ray.init(num_cpus=2)`` and the first task. Dask: ``LocalCluster(n_workers=2,
threads_per_worker=1)``, its Client and the first task. Libraries are imported before
timing (an import is paid once per process). Rounds alternate the order of the systems;
the median is reported, and how long closing took, for information.
"""

from __future__ import annotations

import time

from bench.measures.common import check, rotated
from bench.model import Measurement
from bench.session import Session, preimport
from bench.stats import median
from bench.workload import inc

MEASURE = "startup"


def run(session: Session, systems: list[str]) -> list[Measurement]:
    preimport(systems)
    starts: dict[str, list[float]] = {name: [] for name in systems}
    closes: dict[str, list[float]] = {name: [] for name in systems}
    for r in range(session.plan.startup_rounds):
        for name in rotated(systems, r):
            t0 = time.perf_counter()
            system = session.fresh(name)
            try:
                check(name, system.call(inc, 1), 2)
                starts[name].append(time.perf_counter() - t0)
            finally:
                t1 = time.perf_counter()
                system.close()
                closes[name].append(time.perf_counter() - t1)
            session.log(f"start to first result on {name}: {starts[name][-1]:.2f} s (close {closes[name][-1]:.2f} s)")
    measurements = []
    for name in systems:
        rounds = ", ".join(f"{v:.2f}" for v in starts[name])
        measurements += [
            Measurement(
                MEASURE, name, "seconds", median(starts[name]), "s", len(starts[name]), note=f"rounds: {rounds}"
            ),
            Measurement(MEASURE, name, "close_seconds", median(closes[name]), "s", len(closes[name])),
        ]
    return measurements
