"""``distributed.torch``: a torch.distributed process group across the pool's workers.

Each worker slot is one rank (``RANK`` = ``instance_info().rank``). Before the user's
function runs, rank 0 opens this call's TCPStore on a fresh port and announces it through
the head's port (``instance_info().head_port``, which the pool picked and sent with the
cluster information); every rank then exports torchrun's variables (``MASTER_ADDR``,
``MASTER_PORT`` (the store's port), ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``NODE_RANK``) and joins ``init_process_group`` through that store.
Afterwards, raise or not, it destroys the group and restores the environment, so the
next call in the same long-lived worker process builds a new group from scratch.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from skyward.distributed.backends.base import DistributedDecorator, decorator
from skyward.distributed.backends.env import head_endpoint, process_group_env, scoped_environ
from skyward.distributed.backends.frameworks import require
from skyward.distributed.backends.rendezvous import exchange
from skyward.errors import ConfigurationError
from skyward.runtime.context import InstanceInfo

TorchBackendName = Literal["nccl", "gloo"]
BACKENDS: tuple[str, ...] = ("nccl", "gloo")
TORCH_PIP = ("torch",)
# seconds every rank waits for the others to join when no timeout is given
DEFAULT_JOIN_TIMEOUT = 300.0


def check_options(backend: str | None, timeout: float | None, where: str) -> None:
    """Reject options that cannot work, on the client, before anything is sent."""
    if backend is not None and backend not in BACKENDS:
        raise ConfigurationError(
            f"{where}(backend={backend!r}): use 'nccl' (NVIDIA GPUs) or 'gloo' (CPU), "
            "or leave it unset to pick nccl when the node has a GPU and gloo otherwise"
        )
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"{where}(timeout={timeout!r}): must be a positive number of seconds")


def resolve_backend(requested: str | None, gpus: int, workers_per_node: int, where: str) -> str:
    """The backend to initialise on this node: the requested one, checked against the
    hardware, or nccl/gloo by whether every worker of the node has a CUDA GPU of its own.

    NCCL refuses two ranks on one GPU ("Duplicate GPU detected", seen with NCCL 2.28 on
    an H100 when two workers shared it), so nccl needs ``gpus >= workers_per_node``:
    unset, fewer GPUs than workers picks gloo (which works on shared or no GPUs); asked
    for, it is a ``ConfigurationError`` that says how to fix it.
    """
    if requested is None:
        return "nccl" if gpus > 0 and gpus >= workers_per_node else "gloo"
    if requested == "nccl" and gpus == 0:
        raise ConfigurationError(
            f"{where}(backend='nccl') needs an NVIDIA GPU, and torch sees none on this node "
            "(torch.cuda.is_available() is False): use backend='gloo' on CPU nodes, or "
            "give the pool an accelerator"
        )
    if requested == "nccl" and gpus < workers_per_node:
        raise ConfigurationError(
            f"{where}(backend='nccl') needs one GPU per worker, and this node runs "
            f"{workers_per_node} workers on {gpus} GPU{'s' if gpus != 1 else ''} (NCCL refuses two "
            f"ranks on one GPU): use concurrency={gpus} or fewer, an accelerator with "
            f"{workers_per_node} GPUs per node, or backend='gloo'"
        )
    return requested


def _open_store(dist: ModuleType, info: InstanceInfo, timeout: datetime.timedelta, where: str) -> tuple[Any, int]:
    """This call's TCPStore and its port: rank 0 opens it on a fresh port and announces
    the port through a rendezvous at the head's port; the other ranks connect to it."""
    addr, head_port = head_endpoint(info, where.removeprefix("distributed."))
    store = None
    record: dict[str, Any] = {}
    if info.rank == 0:
        # port 0: the OS picks a free one; wait_for_workers=False: they connect below
        store = dist.TCPStore(addr, 0, info.world_size, True, timeout=timeout, wait_for_workers=False)
        record = {"store_port": int(store.port)}
    peers = exchange(
        head_addr=addr,
        head_port=head_port,
        rank=info.rank,
        world_size=info.world_size,
        job_id=info.job_id,
        record=record,
        timeout=timeout.total_seconds(),
    )
    port = int(peers[0].record["store_port"])
    if store is None:
        store = dist.TCPStore(addr, port, info.world_size, False, timeout=timeout)
    return store, port


@contextmanager
def process_group(
    info: InstanceInfo,
    requested: str | None,
    timeout: float | None,
    where: str,
    pip: tuple[str, ...] = TORCH_PIP,
) -> Iterator[ModuleType]:
    """torch.distributed initialised for this worker slot for the block; yields the
    ``torch.distributed`` module. Shared by ``distributed.torch`` and
    ``distributed.transformers``.

    Each call gets a store of its own, on a port rank 0 picks and announces through the
    head's port. Reusing one port for every call does not work: once DDP has used a
    process group, torch keeps its store's server alive in rank 0's process after
    ``destroy_process_group`` (a reference held in C++), and the next call's
    ``init_process_group`` on that port would share that server (torch's stores are
    multi-tenant) and read the previous call's keys: peers' stale addresses.
    """
    name = where.removeprefix("distributed.")
    torch = require("torch", backend=name, pip=pip)
    dist = require("torch.distributed", backend=name, pip=pip)
    if not dist.is_available():
        raise ConfigurationError(f"{where}: this build of torch has no torch.distributed support")
    gpus = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    backend = resolve_backend(requested, gpus, info.workers_per_node, where)
    process_group_env(info, name)  # checks the cluster information before anything opens
    if dist.is_initialized():
        # Left behind by an earlier call's own init_process_group: its peers are gone,
        # and a second init in the same process would fail.
        warnings.warn(
            f"{where}: a process group from an earlier call was still initialised in "
            "this worker; it was destroyed before starting the new one",
            RuntimeWarning,
            stacklevel=2,
        )
        dist.destroy_process_group()
    wait = datetime.timedelta(seconds=timeout if timeout is not None else DEFAULT_JOIN_TIMEOUT)
    store, port = _open_store(dist, info, wait, where)
    with scoped_environ(process_group_env(info, name, master_port=port)):
        if backend == "nccl":
            # one GPU per local rank (resolve_backend checked there are enough)
            torch.cuda.set_device(info.worker)
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs["timeout"] = datetime.timedelta(seconds=timeout)
        dist.init_process_group(backend=backend, store=store, rank=info.rank, world_size=info.world_size, **kwargs)
        try:
            # init_process_group returns on a rank once *its* connections are up, not
            # everyone's: a rank whose function ends at once would destroy its group
            # while a peer is still connecting to it. After a barrier every rank has
            # finished initialising.
            dist.barrier()
            yield dist
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            del store


@dataclass(frozen=True, slots=True)
class TorchLauncher:
    """The launcher behind ``distributed.torch(backend=..., timeout=...)``."""

    backend: str | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        check_options(self.backend, self.timeout, "distributed.torch")

    @property
    def name(self) -> str:
        return "torch"

    @contextmanager
    def session(self, info: InstanceInfo) -> Iterator[None]:
        with process_group(info, self.backend, self.timeout, "distributed.torch"):
            yield


def torch(backend: TorchBackendName | None = None, *, timeout: float | None = None) -> DistributedDecorator:
    """``@distributed.torch(backend="gloo")``: run the function inside a torch.distributed
    process group spanning every worker of the pool.

    backend: ``"nccl"`` (NVIDIA GPUs) or ``"gloo"`` (CPU); unset, each node picks nccl
             when torch sees a CUDA GPU and gloo otherwise.
    timeout: seconds collectives (and the initial rendezvous) wait for peers before
             failing; unset, torch's default.
    """
    return decorator(TorchLauncher(backend=backend, timeout=timeout))
