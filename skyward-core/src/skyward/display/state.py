"""What the console display knows, reduced from events by a pure function.

``reduce(state, event)`` returns a new ``DisplayState`` and never touches the console,
so every display shares it and tests can drive it with plain event lists. Events about
an instance the state has not seen provisioned are ignored (apart from the phase): a
display must survive events out of order or from a plugin that skips some.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from skyward.events import (
    BootstrapCompleted,
    BootstrapProgress,
    BootstrapStarting,
    CostFinal,
    CostUpdate,
    Error,
    InfraCreated,
    InfraCreating,
    InstanceInterrupted,
    InstanceLaunching,
    InstanceProvisioned,
    InstanceStopping,
    Metrics,
    NodeAdded,
    NodeRemoved,
    Notice,
    PoolResized,
    PoolStarted,
    PoolStopping,
    SkywardEvent,
    TaskProgress,
)

Phase: TypeAlias = Literal["starting", "provisioning", "bootstrapping", "ready", "stopping", "stopped"]
NodeStatus: TypeAlias = Literal["launching", "bootstrapping", "ready", "interrupted", "stopping"]

# Phases only move forward: a replacement node bootstrapping while the pool runs does
# not send the pool back to "bootstrapping".
_PHASE_ORDER: tuple[Phase, ...] = (
    "starting",
    "provisioning",
    "bootstrapping",
    "ready",
    "stopping",
    "stopped",
)

_NO_TASKS = TaskProgress(done=0, submitted=0, failed=0)

MAX_NOTICES = 3
"""Notices kept for the view; older ones have already been printed above it."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """One instance as the display shows it."""

    instance_id: str
    node: int
    status: NodeStatus = "launching"
    step: str | None = None
    spot: bool = False
    instance_type: str | None = None
    ip: str | None = None
    hourly_price: float | None = None
    metrics: Metrics | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class DisplayState:
    """The pool as the display shows it; ``nodes`` is sorted by node index."""

    phase: Phase = "starting"
    provider: str | None = None
    region: str | None = None
    instance_type: str | None = None
    requested: int = 0
    nodes: tuple[NodeView, ...] = ()
    tasks: TaskProgress = _NO_TASKS
    cost: CostUpdate | None = None
    final: CostFinal | None = None
    errors: int = 0
    last_error: str | None = None
    notices: tuple[str, ...] = ()
    desired: int | None = None  # the count a pool that changes size works towards (PoolResized)

    def node_of(self, instance_id: str | None) -> NodeView | None:
        """The node running ``instance_id``, if provisioned."""
        for view in self.nodes:
            if view.instance_id == instance_id:
                return view
        return None

    @property
    def waiting(self) -> int:
        """Instances requested but not provisioned yet."""
        return max(self.requested - len(self.nodes), 0)

    @property
    def ready_nodes(self) -> int:
        """Nodes whose agents answered and that take work."""
        return sum(1 for view in self.nodes if view.status == "ready")

    @property
    def why_tasks_wait(self) -> str | None:
        """Why submitted tasks make no progress, when the pool has no node to run them: a
        pool at zero starts one (elastic) or waits for a lost node's replacement."""
        if self.phase != "ready" or self.tasks.running == 0 or self.ready_nodes > 0:
            return None
        tasks = f"{self.tasks.running} task{'s' if self.tasks.running != 1 else ''}"
        if self.desired == 0:
            return f"{tasks} wait: the pool is at 0 nodes and scales up on its next decision"
        return f"{tasks} wait for a node: the pool has none ready and is starting one"


def _advance(state: DisplayState, phase: Phase) -> DisplayState:
    if _PHASE_ORDER.index(phase) > _PHASE_ORDER.index(state.phase):
        return replace(state, phase=phase)
    return state


def _with_node(state: DisplayState, view: NodeView) -> DisplayState:
    others = [n for n in state.nodes if n.instance_id != view.instance_id]
    nodes = tuple(sorted([*others, view], key=lambda n: (n.node, n.instance_id)))
    return replace(state, nodes=nodes)


def _update_node(state: DisplayState, instance_id: str | None, **changes: object) -> DisplayState:
    view = state.node_of(instance_id)
    if view is None:
        return state
    return _with_node(state, replace(view, **changes))  # type: ignore[arg-type]


def _provisioned(state: DisplayState, event: InstanceProvisioned) -> DisplayState:
    price = event.price_spot if event.spot else event.price_on_demand
    known = state.node_of(event.instance_id)
    base = known if known is not None else NodeView(event.instance_id, event.node)
    view = replace(
        base,
        node=event.node,
        spot=event.spot,
        instance_type=event.instance_type,
        ip=event.ip,
        hourly_price=price,
    )
    state = _with_node(state, view)
    if state.provider is None:
        state = replace(state, provider=event.provider)
    return _advance(state, "provisioning")


def reduce(state: DisplayState, event: SkywardEvent) -> DisplayState:
    """The state after ``event``. Pure: same inputs, same output, no side effects."""
    match event:
        case InfraCreating():
            return _advance(state, "provisioning")
        case InfraCreated(region=region):
            return _advance(replace(state, region=region), "provisioning")
        case InstanceLaunching(count=count, instance_type=itype, provider=provider):
            state = replace(
                state,
                requested=state.requested + count,
                instance_type=itype,
                provider=provider,
            )
            return _advance(state, "provisioning")
        case InstanceProvisioned():
            return _provisioned(state, event)
        case BootstrapStarting(instance_id=iid):
            state = _update_node(state, iid, status="bootstrapping", step=None)
            return _advance(state, "bootstrapping")
        case BootstrapProgress(instance_id=iid, step=step):
            state = _update_node(state, iid, status="bootstrapping", step=step)
            return _advance(state, "bootstrapping")
        case BootstrapCompleted(instance_id=iid):
            return _update_node(state, iid, status="ready", step=None)
        case PoolStarted():
            return _advance(state, "ready")
        case Metrics(instance_id=iid):
            return _update_node(state, iid, metrics=event)
        case TaskProgress():
            return replace(state, tasks=event)
        case PoolStopping():
            return _advance(state, "stopping")
        case InstanceStopping(instance_id=iid):
            return _update_node(state, iid, status="stopping", step=None)
        case CostUpdate():
            return replace(state, cost=event)
        case CostFinal():
            return _advance(replace(state, final=event), "stopped")
        case Error(message=message, instance_id=iid):
            state = replace(state, errors=state.errors + 1, last_error=message)
            return _update_node(state, iid, error=message)
        case InstanceInterrupted(instance_id=iid, reason=reason):
            return _update_node(state, iid, status="interrupted", step=None, error=reason)
        case Notice(message=message):
            return replace(state, notices=(*state.notices, message)[-MAX_NOTICES:])
        case PoolResized(desired=desired):
            return replace(state, desired=desired)
        case NodeRemoved(instance_id=iid):
            nodes = tuple(n for n in state.nodes if n.instance_id != iid)
            return replace(state, nodes=nodes, requested=max(state.requested - 1, len(nodes)))
        case NodeAdded(instance_id=iid):
            return _update_node(state, iid, status="ready", step=None)
        case _:
            # LogLine is printed, not kept; unknown events change nothing.
            return state


__all__ = ["DisplayState", "NodeStatus", "NodeView", "Phase", "reduce"]
