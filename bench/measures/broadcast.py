"""``noop() @ pool`` on a pool of 4 nodes against one ``noop() >> pool`` on the same pool.

Calls alternate between the two operators, so both see the same machine state. The floor
with 4 workers does the same (one call on every worker, against one call), right after:
on a machine with fewer cores than workers, that ratio is what the hardware allows.
"""

from __future__ import annotations

import time

from bench.baselines.floor import FloorSystem
from bench.env import ROOT, TMP
from bench.measures.common import WrongResultError
from bench.model import Measurement
from bench.session import Session
from bench.stats import median, percentile
from bench.subject import SkywardSystem
from bench.workload import noop

MEASURE = "broadcast"


def run(session: Session) -> list[Measurement]:
    plan = session.plan
    nodes = plan.broadcast_nodes
    system = SkywardSystem(nodes=nodes, name=f"skyward@{nodes}")
    try:
        for _ in range(plan.warmup_calls):
            system.broadcast(noop)
            system.call(noop)
        at: list[float] = []
        one: list[float] = []
        for _ in range(plan.broadcast_calls):
            t0 = time.perf_counter_ns()
            results = system.broadcast(noop)
            at.append((time.perf_counter_ns() - t0) / 1e3)
            if len(results) != nodes:
                raise WrongResultError(f"noop() @ pool returned {len(results)} results on {nodes} nodes")
            t0 = time.perf_counter_ns()
            system.call(noop)
            one.append((time.perf_counter_ns() - t0) / 1e3)
    finally:
        system.close()
    floor = FloorSystem(TMP / "floor", workers=nodes, repo_root=ROOT)
    try:
        for _ in range(plan.warmup_calls):
            floor.broadcast(noop)
            floor.call(noop)
        floor_all: list[float] = []
        floor_one: list[float] = []
        for _ in range(plan.broadcast_calls):
            t0 = time.perf_counter_ns()
            floor.broadcast(noop)
            floor_all.append((time.perf_counter_ns() - t0) / 1e3)
            t0 = time.perf_counter_ns()
            floor.call(noop)
            floor_one.append((time.perf_counter_ns() - t0) / 1e3)
    finally:
        floor.close()
    session.log(
        f"@ on {nodes} nodes: median {median(at):.0f} us; >> median {median(one):.0f} us; "
        f"floor: all {nodes} {median(floor_all):.0f} us, one {median(floor_one):.0f} us"
    )
    n = plan.broadcast_calls
    return [
        Measurement(MEASURE, "skyward@4", "median_us", median(at), "us", n, note=f"{nodes} nodes"),
        Measurement(MEASURE, "skyward@4", "p99_us", percentile(at, 99), "us", n),
        Measurement(MEASURE, "skyward>>", "median_us", median(one), "us", n, note=f"same {nodes}-node pool"),
        Measurement(MEASURE, "skyward>>", "p99_us", percentile(one, 99), "us", n),
        Measurement(
            MEASURE, "floor@4", "median_us", median(floor_all), "us", n, note=f"one call on each of {nodes} workers"
        ),
        Measurement(MEASURE, "floor@4", "p99_us", percentile(floor_all, 99), "us", n),
        Measurement(
            MEASURE, "floor>>", "median_us", median(floor_one), "us", n, note=f"one call, same {nodes} workers"
        ),
        Measurement(MEASURE, "floor>>", "p99_us", percentile(floor_one, 99), "us", n),
    ]
