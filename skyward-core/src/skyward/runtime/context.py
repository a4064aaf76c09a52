"""The worker's view of the pool: set once by the worker process, read by user code."""

from __future__ import annotations

from dataclasses import dataclass, field

from skyward.errors import NotInComputationError


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    """Where the current computation runs.

    ``rank`` and ``world_size`` count worker slots across the pool: worker ``w`` of node
    ``n`` has rank ``n * workers_per_node + w``.
    """

    node: int
    total_nodes: int
    accelerators: list[str] = field(default_factory=list)
    head_addr: str = "127.0.0.1"
    head_port: int = 0
    job_id: str = ""
    worker: int = 0
    workers_per_node: int = 1

    @property
    def is_head(self) -> bool:
        return self.node == 0

    @property
    def rank(self) -> int:
        return self.node * self.workers_per_node + self.worker

    @property
    def world_size(self) -> int:
        return self.total_nodes * self.workers_per_node


_current: InstanceInfo | None = None


def set_instance_info(info: InstanceInfo | None) -> None:
    """Called by the worker process at start-up (and by tests)."""
    global _current
    _current = info


def instance_info() -> InstanceInfo:
    """The :class:`InstanceInfo` of the worker running this computation.

    Raises :class:`NotInComputationError` when called outside a computation, e.g. in the
    client or through ``fn.local(...)``.
    """
    if _current is None:
        raise NotInComputationError(
            "instance_info() is only available inside a computation running on a pool "
            "(fn(...) >> pool); it was called outside one"
        )
    return _current


def current_accelerator() -> str | None:
    """The accelerator of the node running this computation, or ``None`` when it has none.

    Outside a computation it raises :class:`NotInComputationError`, like ``instance_info``.
    """
    accs = instance_info().accelerators
    return accs[0] if accs else None
