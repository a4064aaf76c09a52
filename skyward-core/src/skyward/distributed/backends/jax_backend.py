"""``distributed.jax``: ``jax.distributed`` initialised across the pool's workers.

Every worker slot is one JAX process (``process_id`` = its rank, ``num_processes`` = the
pool's world size); the head node's rank 0 runs the coordinator on the head's port, which
the pool picked and sent with the cluster information. Collectives then span every
worker: ``jax.devices()`` lists all processes' devices, ``jax.local_devices()`` this one's.
On CPU, JAX's cross-process collectives use gloo (its default), so this works, and is
tested, without accelerators.

JAX allows ``jax.distributed.initialize`` only before its backends exist, and a worker
process serves many calls. So the session clears JAX's backends (and compilation caches,
whose executables belong to them) before initialising, and shuts the distributed client
down and clears them again afterwards: each call gets a fresh runtime, and the next call,
distributed or not, finds JAX usable. Arrays a previous call left alive in the process
become invalid; a call's results must leave the function as host values (numpy, Python
numbers), as the pool requires anyway.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from skyward.distributed.backends.base import DistributedDecorator, decorator
from skyward.distributed.backends.env import head_endpoint
from skyward.distributed.backends.frameworks import require
from skyward.errors import ConfigurationError
from skyward.runtime.context import InstanceInfo

JAX_PIP = ("jax",)


def check_jax_options(timeout: float | None, local_device_ids: Sequence[int] | None, where: str) -> None:
    if timeout is not None and not timeout >= 1:
        raise ConfigurationError(f"{where}(timeout={timeout!r}): must be at least 1 second")
    if local_device_ids is not None and (
        isinstance(local_device_ids, str | bytes) or not all(isinstance(i, int) and i >= 0 for i in local_device_ids)
    ):
        raise ConfigurationError(
            f"{where}(local_device_ids={local_device_ids!r}): must be a sequence of non-negative device indices"
        )


def initialize_arguments(
    info: InstanceInfo, timeout: float | None, local_device_ids: Sequence[int] | None, backend: str
) -> dict[str, Any]:
    """The keyword arguments of ``jax.distributed.initialize`` for this worker slot."""
    addr, port = head_endpoint(info, backend)
    arguments: dict[str, Any] = {
        "coordinator_address": f"{addr}:{port}",
        "num_processes": info.world_size,
        "process_id": info.rank,
    }
    if local_device_ids is not None:
        arguments["local_device_ids"] = list(local_device_ids)
    if timeout is not None:
        arguments["initialization_timeout"] = int(timeout)
    return arguments


def _reset_backends(jax: ModuleType, backend: str) -> None:
    extend_backend = require("jax.extend.backend", backend=backend, pip=JAX_PIP)
    extend_backend.clear_backends()
    jax.clear_caches()


def _forget_distributed_state() -> None:
    """Return ``jax.distributed``'s process-wide state to a single process's.

    ``jax.distributed.shutdown()`` stops the client and service but keeps
    ``process_id`` and ``num_processes``, and the next backend would still number its
    devices as process ``rank`` of ``world_size``. JAX has no public reset; its state is
    a plain object whose class attributes are the single-process defaults, so dropping
    the instance's attributes restores them.
    """
    internal = sys.modules.get("jax._src.distributed")
    state = getattr(internal, "global_state", None)
    if state is not None and hasattr(state, "__dict__"):
        vars(state).clear()


@contextmanager
def jax_distributed(
    info: InstanceInfo,
    timeout: float | None,
    local_device_ids: Sequence[int] | None,
    backend: str = "jax",
) -> Iterator[ModuleType]:
    """``jax.distributed`` initialised for this worker slot for the block; yields ``jax``."""
    jax = require("jax", backend=backend, pip=JAX_PIP)
    arguments = initialize_arguments(info, timeout, local_device_ids, backend)
    if jax.distributed.is_initialized():
        jax.distributed.shutdown()  # left by an earlier call's own initialize
        _forget_distributed_state()
    _reset_backends(jax, backend)
    jax.distributed.initialize(**arguments)
    try:
        yield jax
    finally:
        try:
            jax.distributed.shutdown()
        finally:
            _forget_distributed_state()
            _reset_backends(jax, backend)


@dataclass(frozen=True, slots=True)
class JaxLauncher:
    """The launcher behind ``distributed.jax(timeout=..., local_device_ids=...)``."""

    timeout: float | None = None
    local_device_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        check_jax_options(self.timeout, self.local_device_ids, "distributed.jax")

    @property
    def name(self) -> str:
        return "jax"

    @contextmanager
    def session(self, info: InstanceInfo) -> Iterator[None]:
        with jax_distributed(info, self.timeout, self.local_device_ids):
            yield


def jax(*, timeout: float | None = None, local_device_ids: Sequence[int] | None = None) -> DistributedDecorator:
    """``@distributed.jax()``: run the function with ``jax.distributed`` initialised
    across every worker of the pool, the head's rank 0 as coordinator.

    timeout:          seconds to wait for every process to join (JAX's
                      ``initialization_timeout``); unset, JAX's default.
    local_device_ids: the devices of its node each process uses; unset, all it sees
                      (each worker sees its own GPU or MIG partition already).
    """
    check_jax_options(timeout, local_device_ids, "distributed.jax")
    ids = None if local_device_ids is None else tuple(local_device_ids)
    return decorator(JaxLauncher(timeout=timeout, local_device_ids=ids))
