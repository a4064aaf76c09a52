"""Run several computations at once: ``&`` for a few of different types, ``gather`` for many.

``(a & b) >> pool`` needs the parentheses: ``>>`` binds tighter than ``&``, so
``a & b >> pool`` would run ``b`` alone first (Skyward's error then says so).

Run it with:  .venv/bin/python examples/02_parallel.py
"""

from __future__ import annotations

import time

from _provider import provider

import skyward as sky


@sky.compute
def slow_square(x: int) -> int:
    time.sleep(0.2)
    return x * x


@sky.compute
def shout(word: str) -> str:
    time.sleep(0.2)
    return word.upper()


def main() -> None:
    with sky.ComputePool(provider=provider(), nodes=2, concurrency=2, display="quiet") as pool:
        started = time.perf_counter()
        number, word = (slow_square(7) & shout("hello")) >> pool  # typed: int, str
        print(f"& gave {number} and {word!r} in {time.perf_counter() - started:.2f} s")

        started = time.perf_counter()
        squares = sky.gather(*(slow_square(x) for x in range(8))) >> pool  # results in order
        print(
            f"gather of 8 on {pool.spec.total_workers} workers: {list(squares)}"
            f" in {time.perf_counter() - started:.2f} s"
        )
    assert squares == tuple(x * x for x in range(8))


if __name__ == "__main__":
    main()
