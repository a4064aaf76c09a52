"""``@`` runs a computation on every worker; ``sky.shard`` gives each worker its part.

Every worker receives the whole list, keeps only its contiguous block, and returns a
partial sum: the classic scatter-reduce, with the scatter done on the worker side.

Run it with:  .venv/bin/python examples/03_broadcast_and_shard.py
"""

from __future__ import annotations

from _provider import provider

import skyward as sky


@sky.compute
def partial_sum(numbers: list[int]) -> tuple[int, int, int]:
    info = sky.instance_info()
    mine = sky.shard(numbers)
    print(f"rank {info.rank} of {info.world_size} sums {len(mine)} numbers")
    return info.rank, len(mine), sum(mine)


def main() -> None:
    numbers = list(range(1, 1001))
    with sky.ComputePool(provider=provider(), nodes=2, concurrency=2, display="quiet") as pool:
        parts = partial_sum(numbers) @ pool  # one result per worker, in rank order
    for rank, count, total in parts:
        print(f"rank {rank}: {count} numbers, sum {total}")
    assert sum(total for _, _, total in parts) == sum(numbers)


if __name__ == "__main__":
    main()
