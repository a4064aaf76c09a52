"""distributed.jax on a real Local pool: two JAX processes on CPU, gloo collectives."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import skyward as sky
from skyward import distributed
from skyward.distributed.backends import FrameworkNotInstalledError

pytest.importorskip("jax")

pytestmark = [pytest.mark.heavy, pytest.mark.slow]


@sky.compute
@distributed.jax(timeout=120)
def psum_across_processes() -> dict[str, Any]:
    """Each process contributes rank + 1 to a psum over a mesh of every process's device."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    info = sky.instance_info()
    mesh = Mesh(np.array(jax.devices()), ("workers",))
    local = np.full((len(jax.local_devices()),), float(info.rank + 1), dtype=np.float32)
    values = jax.make_array_from_process_local_data(NamedSharding(mesh, P("workers")), local)
    total = jax.jit(
        jax.shard_map(lambda v: jax.lax.psum(v, "workers"), mesh=mesh, in_specs=P("workers"), out_specs=P())
    )(values)
    return {
        "rank": info.rank,
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "global_devices": len(jax.devices()),
        "local_devices": len(jax.local_devices()),
        "psum": float(np.asarray(total.addressable_data(0))[0]),
    }


@sky.compute
def jax_state() -> dict[str, Any]:
    """What a plain (not distributed) call sees after a distributed one."""
    import jax
    import jax.numpy as jnp

    return {
        "process_count": jax.process_count(),
        "devices": len(jax.devices()),
        "initialized": jax.distributed.is_initialized(),
        "sum": float(jnp.arange(4.0).sum()),
    }


@sky.compute
def call_with_jax_hidden() -> None:
    hidden = {name: sys.modules.pop(name) for name in list(sys.modules) if name == "jax" or name.startswith("jax.")}
    sys.modules["jax"] = None  # type: ignore[assignment]
    try:
        # the factory itself: this runs in a worker, whose registry may not hold the
        # core backends yet (the tests register them in the client only)
        from skyward.distributed.backends.jax_backend import jax

        jax()(lambda: None)()
    finally:
        del sys.modules["jax"]
        sys.modules.update(hidden)


def test_psum_across_two_processes(pool2: sky.ComputePool) -> None:
    # a plain jax call first: its backend exists before jax.distributed.initialize,
    # which the session must clear
    assert [s["process_count"] for s in jax_state() @ pool2] == [1, 1]

    results = psum_across_processes() @ pool2

    assert [r["rank"] for r in results] == [0, 1]
    assert [r["process_index"] for r in results] == [0, 1]
    for result in results:
        assert result["process_count"] == 2
        assert result["global_devices"] == 2 * result["local_devices"]
        # 1 + 2, each process's contribution once per local device
        assert result["psum"] == 3.0 * result["local_devices"]


def test_runtime_is_reset_between_calls(pool2: sky.ComputePool) -> None:
    first = psum_across_processes() @ pool2
    # between distributed calls, a plain call sees a single-process JAX again
    for state in jax_state() @ pool2:
        assert state == {"process_count": 1, "devices": 1, "initialized": False, "sum": 6.0}
    second = psum_across_processes() @ pool2
    assert first == second


def test_missing_jax_on_the_node_names_the_package_and_the_image(pool2: sky.ComputePool) -> None:
    with pytest.raises(
        FrameworkNotInstalledError, match=r"distributed.jax needs the 'jax' package.*Image\(pip=\['jax'\]\)"
    ):
        call_with_jax_hidden() >> pool2
