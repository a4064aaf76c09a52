"""``pool.submit`` returns a ``concurrent.futures.Future``: start work, do something else,
collect results as they finish. Also: the three displays (``"log"``, ``"spinner"``,
``"quiet"``); the spinner draws a live status line when stderr is a terminal.

Run it with:  .venv/bin/python examples/22_futures_and_display.py
"""

from __future__ import annotations

import time
from concurrent.futures import as_completed

from _provider import provider

import skyward as sky


@sky.compute
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def main() -> None:
    with sky.ComputePool(provider=provider(), concurrency=3, display="spinner") as pool:
        futures = [pool.submit(nap(s)) for s in (0.9, 0.1, 0.5)]
        print("submitted; the client is free meanwhile")
        order = [future.result() for future in as_completed(futures)]
    print(f"finished in the order {order}")  # usually the shortest first
    assert sorted(order) == [0.1, 0.5, 0.9]


if __name__ == "__main__":
    main()
