"""The client's resident memory across many tasks: leaks show as growth per task.

Tasks run in batches (``gather`` of trivial calls) on a warm pool. RSS is read after a
full garbage collection following each batch; growth is measured from the first batch,
which pays for caches and allocator arenas that a steady client keeps.
"""

from __future__ import annotations

import gc

import psutil

from bench.measures.common import check
from bench.model import Measurement
from bench.session import Session
from bench.workload import inc

MEASURE = "memory"


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def run(session: Session, system_name: str = "skyward") -> list[Measurement]:
    plan = session.plan
    system = session.warm(system_name)
    batch = plan.memory_batch
    expected = [i + 1 for i in range(batch)]
    readings: list[int] = []
    for b in range(plan.memory_batches):
        results = system.map(inc, range(batch))
        check(system_name, results, expected)
        del results
        readings.append(rss())
        if b % 2 == 1 or b == plan.memory_batches - 1:
            session.log(f"memory after {(b + 1) * batch:,} tasks: {readings[-1] / 2**20:.1f} MiB")
    growth = readings[-1] - readings[0]
    later_tasks = batch * (plan.memory_batches - 1)
    total = batch * plan.memory_batches
    trail = ", ".join(f"{r / 2**20:.1f}" for r in readings)
    return [
        Measurement(MEASURE, system_name, "rss_first_mib", readings[0] / 2**20, "MiB", note=f"after {batch:,} tasks"),
        Measurement(MEASURE, system_name, "rss_last_mib", readings[-1] / 2**20, "MiB", note=f"after {total:,} tasks"),
        Measurement(MEASURE, system_name, "growth_mib", growth / 2**20, "MiB", note=f"MiB after each batch: {trail}"),
        Measurement(MEASURE, system_name, "bytes_per_task", growth / later_tasks, "B/task", later_tasks),
    ]
