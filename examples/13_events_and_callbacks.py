"""Events: every lifecycle step is a frozen dataclass you can subscribe to.

Three ways, all used here: ``on_event=`` for everything, ``pool.on(EventType, handler)``
for one type, ``sky.use_callback(cb)`` for every pool made inside a block. A callback
that raises is reported once and never breaks the pool.

Run it with:  .venv/bin/python examples/13_events_and_callbacks.py
"""

from __future__ import annotations

from collections import Counter

from _provider import provider

import skyward as sky
from skyward.events import BootstrapProgress, LogLine, PoolStarted, SkywardEvent


@sky.compute
def chatty(n: int) -> int:
    for i in range(n):
        print(f"step {i}")
    return n


def main() -> None:
    kinds: Counter[str] = Counter()
    steps: list[str] = []
    lines: list[str] = []

    def count(event: SkywardEvent) -> None:
        kinds[type(event).__name__] += 1

    def started(event: PoolStarted) -> None:
        print("the pool is up; bootstrap went through", steps)

    with sky.use_callback(lambda e: steps.append(e.step) if isinstance(e, BootstrapProgress) else None):
        pool = sky.ComputePool(provider=provider(), on_event=count, display="quiet")
    pool.on(PoolStarted, started)
    pool.on(LogLine, lambda e: lines.append(e.line))
    with pool:
        chatty(3) >> pool
    print("events seen:", dict(kinds))
    print("log lines:", lines)
    assert {"PoolStarted", "PoolStopping", "CostFinal"} <= set(kinds)
    assert lines == ["step 0", "step 1", "step 2"]


if __name__ == "__main__":
    main()
