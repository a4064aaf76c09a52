"""The bookkeeping of a pool's nodes, as a value: which nodes are members, which drain,
which are being replaced or are about to join, and which instances took the
interruption path. Every change is a pure function returning a new ``FleetState``, so
the rules hold for any sequence of them (tests/unit/test_fleet.py tries arbitrary ones)
and the threads that change a fleet (a spot notice, the reclaim watch, a replacement)
only swap one value under one lock (``skyward.api.fleet``).

Node indices are never reused. A client addresses a node by its index for the pool's
whole life (a late result, a log line, a replacement's handshake name it), so an index
that came back for another node would mix the two up. A replacement keeps its node's
index, because it takes that node's place: the same slot in ``@`` results, the same
rank in a distributed job.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

from skyward.providers.protocol import NodeHandle


class NodeStatus(enum.Enum):
    """``LIVE``: takes new work. ``DRAINING``: about to go (a spot notice, a removal);
    its work moves to the others, it takes none."""

    LIVE = "live"
    DRAINING = "draining"


@dataclass(frozen=True, slots=True)
class Member:
    """One node of the fleet: its newest handle, and the handle of a replacement that is
    launched but has not answered its handshake yet (``incoming``)."""

    index: int
    handle: NodeHandle
    status: NodeStatus = NodeStatus.LIVE
    incoming: NodeHandle | None = None

    @property
    def addressed(self) -> NodeHandle:
        """The handle the client talks to: a replacement's from the moment it is launched
        (its handshake goes to it), the member's own otherwise."""
        return self.incoming if self.incoming is not None else self.handle


@dataclass(frozen=True, slots=True)
class FleetState:
    """The nodes of a pool. ``members`` are in index order; ``joining`` are indices given
    to nodes being launched that have not joined yet; ``next_index`` is the index the
    next node gets; ``interrupted`` are instance ids that took the interruption or the
    lost-node path (each takes one, once); ``starting`` are nodes launched on reserved
    indices whose agents have not answered yet (billed and terminated like members)."""

    members: tuple[Member, ...] = ()
    joining: frozenset[int] = frozenset()
    next_index: int = 0
    interrupted: frozenset[str] = frozenset()
    starting: tuple[NodeHandle, ...] = ()

    @staticmethod
    def launched_all(handles: Sequence[NodeHandle]) -> FleetState:
        """A pool that launched ``handles`` (node 0, 1, ... in order) and connects to each
        as it answers (``Nodes.ready`` below ``desired``): every index reserved, none a
        member yet."""
        state = FleetState.of(())
        for handle in handles:
            state, index = state.reserve()
            if handle.node != index:
                raise ValueError(f"launched node {index} has index {handle.node}: they must be 0, 1, ... in order")
            state = state.launched(handle)
        return state

    @staticmethod
    def of(handles: Sequence[NodeHandle]) -> FleetState:
        """The fleet of a pool that just launched ``handles`` (node 0, 1, ... in order)."""
        for position, handle in enumerate(handles):
            if handle.node != position:
                raise ValueError(f"launched node {position} has index {handle.node}: they must be 0, 1, ... in order")
        return FleetState(members=tuple(Member(h.node, h) for h in handles), next_index=len(handles))

    # -- reading ------------------------------------------------------------------------

    @property
    def handles(self) -> tuple[NodeHandle, ...]:
        """Every member's handle, in index order: what the pool bills and terminates."""
        return tuple(m.handle for m in self.members)

    @property
    def everything(self) -> tuple[NodeHandle, ...]:
        """Every node the pool pays for: members, replacements not answered yet and nodes
        still starting. What a stopping pool terminates."""
        incoming = tuple(m.incoming for m in self.members if m.incoming is not None)
        return (*self.handles, *incoming, *self.starting)

    @property
    def size(self) -> int:
        """Members that take work plus nodes on their way (reserved or starting) and
        reclaimed members draining before their replacement: what the scaler compares with
        the desired count (a spot node that got its notice is replaced by the healing path,
        not once more by the scaler)."""
        reclaimed = sum(
            1 for m in self.members if m.status is NodeStatus.DRAINING and m.handle.instance_id in self.interrupted
        )
        return len(self.live) + len(self.joining) + reclaimed

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(m.index for m in self.members)

    @property
    def live(self) -> tuple[NodeHandle, ...]:
        """The members that take new work."""
        return tuple(m.handle for m in self.members if m.status is NodeStatus.LIVE)

    def member(self, index: int) -> Member:
        for member in self.members:
            if member.index == index:
                return member
        raise ValueError(f"node {index} is not in the fleet (members: {list(self.indices)})")

    def has(self, index: int) -> bool:
        return any(m.index == index for m in self.members)

    def unreported_spot(self) -> tuple[NodeHandle, ...]:
        """Spot members whose instance has not taken the interruption path: what a
        reclaim watch asks its provider about."""
        return tuple(m.handle for m in self.members if m.handle.spot and m.handle.instance_id not in self.interrupted)

    # -- changes ------------------------------------------------------------------------

    def reserve(self) -> tuple[FleetState, int]:
        """An index for a node about to be launched (its user data names it)."""
        index = self.next_index
        return replace(self, joining=self.joining | {index}, next_index=index + 1), index

    def reserve_again(self, index: int) -> FleetState:
        """Index ``index`` again, for the node that replaces the one that left it (same
        slot in ``@`` results, same rank): only a departed node's index."""
        if index >= self.next_index or self.has(index) or index in self.joining:
            raise ValueError(f"node {index} cannot be reserved again: it is in use or was never given")
        return replace(self, joining=self.joining | {index})

    def launched(self, handle: NodeHandle) -> FleetState:
        """The provider started a node on a reserved index; its agent has not answered."""
        if handle.node not in self.joining:
            raise ValueError(f"node {handle.node} launched, but that index was not reserved ({self._joining()})")
        starting = tuple(h for h in self.starting if h.node != handle.node)
        return replace(self, starting=(*starting, handle))

    def join(self, handle: NodeHandle) -> FleetState:
        """A node launched on a reserved index answered: it becomes a live member."""
        if handle.node not in self.joining:
            raise ValueError(f"node {handle.node} joins, but that index was not reserved (reserved: {self._joining()})")
        members = tuple(sorted((*self.members, Member(handle.node, handle)), key=lambda m: m.index))
        starting = tuple(h for h in self.starting if h.node != handle.node)
        return replace(self, members=members, joining=self.joining - {handle.node}, starting=starting)

    def abandon(self, index: int) -> FleetState:
        """A reserved index whose node never joined (its launch or handshake failed); not
        reused. Whoever abandons it removes the node it launched there, if any."""
        if index not in self.joining:
            raise ValueError(f"node {index} was not reserved (reserved: {self._joining()})")
        starting = tuple(h for h in self.starting if h.node != index)
        return replace(self, joining=self.joining - {index}, starting=starting)

    def drain(self, index: int) -> FleetState:
        """Node ``index`` takes no new work from now on."""
        return self._with(replace(self.member(index), status=NodeStatus.DRAINING))

    def remove(self, index: int) -> tuple[FleetState, NodeHandle]:
        """Node ``index`` leaves the fleet; returns its handle (and a replacement's that
        had not joined yet is dropped with it: whoever removes it terminates both)."""
        member = self.member(index)
        return replace(self, members=tuple(m for m in self.members if m.index != index)), member.handle

    def begin_replace(self, index: int, new: NodeHandle) -> FleetState:
        """A replacement for node ``index`` was launched; the client now addresses it,
        while the member stays until its handshake succeeds (``finish_replace``)."""
        if new.node != index:
            raise ValueError(f"the replacement of node {index} was launched as node {new.node}")
        member = self.member(index)
        if member.incoming is not None:
            raise ValueError(f"node {index} is already being replaced by {member.incoming.instance_id}")
        return self._with(replace(member, incoming=new))

    def finish_replace(self, index: int) -> tuple[FleetState, NodeHandle]:
        """The replacement answered: it becomes node ``index`` (live again); returns the
        handle it replaced."""
        member = self.member(index)
        if member.incoming is None:
            raise ValueError(f"node {index} is not being replaced")
        return self._with(Member(index, member.incoming)), member.handle

    def cancel_replace(self, index: int) -> tuple[FleetState, NodeHandle | None]:
        """The replacement failed its handshake: the member keeps its own handle; returns
        the replacement's (None when there was none, or the node left meanwhile)."""
        if not self.has(index):
            return self, None
        member = self.member(index)
        return self._with(replace(member, incoming=None)), member.incoming

    def interrupt(self, instance_id: str) -> tuple[FleetState, bool]:
        """Record that ``instance_id`` is being reclaimed or was lost; True the first time
        only, so a node reported by its provider, its notice and the client's liveness
        window alike is replaced once."""
        if instance_id in self.interrupted:
            return self, False
        return replace(self, interrupted=self.interrupted | {instance_id}), True

    def _with(self, member: Member) -> FleetState:
        return replace(self, members=tuple(member if m.index == member.index else m for m in self.members))

    def _joining(self) -> list[int]:
        return sorted(self.joining)
