"""What one node must hold, and the smallest machine type that holds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from skyward.accelerators.spec import Accelerator
from skyward.instances import InstanceType, NoMatchingInstanceError, select_instance
from skyward.providers.spec import PoolSpec
from skyward.units import MIB

__all__ = ["NodeSize", "node_request"]


@dataclass(frozen=True, slots=True)
class NodeSize:
    """One node of a pool, as every provider sizes it: its accelerator, vCPUs and memory
    (bytes) for all the workers it runs, and any machine type the user named."""

    accelerator: Accelerator | str | None = None
    cpu: int | None = None
    memory: int | None = None
    machine: str | None = None

    def select(self, instances: Iterable[InstanceType]) -> InstanceType:
        """The smallest of ``instances`` that holds the node (``select_instance``'s rules;
        ``NoMatchingInstanceError`` naming what was asked when none does)."""
        return select_instance(
            instances, accelerator=self.accelerator, cpu=self.cpu, memory=self.memory, machine=self.machine
        )

    def fits(self, instance: InstanceType) -> bool:
        try:
            self.select([instance])
        except NoMatchingInstanceError:
            return False
        return True

    def describe(self) -> str:
        """What was asked, for messages: ``accelerator=H100, cpu=8``."""
        return ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self).items() if v is not None) or "any machine"


def node_request(spec: PoolSpec) -> NodeSize:
    """One node of ``spec``: the per-worker cpu and memory times the workers it runs, its
    accelerator and any machine the user named."""
    workers = spec.workers_per_node
    return NodeSize(
        accelerator=spec.accelerator,
        cpu=spec.cpu * workers if spec.cpu is not None else None,
        memory=spec.memory_mb * MIB * workers if spec.memory_mb is not None else None,
        machine=spec.machine,
    )
