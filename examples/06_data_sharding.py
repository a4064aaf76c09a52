"""Splitting data across workers: ``shard`` for arrays you hold, ``DistributedSampler``
for a dataset you index.

``shard(x, y, shuffle=True)`` gives each worker a balanced block of the same permutation
(the seed is derived from the pool's job id, so every worker draws the same one and the
blocks never overlap). ``DistributedSampler`` follows torch's contract without torch.

Run it with:  .venv/bin/python examples/06_data_sharding.py
"""

from __future__ import annotations

import numpy as np
from _provider import provider

import skyward as sky


@sky.compute
def my_part(x: np.ndarray, y: np.ndarray) -> tuple[int, list[int], list[int]]:
    info = sky.instance_info()
    xs, ys = sky.shard(x, y, shuffle=True)  # the same rows of both, in the same order
    assert (xs[:, 0] == ys).all()
    sampler = sky.DistributedSampler(range(10), shuffle=False)  # rank r gets r, r + world, ...
    return info.rank, sorted(int(v) for v in ys), list(sampler)


def main() -> None:
    x = np.arange(24).reshape(12, 2)
    y = x[:, 0].copy()
    with sky.ComputePool(provider=provider(), nodes=2, concurrency=2, display="quiet") as pool:
        parts = my_part(x, y) @ pool
    seen: list[int] = []
    for rank, rows, sampled in parts:
        print(f"rank {rank}: rows {rows}, sampler indices {sampled}")
        seen += rows
    assert sorted(seen) == sorted(y.tolist()), "the shards cover the data exactly once"


if __name__ == "__main__":
    main()
