"""The environment a distributed framework reads, derived from the worker's InstanceInfo.

Pure functions decide the values; :func:`scoped_environ` is the one place that touches
``os.environ``, and it puts everything back afterwards: a worker process serves many
calls, and a ``RANK`` or ``TF_CONFIG`` left behind by one would mislead the next.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from skyward.errors import ConfigurationError
from skyward.runtime.context import InstanceInfo

# The variables torchrun sets, which torch.distributed's env:// rendezvous, Hugging Face
# accelerate and most launch scripts read.
PROCESS_GROUP_VARIABLES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
)


def head_endpoint(info: InstanceInfo, backend: str) -> tuple[str, int]:
    """``(head_addr, head_port)``: where rank 0 listens for its peers.

    The pool picks the port and sends it with the cluster information before the first
    task; a port of 0 means this worker never received it, and a rendezvous on port 0
    would bind a random port no peer can find.
    """
    if not info.head_addr:
        raise ConfigurationError(
            f"distributed.{backend}: this worker has no head address in its cluster "
            "information, so its peers cannot meet; the pool sends it when it starts"
        )
    if not 0 < info.head_port < 65536:
        raise ConfigurationError(
            f"distributed.{backend}: this worker's cluster information has head_port="
            f"{info.head_port}, not a usable port; the pool sends the head's port when "
            "it starts (is this worker's agent older than the client?)"
        )
    return info.head_addr, info.head_port


def process_group_env(info: InstanceInfo, backend: str, master_port: int | None = None) -> dict[str, str]:
    """torchrun's variables for this worker slot.

    Ranks count worker slots, not nodes (see :class:`InstanceInfo`): with several
    workers per node (MIG partitions, ``concurrency``) each slot is a rank of its own,
    and ``LOCAL_RANK`` is its index on the node. ``MASTER_PORT`` is the head's port
    unless the backend's store listens elsewhere (``master_port``).
    """
    addr, port = head_endpoint(info, backend)
    if master_port is not None and not 0 < master_port < 65536:
        raise ValueError(f"master_port must be a port number, got {master_port}")
    return {
        "MASTER_ADDR": addr,
        "MASTER_PORT": str(port if master_port is None else master_port),
        "WORLD_SIZE": str(info.world_size),
        "RANK": str(info.rank),
        "LOCAL_RANK": str(info.worker),
        "LOCAL_WORLD_SIZE": str(info.workers_per_node),
        "NODE_RANK": str(info.node),
    }


@contextmanager
def scoped_environ(updates: Mapping[str, str]) -> Iterator[None]:
    """Set ``updates`` in ``os.environ`` for the block, then restore what was there
    (including removing variables that did not exist before)."""
    saved = {name: os.environ.get(name) for name in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
