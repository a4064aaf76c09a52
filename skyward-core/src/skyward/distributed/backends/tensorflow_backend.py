"""``distributed.tensorflow``: ``TF_CONFIG`` for ``tf.distribute.MultiWorkerMirroredStrategy``.

``TF_CONFIG`` names every worker's ``host:port`` and this worker's index. Worker slots
are ranks (index = ``instance_info().rank``, worker 0 is the chief); the addresses come
from a rendezvous at the head (:mod:`.rendezvous`), since a worker knows only the
head's address; each worker process picks its TensorFlow port once and keeps it.

TensorFlow starts an in-process server when a strategy is created, and a process can
never leave the cluster it joined: a later strategy with another cluster spec hangs in
its first collective. Keeping each worker's port for the life of its process keeps the
cluster spec identical across calls, so successive calls work; if it does change (a
worker of the pool was restarted) the call fails at once with that explanation instead
of hanging.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from skyward.distributed.backends.base import DistributedDecorator, decorator
from skyward.distributed.backends.env import head_endpoint, scoped_environ
from skyward.distributed.backends.frameworks import require
from skyward.distributed.backends.rendezvous import Peer, exchange
from skyward.errors import ConfigurationError, SkywardError
from skyward.runtime.context import InstanceInfo

TENSORFLOW_PIP = ("tensorflow",)
DEFAULT_RENDEZVOUS_TIMEOUT = 300.0

# Per worker process: the port its TensorFlow server uses, and the cluster it joined.
_own_port: int | None = None
_joined_cluster: tuple[str, ...] | None = None


class ClusterChangedError(SkywardError):
    """TensorFlow in this worker already joined a different cluster."""


def check_timeout(timeout: float | None, where: str) -> None:
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"{where}(timeout={timeout!r}): must be a positive number of seconds")


def tf_config(workers: Sequence[str], index: int) -> dict[str, Any]:
    """The ``TF_CONFIG`` of worker ``index`` in a cluster of ``workers`` (``host:port``)."""
    if not 0 <= index < len(workers):
        raise ValueError(f"worker index {index} is not in a cluster of {len(workers)}")
    return {"cluster": {"worker": list(workers)}, "task": {"type": "worker", "index": index}}


def worker_addresses(peers: Sequence[Peer]) -> list[str]:
    """``host:port`` of every peer, in rank order (IPv6 hosts bracketed)."""
    addresses = []
    for peer in sorted(peers, key=lambda p: p.rank):
        host = f"[{peer.addr}]" if ":" in peer.addr else peer.addr
        addresses.append(f"{host}:{int(peer.record['port'])}")
    return addresses


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _tensorflow_joined_a_cluster() -> bool:
    """Whether TensorFlow in this process has started its collective server."""
    if "tensorflow" not in sys.modules:
        return False
    try:
        from tensorflow.python.eager import context  # noqa: PLC0415  # heavy, optional

        return context.context()._collective_ops_server_def is not None
    except (ImportError, AttributeError):
        return True  # cannot tell: assume it did, which only makes the check stricter


@contextmanager
def tf_cluster(info: InstanceInfo, timeout: float | None, backend: str = "tensorflow") -> Iterator[dict[str, Any]]:
    """``TF_CONFIG`` set for this worker slot for the block; yields the config."""
    global _own_port, _joined_cluster
    addr, port = head_endpoint(info, backend)
    if _own_port is None:
        _own_port = _free_port()
    peers = exchange(
        head_addr=addr,
        head_port=port,
        rank=info.rank,
        world_size=info.world_size,
        job_id=info.job_id,
        record={"port": _own_port},
        timeout=timeout or DEFAULT_RENDEZVOUS_TIMEOUT,
    )
    workers = worker_addresses(peers)
    if _joined_cluster is not None and tuple(workers) != _joined_cluster:
        raise ClusterChangedError(
            f"distributed.{backend}: TensorFlow in this worker joined the cluster "
            f"{list(_joined_cluster)} in an earlier call and cannot leave it, but the "
            f"pool's workers are now {workers} (a worker was restarted?); TensorFlow "
            "cannot switch clusters within a process: run this on a new pool"
        )
    config = tf_config(workers, info.rank)
    try:
        with scoped_environ({"TF_CONFIG": json.dumps(config)}):
            yield config
    finally:
        if _tensorflow_joined_a_cluster():
            _joined_cluster = tuple(workers)


@dataclass(frozen=True, slots=True)
class TensorFlowLauncher:
    """The launcher behind ``distributed.tensorflow(timeout=...)``."""

    timeout: float | None = None

    def __post_init__(self) -> None:
        check_timeout(self.timeout, "distributed.tensorflow")

    @property
    def name(self) -> str:
        return "tensorflow"

    @contextmanager
    def session(self, info: InstanceInfo) -> Iterator[None]:
        # checked before the rendezvous: a node without TensorFlow fails the call at
        # once, naming the package, instead of after its peers have waited for it
        require("tensorflow", backend=self.name, pip=TENSORFLOW_PIP)
        with tf_cluster(info, self.timeout):
            yield


def tensorflow(*, timeout: float | None = None) -> DistributedDecorator:
    """``@distributed.tensorflow()``: ``TF_CONFIG`` is set on every worker of the pool, so a
    ``tf.distribute.MultiWorkerMirroredStrategy()`` created in the function spans them all.

    timeout: seconds every worker waits for the others to report their addresses;
             unset, 300.
    """
    check_timeout(timeout, "distributed.tensorflow")
    return decorator(TensorFlowLauncher(timeout=timeout))
