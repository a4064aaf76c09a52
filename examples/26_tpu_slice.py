"""A multi-host TPU slice as one pool: every host is a node, ``@`` runs on all of them.

On Google Cloud (SKYWARD_PROVIDER=gcp) the pool is a ``v5litepod-16`` slice: 16 TPU v5e
chips on 4 hosts, one node per host. Each host knows its index, and ``distributed.jax``
gets its coordinator (host 0), process count and id from the pool, so a ``psum`` spans
every chip of the slice. On Local (the default) the same code runs on four local nodes,
which stand in for the hosts, with JAX on CPU when it is installed.

Run it with:  .venv/bin/python examples/26_tpu_slice.py     (SKYWARD_PROVIDER=gcp for a real slice)
"""

from __future__ import annotations

import importlib.util

from _provider import provider, provider_name

import skyward as sky
from skyward import distributed

HOSTS = 4


@sky.compute
def host() -> tuple[int, int]:
    info = sky.instance_info()
    return info.node, info.total_nodes


@sky.compute
@distributed.jax(timeout=120)
def chips_and_sum() -> tuple[int, int, float]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils

    gathered = multihost_utils.process_allgather(jnp.array([float(jax.process_index() + 1)]))
    return jax.process_index(), len(jax.devices()), float(np.asarray(gathered).sum())


def main() -> None:
    on_gcp = provider_name() == "gcp"
    accelerator = sky.Accelerator.Google.TPUSlice("v5litepod-16") if on_gcp else None
    image = sky.Image(pip=["jax[tpu]"]) if on_gcp else sky.Image(pip=["jax"]) if provider_name() != "local" else None
    with sky.ComputePool(
        provider=provider(), accelerator=accelerator, nodes=HOSTS, image=image, display="quiet"
    ) as pool:
        hosts = sorted(host() @ pool)
        print("hosts:", ", ".join(f"{node} of {total}" for node, total in hosts))
        if importlib.util.find_spec("jax") is None and not on_gcp:
            print("jax is not installed here: pip install 'jax[cpu]' (the JAX step is skipped)")
            return
        for index, devices, total in sorted(chips_and_sum() @ pool):
            print(f"JAX process {index}: {devices} devices in the slice, psum of 1..{HOSTS} = {total:g}")


if __name__ == "__main__":
    main()
