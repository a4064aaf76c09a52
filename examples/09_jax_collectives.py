"""``distributed.jax``: one JAX runtime across every worker of the pool.

Each worker is one JAX process; ``jax.devices()`` lists every process's devices, and a
``psum`` across them adds one number from each worker.

Needs jax (the CPU build is enough); without it it says so and exits 0.
Run it with:  .venv/bin/python examples/09_jax_collectives.py
"""

from __future__ import annotations

import importlib.util

from _provider import on_cloud, provider

import skyward as sky
from skyward import distributed


@sky.compute
@distributed.jax(timeout=60)
def total_of_ranks() -> tuple[int, int, float]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    rank = jax.process_index()
    gathered = multihost_utils.process_allgather(jnp.array([float(rank + 1)]))
    return rank, len(jax.devices()), float(np.asarray(gathered).sum())


def main() -> None:
    if importlib.util.find_spec("jax") is None:
        print("jax is not installed here: pip install 'jax[cpu]' (skipped)")
        return
    image = sky.Image(pip=["jax"]) if on_cloud() else sky.Image()
    with sky.ComputePool(provider=provider(), image=image, nodes=2, display="quiet") as pool:
        results = total_of_ranks() @ pool
    for rank, devices, total in results:
        print(f"process {rank}: sees {devices} devices in all, sum over processes of (rank + 1) = {total}")
    assert all(total == 3.0 for _, _, total in results)


if __name__ == "__main__":
    main()
