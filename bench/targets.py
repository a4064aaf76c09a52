"""The issue's targets, and their evaluation against one run's measurements (pure).

A target compares a measured value either with another system's value measured in the
same run (``factor`` x reference) or with an absolute bound. Targets whose numbers were
not measured in this run (quick mode has no Ray or Dask) are reported as not run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bench.model import Measurement
from bench.stats import ratio

Key = tuple[str, str, str]
Verdict = Literal["PASS", "MISS", "N/A"]


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    subject: Key
    op: Literal["<=", ">="]
    factor: float
    reference: Key | None = None  # None: ``factor`` is an absolute bound in the subject's unit

    def describe(self) -> str:
        if self.reference is None:
            return f"{'/'.join(self.subject[1:])} {self.op} {self.factor:g}"
        return f"{self.subject[1]} {self.op} {self.factor:g} x {self.reference[1]}"


@dataclass(frozen=True, slots=True)
class Outcome:
    target: Target
    verdict: Verdict
    value: float | None
    reference: float | None
    ratio: float | None  # subject / reference (or subject / bound)
    note: str = ""


def evaluate(target: Target, measured: Mapping[Key, Measurement]) -> Outcome:
    subject = measured.get(target.subject)
    if subject is None:
        return Outcome(target, "N/A", None, None, None, f"not measured in this run: {'/'.join(target.subject)}")
    if target.reference is None:
        bound = target.factor
        r = ratio(subject.value, bound)
        ok = subject.value <= bound if target.op == "<=" else subject.value >= bound
        return Outcome(target, "PASS" if ok else "MISS", subject.value, bound, r)
    reference = measured.get(target.reference)
    if reference is None:
        return Outcome(target, "N/A", subject.value, None, None, f"baseline not run: {'/'.join(target.reference)}")
    r = ratio(subject.value, reference.value)
    ok = (r <= target.factor) if target.op == "<=" else (r >= target.factor)
    if math.isinf(r) or math.isnan(r):
        ok = False
    return Outcome(target, "PASS" if ok else "MISS", subject.value, reference.value, r)


def evaluate_all(targets: Sequence[Target], measured: Mapping[Key, Measurement]) -> list[Outcome]:
    return [evaluate(t, measured) for t in targets]


# Bytes of client RSS growth per task allowed after the first batch: well above allocator
# noise (arenas, caches settling) and well below any per-task leak of a Python object
# (a leaked Future with its frames costs hundreds of bytes).
MEMORY_BOUND_BYTES_PER_TASK = 100.0

TARGETS: tuple[Target, ...] = (
    Target("latency: >> median vs floor", ("latency", "skyward", "median_us"), "<=", 1.5,
           ("latency", "floor", "median_us")),
    Target("latency: >> median vs Ray", ("latency", "skyward", "median_us"), "<=", 0.25,
           ("latency", "ray", "median_us")),
    Target("gather: tasks/s vs loky", ("throughput", "skyward", "tasks_per_s"), ">=", 1.5,
           ("throughput", "loky", "tasks_per_s")),
    Target("gather: tasks/s vs Ray", ("throughput", "skyward", "tasks_per_s"), ">=", 5.0,
           ("throughput", "ray", "tasks_per_s")),
    Target("array round trip: GB/s vs floor (zero-copy)", ("bandwidth", "skyward", "gb_per_s"), ">=", 0.7,
           ("bandwidth", "floor", "gb_per_s")),
    # shared memory on Local (skyward.transport.shm) against Ray's object store (full mode)
    Target("array round trip: GB/s vs Ray", ("bandwidth", "skyward", "gb_per_s"), ">=", 0.5,
           ("bandwidth", "ray", "gb_per_s")),
    Target("start to first result vs loky", ("startup", "skyward", "seconds"), "<=", 1.5,
           ("startup", "loky", "seconds")),
    # a tcp pool's large buffers (sealed with AES-256-GCM on the data port: skyward.transport.sealed)
    # against one CURVE frame per buffer in the same run: the floor's 0.18 GB/s was within noise of
    # skyward+curve's 0.19 when skyward sent one CURVE frame per buffer too
    Target("array round trip over CURVE: GB/s vs floor+curve", ("bandwidth", "skyward+curve", "gb_per_s"), ">=",
           2.0, ("bandwidth", "floor+curve", "gb_per_s")),
    Target("start to first result vs ray.init + first task", ("startup", "skyward", "seconds"), "<=", 0.25,
           ("startup", "ray", "seconds")),
    Target("start to first result vs Dask LocalCluster", ("startup", "skyward", "seconds"), "<=", 1.0,
           ("startup", "dask", "seconds")),
    Target("start with cached Image(pip=...) vs no deps", ("startup_pip", "skyward+pip", "seconds"), "<=", 2.0,
           ("startup_pip", "skyward", "seconds")),
    Target("fn() @ pool (4 nodes) vs one >>", ("broadcast", "skyward@4", "median_us"), "<=", 2.0,
           ("broadcast", "skyward>>", "median_us")),
    Target("client memory growth after the first batch", ("memory", "skyward", "bytes_per_task"), "<=",
           MEMORY_BOUND_BYTES_PER_TASK),
)  # fmt: skip
