"""Gather of many trivial tasks on a warm pool: ``gather(*(inc(i) for i in ...)) >> pool``.

Timed from building the batch to holding every result; tasks per second is the median
over rounds, the rounds interleaved across systems.
"""

from __future__ import annotations

import time

from bench.measures.common import check, rotated
from bench.model import Measurement
from bench.session import Session
from bench.stats import median
from bench.workload import inc

MEASURE = "throughput"


def run(session: Session, systems: list[str]) -> list[Measurement]:
    plan = session.plan
    n = plan.gather_tasks
    started = [session.warm(name) for name in systems]
    expected = [i + 1 for i in range(n)]
    for system in started:  # warm: the first batch pays for worker-side imports and caches
        check(system.name, system.map(inc, range(200)), expected[:200])
    rates: dict[str, list[float]] = {s.name: [] for s in started}
    for r in range(plan.gather_rounds):
        for system in rotated(started, r):
            t0 = time.perf_counter()
            results = system.map(inc, range(n))
            elapsed = time.perf_counter() - t0
            check(system.name, results, expected)
            rates[system.name].append(n / elapsed)
            session.log(f"gather {n} on {system.name}: {n / elapsed:,.0f} tasks/s")
    return [
        Measurement(
            MEASURE,
            name,
            "tasks_per_s",
            median(values),
            "tasks/s",
            len(values),
            note=f"{n} tasks per round; rounds: " + ", ".join(f"{v:,.0f}" for v in values),
        )
        for name, values in rates.items()
    ]
