"""Skyward in one screen: a pool of two Local nodes, every operator, and shard().

Run it with:  python3 tasks.py example   (or: .venv/bin/python examples/01_quickstart.py)
"""

from __future__ import annotations

from _provider import provider

import skyward as sky


@sky.compute
def square(x: int) -> int:
    return x * x


@sky.compute
def where_am_i() -> str:
    info = sky.instance_info()
    role = "head" if info.is_head else "worker"
    return f"node {info.node}/{info.total_nodes} ({role}), worker {info.worker}"


@sky.compute
def partial_sum(data: list[int]) -> int:
    mine = sky.shard(data)  # this worker's part of the data
    print(f"summing {len(mine)} numbers")  # streamed back as a LogLine
    return sum(mine)


@sky.compute
def describe(n: int) -> str:
    return f"{n} is {'even' if n % 2 == 0 else 'odd'}"


def main() -> None:
    with sky.ComputePool(provider=provider(), nodes=2, display="log") as pool:
        print(">>      ", square(7) >> pool)
        print("@       ", where_am_i() @ pool)
        number, text = (square(12) & describe(12)) >> pool
        print("&       ", number, text)
        print("gather  ", sky.gather(*(square(i) for i in range(10))) >> pool)
        parts = partial_sum(list(range(1, 101))) @ pool
        print("shard   ", parts, "total", sum(parts))


if __name__ == "__main__":
    main()
