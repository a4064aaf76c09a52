#!/usr/bin/env python3
"""Gather throughput and CPU per task on a warm 2-node Local pool, for A/B comparisons.

    PYTHONHASHSEED=0 .venv/bin/python bench/gather_cpu.py [--tasks 10000] [--rounds 7] [--calls 4000]

Prints one JSON line: the median tasks/s of ``rounds`` gathers of ``tasks`` trivial
tasks, the CPU microseconds per task over those gathers of the client (and of each of its
threads: the caller, ``skyward-io``, ZeroMQ's own) and of each node process (agents,
workers), then the median ``inc(i) >> pool`` round trip over ``calls`` calls with the CPU
per call. On a shared 2-core machine the tasks/s swing with the other load; the CPU per
task moves far less, which is what makes a comparison of two commits run back to back
readable. It imports whichever ``skyward`` comes first on ``PYTHONPATH`` (see
bench/README.md for running it against an older commit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import skyward as sky  # noqa: E402
from bench.workload import inc  # noqa: E402


def _cpu(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def _threads(process: psutil.Process) -> dict[int, float]:
    return {t.id: t.user_time + t.system_time for t in process.threads()}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=4_000)
    args = parser.parse_args(argv)
    me = psutil.Process()
    work = sky.compute(inc)
    expected = [i + 1 for i in range(args.tasks)]
    with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet") as pool:
        for i in range(300):  # warm: imports, caches, the function's measured run time
            work(i) >> pool
        list(sky.gather(*(work(i) for i in range(200))) >> pool)
        nodes = me.children(recursive=True)
        names = {t.native_id: t.name for t in threading.enumerate()}
        client0, threads0, nodes0 = _cpu(me), _threads(me), [_cpu(p) for p in nodes]
        rates = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            results = list(sky.gather(*(work(i) for i in range(args.tasks))) >> pool)
            rates.append(args.tasks / (time.perf_counter() - started))
            if results != expected:
                raise SystemExit("a gather returned wrong results")
        client1, threads1, nodes1 = _cpu(me), _threads(me), [_cpu(p) for p in nodes]
        latencies = []
        call0, calls_nodes0 = _cpu(me), sum(_cpu(p) for p in nodes)
        for i in range(args.calls):
            started = time.perf_counter()
            if work(i) >> pool != i + 1:
                raise SystemExit("a call returned a wrong result")
            latencies.append(time.perf_counter() - started)
        call1, calls_nodes1 = _cpu(me), sum(_cpu(p) for p in nodes)
    tasks = args.tasks * args.rounds
    per_task = 1e6 / tasks
    per_call = 1e6 / max(1, args.calls)
    print(
        json.dumps(
            {
                "skyward": str(Path(sky.__file__).parent),
                "tasks_per_s": round(statistics.median(rates)),
                "rounds": [round(r) for r in rates],
                "client_cpu_us_per_task": round((client1 - client0) * per_task, 2),
                "client_threads_us_per_task": {
                    names.get(tid, "zmq/other"): round((cpu - threads0.get(tid, 0.0)) * per_task, 2)
                    for tid, cpu in threads1.items()
                    if cpu - threads0.get(tid, 0.0) > 0.005
                },
                "nodes_cpu_us_per_task": round((sum(nodes1) - sum(nodes0)) * per_task, 2),
                "node_processes_us_per_task": sorted(
                    round((b - a) * per_task, 2) for a, b in zip(nodes0, nodes1, strict=True)
                ),
                "call_median_us": round(statistics.median(latencies) * 1e6, 1) if latencies else None,
                "call_client_cpu_us": round((call1 - call0) * per_call, 1),
                "call_nodes_cpu_us": round((calls_nodes1 - calls_nodes0) * per_call, 1),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
