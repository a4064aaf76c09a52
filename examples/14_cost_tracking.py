"""What a pool costs: ``CostUpdate`` while it runs, ``CostFinal`` when it stops.

On a cloud the rates are the instances' prices (spot or on-demand) and ``CostFinal``
also says what spot saved against on-demand. Local costs nothing, so on Local this shows
the events and their fields at $0.00.

Run it with:  .venv/bin/python examples/14_cost_tracking.py
"""

from __future__ import annotations

import time

from _provider import provider

import skyward as sky
from skyward.events import CostFinal, CostUpdate


@sky.compute
def work(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def main() -> None:
    finals: list[CostFinal] = []
    with sky.ComputePool(provider=provider(), nodes=2, display="quiet") as pool:
        pool.on(
            CostUpdate,
            lambda e: print(f"{e.elapsed_seconds:5.1f} s: ${e.accumulated_cost:.4f} at ${e.hourly_rate:.2f}/h"),
        )
        pool.on(CostFinal, finals.append)
        sky.gather(work(0.5), work(0.5)) >> pool
    final = finals[0]
    print(
        f"total ${final.total_cost:.4f} over {final.total_seconds:.1f} s "
        f"({final.spot_count} spot, {final.ondemand_count} on demand), saved ${final.savings_vs_ondemand:.4f} with spot"
    )


if __name__ == "__main__":
    main()
