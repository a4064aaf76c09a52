"""``PoolSpec``: the validated pool request every driver method receives.

``skyward.api.spec.build_spec`` makes it from the ComputePool parameters (checked once,
before anything is provisioned); a driver only reads it. It is not ``sky.Spec``: that is
the user's description of one *candidate* of a pool (a provider config, an accelerator,
nodes: see ``ComputePool(provider=[sky.Spec(...), ...])``), and a pool with several
candidates gives each driver the ``PoolSpec`` of the candidate it launches.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyward.image import Image
from skyward.scaling import Nodes

if TYPE_CHECKING:
    from skyward.accelerators.spec import Accelerator
    from skyward.scaling import Nodes
    from skyward.spot import SpotStrategy


@dataclass(frozen=True, slots=True)
class PoolSpec:
    provider: object  # the provider's config (Local(), AWS(...)); its driver knows the type
    image: Image
    nodes: int = 1  # launched at start: the desired count (0 for a pool born empty)
    machine: str | None = None
    accelerator: Accelerator | None = None
    cpu: int | None = None
    memory_mb: int | None = None
    volumes: tuple[object, ...] = ()
    spot: SpotStrategy | None = None  # None: the provider's default
    timeout: float = 3600.0
    concurrency: int = 1
    display: str = "log"
    collect_metrics: bool = True
    partitions: int = 1
    max_hourly_cost: float | None = None  # USD per hour for the whole pool; None: no cap
    pool_id: str = field(default_factory=lambda: "sky-" + secrets.token_hex(4))
    scaling: Nodes | None = None  # how far the pool may grow and shrink; None: ``nodes``, fixed

    @property
    def max_nodes(self) -> int:
        """The most nodes the pool may have at once (what a provider's capacity checks hold
        against): ``scaling.ceiling``, or ``nodes`` for a fixed pool."""
        return self.scaling.ceiling if self.scaling is not None else self.nodes

    @property
    def workers_per_node(self) -> int:
        """Worker processes per node: accelerator partitions (MIG) times concurrency."""
        return self.partitions * self.concurrency

    @property
    def total_workers(self) -> int:
        return self.nodes * self.workers_per_node
