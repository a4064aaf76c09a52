"""Warm round trip: ``inc(i) >> pool`` (or the baseline's equivalent), one call at a time.

Every system is started first and warmed; then rounds run each system in turn (a
different one first each round), so background noise on this shared machine falls on
all of them alike. Median and p99 are over every call of every round.
"""

from __future__ import annotations

import time

from bench.measures.common import check, rotated
from bench.model import Measurement
from bench.session import Session
from bench.stats import median, percentile
from bench.workload import inc

MEASURE = "latency"


def run(session: Session, systems: list[str]) -> list[Measurement]:
    plan = session.plan
    started = [session.warm(name) for name in systems]
    for system in started:
        for i in range(plan.warmup_calls):
            check(system.name, system.call(inc, i), i + 1)
    samples: dict[str, list[float]] = {s.name: [] for s in started}
    per_round = max(1, plan.latency_calls // plan.latency_rounds)
    for r in range(plan.latency_rounds):
        for system in rotated(started, r):
            out = samples[system.name]
            for i in range(per_round):
                t0 = time.perf_counter_ns()
                result = system.call(inc, i)
                out.append((time.perf_counter_ns() - t0) / 1e3)
                if result != i + 1:
                    check(system.name, result, i + 1)
        session.log(f"latency round {r + 1}/{plan.latency_rounds}")
    measurements = []
    for name, values in samples.items():
        n = len(values)
        measurements += [
            Measurement(MEASURE, name, "median_us", median(values), "us", n),
            Measurement(MEASURE, name, "p99_us", percentile(values, 99), "us", n),
        ]
    return measurements
