"""Pool start to first result with ``Image(pip=[...])`` whose environment is already built.

The first start builds the environment (cached by the image's content hash under
bench/.work/skyward-home, so a later run finds it built): it is timed for information
and not compared. Then each round starts a pool without
dependencies and one with the cached environment, alternating which goes first.
"""

from __future__ import annotations

import time

from bench.measures.common import check
from bench.model import Measurement
from bench.session import Session
from bench.stats import median
from bench.subject import SkywardSystem
from bench.workload import inc

MEASURE = "startup_pip"


def _start(pip: tuple[str, ...]) -> float:
    t0 = time.perf_counter()
    system = SkywardSystem(pip=pip)
    try:
        check(system.name, system.call(inc, 1), 2)
        return time.perf_counter() - t0
    finally:
        system.close()


def run(session: Session) -> list[Measurement]:
    plan = session.plan
    pip = (plan.pip_package,)
    first = _start(pip)
    session.log(f"first start with Image(pip={list(pip)}) (builds the environment unless cached): {first:.2f} s")
    times: dict[str, list[float]] = {"skyward": [], "skyward+pip": []}
    for r in range(plan.pip_rounds):
        order = [("skyward", ()), ("skyward+pip", pip)]
        for name, packages in order if r % 2 == 0 else order[::-1]:
            times[name].append(_start(packages))
            session.log(f"start to first result, {name}: {times[name][-1]:.2f} s")
    measurements = [
        Measurement(MEASURE, name, "seconds", median(values), "s", len(values),
                    note="rounds: " + ", ".join(f"{v:.2f}" for v in values))
        for name, values in times.items()
    ]  # fmt: skip
    measurements.append(
        Measurement(MEASURE, "skyward+pip", "first_start_seconds", first, "s", note=f"Image(pip={list(pip)})")
    )
    return measurements
