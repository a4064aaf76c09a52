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
    """A pool's parameters, validated: what a provider is asked to provide (``ComputePool``
    builds it; ``pool.spec`` shows it)."""

    provider: object  # the provider's config (Local(), AWS(...)); its driver knows the type
    """The provider's configuration (``Local()``, ``AWS(...)``)."""
    image: Image
    """The nodes' environment."""
    nodes: int = 1  # launched at start: the desired count (0 for a pool born empty)
    """The nodes launched at start: the desired count (0 for a pool born empty)."""
    machine: str | None = None
    """An instance type by name, bypassing selection, or ``None``."""
    accelerator: Accelerator | None = None
    """The accelerator each node has, or ``None`` for CPU nodes."""
    cpu: int | None = None
    """Minimum vCPUs per worker, or ``None``."""
    memory_mb: int | None = None
    """Minimum memory per worker, MB, or ``None``."""
    volumes: tuple[object, ...] = ()
    """Volumes mounted on every node."""
    spot: SpotStrategy | None = None  # None: the provider's default
    """The spot strategy; ``None``: the provider's default."""
    timeout: float = 3600.0
    """Seconds the pool may live."""
    concurrency: int = 1
    """Worker processes per accelerator partition on each node."""
    display: str = "log"
    """``"log"``, ``"spinner"`` or ``"quiet"``."""
    collect_metrics: bool = True
    """Whether nodes report metrics."""
    partitions: int = 1
    """Accelerator partitions per node (MIG), 1 without."""
    max_hourly_cost: float | None = None  # USD per hour for the whole pool; None: no cap
    """USD per hour for the whole pool, or ``None``: no cap."""
    pool_id: str = field(default_factory=lambda: "sky-" + secrets.token_hex(4))
    """The pool's id (``sky-`` and 8 hex digits), in every resource's name and tags."""
    scaling: Nodes | None = None  # how far the pool may grow and shrink; None: ``nodes``, fixed
    """How far the pool may grow and shrink; ``None``: a fixed pool of ``nodes``."""
    name: str = ""  # what `skyward ls` and `sky.attach` call it; the pool id when not given
    """The pool's name for ``skyward ls``, ``skyward logs`` and ``sky.attach`` (its pool id when not given)."""
    keep_alive: float | None = None  # seconds the nodes stay with no client attached; None: not kept
    """Seconds a kept pool's nodes stay up with no client attached; ``None``: the pool ends with its client."""

    @property
    def kept(self) -> bool:
        """Whether the nodes outlive the client that opened the pool (``keep_alive`` given)."""
        return self.keep_alive is not None

    @property
    def label(self) -> str:
        """The pool's name, or its id when it has none."""
        return self.name or self.pool_id

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
        """Worker processes in the whole pool: what ``@`` runs once each."""
        return self.nodes * self.workers_per_node
