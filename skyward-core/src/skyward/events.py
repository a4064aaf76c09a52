"""The events a pool emits over its lifetime.

Every event is a small frozen value: callbacks may keep them, share them across threads
and ``match`` on them. Their fields are a stable API: new ones come last, with
defaults. The phases are:

* provision: ``InfraCreating`` -> ``InfraCreated`` -> ``InstanceLaunching`` ->
  ``InstanceProvisioned`` (one per instance); a pool with several candidates says
  ``CandidateFailed`` for each one that could not provide it, and starts over with the next
* setup: ``BootstrapStarting`` -> ``BootstrapProgress``\\* -> ``BootstrapCompleted``
  (per instance), then ``PoolStarted`` once every node is ready
* execute: ``LogLine``, ``Metrics``, ``TaskProgress``, ``CostUpdate``
* shutdown: ``PoolStopping`` -> ``InstanceStopping`` (per instance) -> ``CostFinal``
* any time: ``Error``, ``Notice``, ``InstanceInterrupted``; a pool that changes size
  (elastic, or healing a lost node): ``NodeAdded``, ``NodeRemoved``, ``PoolResized``

Three events exist because a live display cannot be drawn without
them: ``TaskProgress`` (how many tasks are done), ``InstanceInterrupted`` (a spot
instance was reclaimed) and ``Notice`` (an informational message, such as a spot request
that fell back to on-demand). ``CandidateFailed`` is a fourth, for failover; and
``CostUpdate``/``CostFinal`` gained ``provider`` and ``region`` (last, with defaults).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeGuard, get_args

KnownProviderName: TypeAlias = Literal["aws", "digitalocean", "verda", "local"]
"""The providers Skyward ships."""

ProviderName: TypeAlias = str
"""A provider's short name: one of ``KnownProviderName`` for the providers Skyward ships.

Typed as ``str`` rather than the ``Literal`` because plugins register providers of their
own, and their events must type-check too.
"""

BootstrapStep: TypeAlias = str
"""A bootstrap step's name: "uv", "apt", "deps", "skyward", "server", "volumes", or a
step a plugin contributes."""


# --- provision phase ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InfraCreating:
    """The provider is preparing shared infrastructure (network, key, security group)."""


@dataclass(frozen=True, slots=True)
class InfraCreated:
    """Shared infrastructure is ready in ``region``."""

    region: str
    """The region the pool's shared resources were made in."""


@dataclass(frozen=True, slots=True)
class InstanceLaunching:
    """``count`` instances of ``instance_type`` were requested from ``provider``."""

    count: int
    """How many instances are being launched."""
    instance_type: str
    """The machine type launched."""
    provider: ProviderName
    """The provider's name."""


@dataclass(frozen=True, slots=True)
class InstanceProvisioned:
    """An instance exists and has been given its node index.

    ``price_on_demand`` and ``price_spot`` are hourly prices in USD, ``None`` where the
    provider does not know them (``0.0`` for the Local provider).
    """

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""
    node: int
    """The node's index in the pool, from 0."""
    spot: bool
    """Whether the instance runs on the spot market."""
    provider: ProviderName
    """The provider's name."""
    ip: str | None
    """The address the client reaches the node at, or ``None`` before it has one."""
    instance_type: str | None
    """The machine type, or ``None`` where the provider does not say."""
    price_on_demand: float | None
    """On-demand price, USD per hour, or ``None`` where unknown."""
    price_spot: float | None
    """Spot price, USD per hour, or ``None`` (on demand, or unknown)."""


@dataclass(frozen=True, slots=True)
class CandidateFailed:
    """A candidate of the pool could not provide it, for a reason another candidate may
    not share; everything it made was removed, and the pool tries
    the next one. ``candidate`` is its index in ``ComputePool(provider=[...])``,
    ``reason`` the kind (``"capacity"``, ``"quota"``, ``"no offer"``, ``"price cap"``,
    ``"launch timeout"``) and ``message`` the provider's words."""

    candidate: int
    """The candidate's index in ``ComputePool(provider=[...])``, from 0."""
    provider: ProviderName
    """The candidate's provider name."""
    region: str | None
    """The candidate's region, or ``None`` where it names none."""
    reason: str
    """The kind of failure: ``"capacity"``, ``"quota"``, ``"no offer"``, ``"price cap"`` or ``"launch timeout"``."""
    message: str
    """The provider's words."""


# --- setup phase ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BootstrapStarting:
    """The instance started running its bootstrap script."""

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""


@dataclass(frozen=True, slots=True)
class BootstrapProgress:
    """The instance's bootstrap entered ``step`` (see ``BootstrapStep``)."""

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""
    step: BootstrapStep
    """The step the bootstrap reached (``ttl``, ``apt``, ``deps``, ``server``, ...)."""


@dataclass(frozen=True, slots=True)
class BootstrapCompleted:
    """The instance's agent is up and serving."""

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""


@dataclass(frozen=True, slots=True)
class PoolStarted:
    """Every node is ready: the pool accepts computations."""


# --- execute phase --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Metrics:
    """A node's resource usage sample. GPU fields are ``None`` on nodes without one.

    ``cpu`` and ``gpu`` are read-only aliases of ``cpu_percent`` and
    ``gpu_utilization``, so the short form used in the docs
    (``case Metrics(cpu=cpu, gpu=gpu)``) matches too.
    """

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""
    node: int
    """The node's index in the pool, from 0."""
    cpu_percent: float
    """CPU use of the node, percent."""
    memory_percent: float
    """Memory in use, percent of the total."""
    memory_used_mb: float
    """Memory in use, MB."""
    memory_total_mb: float
    """The node's memory, MB."""
    gpu_utilization: float | None
    """GPU use, percent (the mean over the node's NVIDIA GPUs), or ``None`` without a GPU."""
    gpu_memory_used_mb: float | None
    """GPU memory in use, MB (summed over the node's GPUs), or ``None`` without a GPU."""
    gpu_memory_total_mb: float | None
    """GPU memory, MB (summed over the node's GPUs), or ``None`` without a GPU."""
    gpu_temperature: float | None
    """The hottest GPU's temperature, degrees Celsius, or ``None`` without a GPU."""

    @property
    def cpu(self) -> float:
        """``cpu_percent``, by its short name."""
        return self.cpu_percent

    @property
    def gpu(self) -> float | None:
        """``gpu_utilization``, by its short name."""
        return self.gpu_utilization


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line a task wrote to stdout or stderr on ``node``; ``timestamp`` is epoch
    seconds on the node."""

    node: int
    """The node's index in the pool, from 0."""
    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""
    line: str
    """The line, without its line end."""
    timestamp: float
    """When the node read it, epoch seconds on the node."""


@dataclass(frozen=True, slots=True)
class TaskProgress:
    """Task counters of the pool, emitted whenever a task finishes.

    ``submitted`` counts every task sent so far, ``done`` those that returned and
    ``failed`` those that raised; ``submitted - done - failed`` are queued or running.
    """

    done: int
    """Tasks that returned a result."""
    submitted: int
    """Tasks sent so far."""
    failed: int
    """Tasks that raised."""

    @property
    def running(self) -> int:
        """Tasks sent and not yet finished."""
        return max(self.submitted - self.done - self.failed, 0)


# --- shutdown phase -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoolStopping:
    """The pool is shutting down: no new computations are accepted."""


@dataclass(frozen=True, slots=True)
class InstanceStopping:
    """The instance is being terminated."""

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""


# --- cost -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CostUpdate:
    """Running cost estimate in USD, emitted periodically while the pool is up."""

    elapsed_seconds: float
    """Seconds since the pool was ready."""
    accumulated_cost: float
    """USD spent so far."""
    hourly_rate: float
    """The pool's price now, USD per hour."""
    spot_count: int
    """Nodes on spot."""
    ondemand_count: int
    """Nodes on demand."""
    provider: ProviderName = ""
    """The provider's name."""
    region: str = ""
    """The pool's region."""


@dataclass(frozen=True, slots=True)
class CostFinal:
    """Cost of the pool's whole life in USD.

    ``savings_vs_ondemand`` is what the same instances would have cost on-demand for the
    same time, minus ``total_cost``.
    """

    total_cost: float
    """USD the pool cost, from ready to stopped."""
    total_seconds: float
    """Seconds from ready to stopped."""
    hourly_rate: float
    """The pool's price, USD per hour."""
    spot_count: int
    """Nodes that ran on spot."""
    ondemand_count: int
    """Nodes that ran on demand."""
    savings_vs_ondemand: float
    """USD saved against running every node on demand."""
    provider: ProviderName = ""
    """The provider's name."""
    region: str = ""
    """The pool's region."""


# --- anytime --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Error:
    """Something failed; ``instance_id`` names the instance when one is concerned."""

    message: str
    """What went wrong, in words."""
    instance_id: str | None
    """The instance it concerns, or ``None`` for the pool."""


@dataclass(frozen=True, slots=True)
class InstanceInterrupted:
    """The provider reclaimed a spot instance.

    ``reason`` is the provider's notice in words, e.g. "spot capacity reclaimed".
    """

    instance_id: str
    """The provider's id of the instance (on Local, ``local-<pool id>-<node>``)."""
    node: int
    """The node's index in the pool, from 0."""
    reason: str
    """Why, in the provider's words (a spot reclaim notice)."""


@dataclass(frozen=True, slots=True)
class Notice:
    """Something worth telling the user that is not an error,
    e.g. "spot unavailable on DigitalOcean: running on-demand"."""

    message: str
    """What to tell the user."""


# --- a pool that changes size --------------------------------------------------------


NodeChange: TypeAlias = Literal["scale-up", "scale-down", "replacement", "lost", "reclaimed", "resize"]
"""Why a node joined or left a running pool: the autoscaler grew or shrank it
(``scale-up``/``scale-down``), ``pool.resize(n)`` asked (``resize``), a node was lost
(``lost``: its agent went silent, its process exited, the cloud says it is gone) or its
spot instance was reclaimed (``reclaimed``), and a ``replacement`` took a lost node's
place."""


@dataclass(frozen=True, slots=True)
class NodeAdded:
    """A node joined the running pool (its agent answered the handshake) and takes work
    (an addition to the original events: elastic and self-healing pools)."""

    node: int
    """The node's index (a replacement takes the index of the node it replaces)."""
    instance_id: str
    """The provider's id of the new instance."""
    reason: NodeChange
    """Why: ``"scale-up"``, ``"resize"`` or ``"replacement"`` (a lost node's index taken again)."""


@dataclass(frozen=True, slots=True)
class NodeRemoved:
    """A node left the running pool: drained first when it was a scale-down (no task is
    lost to it), or lost (its tasks run again elsewhere, see ``sky.compute(retries=)``)."""

    node: int
    """The node's index."""
    instance_id: str
    """The instance that left (deleted by the pool)."""
    reason: NodeChange
    """Why: ``"scale-down"``, ``"resize"``, ``"lost"`` or ``"reclaimed"``."""


@dataclass(frozen=True, slots=True)
class PoolResized:
    """The pool's desired node count changed (autoscaler, ``pool.resize``): ``current`` is
    how many nodes are live when it was decided, ``desired`` what the pool now works
    towards."""

    desired: int
    """The node count the pool now works towards."""
    current: int
    """Live nodes when it was decided."""
    reason: NodeChange
    """Why: ``"scale-up"``, ``"scale-down"`` (the autoscaler) or ``"resize"`` (``pool.resize``)."""


SkywardEvent: TypeAlias = (
    InfraCreating
    | InfraCreated
    | InstanceLaunching
    | InstanceProvisioned
    | CandidateFailed
    | BootstrapStarting
    | BootstrapProgress
    | BootstrapCompleted
    | PoolStarted
    | Metrics
    | LogLine
    | TaskProgress
    | PoolStopping
    | InstanceStopping
    | CostUpdate
    | CostFinal
    | Error
    | InstanceInterrupted
    | Notice
    | NodeAdded
    | NodeRemoved
    | PoolResized
)
"""Any event Skyward emits."""

EVENT_TYPES: tuple[type, ...] = get_args(SkywardEvent)
"""Every event class, for ``isinstance`` checks at run time."""


def is_event(value: object) -> TypeGuard[SkywardEvent]:
    """Whether ``value`` is one of Skyward's events."""
    return isinstance(value, EVENT_TYPES)


__all__ = [
    "EVENT_TYPES",
    "BootstrapCompleted",
    "BootstrapProgress",
    "BootstrapStarting",
    "BootstrapStep",
    "CandidateFailed",
    "CostFinal",
    "CostUpdate",
    "Error",
    "InfraCreated",
    "InfraCreating",
    "InstanceInterrupted",
    "InstanceLaunching",
    "InstanceProvisioned",
    "InstanceStopping",
    "KnownProviderName",
    "LogLine",
    "Metrics",
    "NodeAdded",
    "NodeChange",
    "NodeRemoved",
    "Notice",
    "PoolResized",
    "PoolStarted",
    "PoolStopping",
    "ProviderName",
    "SkywardEvent",
    "TaskProgress",
    "is_event",
]
