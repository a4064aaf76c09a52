"""``MultiPool``: several pools started in parallel and stopped together.

Useful when one job needs different machines (say, CPU nodes to prepare data and GPU
nodes to train): start time is the slowest pool's, not the sum, and if one pool fails
to start every other one is stopped before the error reaches you.

Run it with:  .venv/bin/python examples/18_multipool.py
"""

from __future__ import annotations

import time

from _provider import provider

import skyward as sky


@sky.compute
def prepare(n: int) -> list[int]:
    return [x * x for x in range(n)]


@sky.compute
def summarize(data: list[int]) -> float:
    return sum(data) / len(data)


def main() -> None:
    started = time.perf_counter()
    with sky.MultiPool(
        sky.ComputePool(provider=provider(), nodes=2, display="quiet"),  # e.g. CPU nodes
        sky.ComputePool(provider=provider(), nodes=1, display="quiet"),  # e.g. a GPU node
    ) as (cpu_pool, gpu_pool):
        print(f"both pools up in {time.perf_counter() - started:.2f} s")
        parts = sky.gather(prepare(10), prepare(20)) >> cpu_pool
        means = sky.gather(*(summarize(p) for p in parts)) >> gpu_pool
    print(f"means: {means}")
    assert means == (28.5, 123.5)


if __name__ == "__main__":
    main()
