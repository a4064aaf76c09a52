"""The actuator of a pool that changes size: add nodes, remove them, replace a lost one.

Every change goes through the same steps as the pool's start, so a node that joins
later is the same as one that started with the pool: an index reserved in the
``FleetState``, its user data rendered for that index (its own CURVE key and identity),
the provider's ``ElasticNodes.add_nodes`` (the same template, offer, labels, firewall
and expiry as the pool's launch), then the client's handshake (``add_node``) and the
version check. A node is removed only after its drain (``remove_node`` waits for its
running tasks), so a scale-down loses no task; a lost node is forgotten at once (its
tasks run again elsewhere, the client's ``rerun_lost``) and, when the pool replaces lost
nodes, started again at its index.

It holds no state of its own beyond the fleet's; the scaler (``skyward.api.scaler``)
decides when, this does.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import cloudpickle

from skyward.api.fleet import Fleet
from skyward.api.fleet_state import FleetState
from skyward.errors import BootstrapTimeoutError, ConfigurationError, PoolClosedError, VersionMismatchError
from skyward.events import Error, InstanceStopping, NodeAdded, NodeChange, NodeRemoved
from skyward.image import CLIENT_PYTHON
from skyward.providers.protocol import ElasticNodes, NodeHandle

DRAIN_TIMEOUT = 120.0
"""Seconds a node being removed (scale-down, ``pool.resize``, a spot notice) may take
to finish the tasks it runs before it is forgotten; what it still runs then runs again
elsewhere. Two minutes is AWS's spot notice, the shortest warning a node gets."""


def version_mismatch(node: int, info: Mapping[str, Any], client_python: str, client_cloudpickle: str) -> str | None:
    """Why a node cannot serve this client (Python minor or cloudpickle differ), or None."""
    remote_python = ".".join(str(info["python"]).split(".")[:2])
    if remote_python == client_python and info["cloudpickle"] == client_cloudpickle:
        return None
    return (
        f"node {node} runs Python {info['python']} with cloudpickle {info['cloudpickle']}, "
        f"but this client runs Python {client_python} with cloudpickle {client_cloudpickle}; "
        "both must match (set Image(python=...) and pin cloudpickle)"
    )


class NodeChanges:
    """Adds, removes and replaces the nodes of ``fleet`` on a provider with ``ElasticNodes``."""

    def __init__(self, fleet: Fleet, driver: ElasticNodes) -> None:
        self._fleet = fleet
        self._driver = driver

    # -- adding -------------------------------------------------------------------------

    def add(self, count: int, reason: NodeChange) -> list[NodeHandle]:
        """Start ``count`` nodes on fresh indices; returns those that joined."""
        fleet = self._fleet
        indices = [fleet.change(FleetState.reserve) for _ in range(count)]
        return self._start(indices, reason)

    def add_at(self, index: int, reason: NodeChange) -> list[NodeHandle]:
        """Start a node at ``index``, reserved already (``FleetState.reserve_again``): a
        replacement takes its node's place."""
        return self._start([index], reason)

    def _start(self, indices: Sequence[int], reason: NodeChange) -> list[NodeHandle]:
        fleet = self._fleet
        identities = fleet.identities
        if identities is not None:
            for index in indices:
                identities.renew(index)  # a replacement's own key: the node it replaces cannot answer
        try:
            handles = self._driver.add_nodes(fleet.spec, indices, fleet.user_data, fleet.emit)
        except BaseException:
            for index in indices:
                fleet.update(partial(FleetState.abandon, index=index))
            raise
        if not fleet.admit(handles):
            self._driver.remove_nodes(list(handles))
            raise PoolClosedError(f"the pool stopped while node(s) {list(indices)} started; they were deleted")
        return self.adopt(handles, reason)

    def adopt(self, handles: Sequence[NodeHandle], reason: NodeChange) -> list[NodeHandle]:
        """Connect to launched nodes, in parallel; each joins the fleet once its agent
        answered (a node that does not answer within the bootstrap timeout is removed).
        Returns those that joined; raises the first failure when none did."""
        joined: list[NodeHandle] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def one(handle: NodeHandle) -> None:
            try:
                self._handshake(handle, reason)
            except BaseException as error:
                with lock:
                    errors.append(error)
            else:
                with lock:
                    joined.append(handle)

        threads = [threading.Thread(target=one, args=(h,), name=f"skyward-join-{h.node}", daemon=True) for h in handles]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors and not joined:
            raise errors[0]
        return sorted(joined, key=lambda h: h.node)

    def _handshake(self, handle: NodeHandle, reason: NodeChange) -> None:
        fleet = self._fleet
        link = fleet.link
        try:
            if link is None:
                raise ConfigurationError(f"node {handle.node} started before the pool had a client")
            identity = fleet.identities.identity(handle.node) if fleet.identities is not None else None
            info = link.add_node(handle.node, handle.endpoint, fleet.bootstrap_timeout, fleet.cluster, identity)
            problem = version_mismatch(handle.node, info, CLIENT_PYTHON, cloudpickle.__version__)
            if problem is not None:
                link.remove_node(handle.node, 0.0)
                raise VersionMismatchError(problem)
        except BaseException as error:
            fleet.update(partial(FleetState.abandon, index=handle.node))
            self._delete([handle])
            fleet.emit(
                Error(message=f"node {handle.node} could not join the pool: {error}", instance_id=handle.instance_id)
            )
            raise
        fleet.update(partial(FleetState.join, handle=handle))
        fleet.report_bootstrap(handle, info)
        fleet.emit(NodeAdded(node=handle.node, instance_id=handle.instance_id, reason=reason))

    # -- removing -----------------------------------------------------------------------

    def remove(self, indices: Sequence[int], reason: NodeChange, drain_timeout: float = DRAIN_TIMEOUT) -> None:
        """Remove live nodes: each drained first (it takes no new work; its queued and
        re-runnable running tasks move to the others at once, the first result winning; a
        task that may not run again finishes there within ``drain_timeout``), then deleted.
        A re-runnable task may so run twice: the price of a scale-down that never waits on
        a long task."""
        fleet = self._fleet
        link = fleet.link
        handles = []
        for index in indices:
            fleet.update(partial(FleetState.drain, index=index))
            if link is not None:
                link.remove_node(index, drain_timeout)
            handle = fleet.change(partial(FleetState.remove, index=index))
            handles.append(handle)
        self._delete(handles)
        for handle in handles:
            fleet.emit(NodeRemoved(node=handle.node, instance_id=handle.instance_id, reason=reason))

    def forget_lost(
        self, index: int, handle: NodeHandle, reason: NodeChange, replace: bool, drain_timeout: float = 0.0
    ) -> bool:
        """A node was lost (or its spot instance reclaimed): the client forgets it, the
        provider deletes it, and, when ``replace``, its index is reserved again for the
        replacement in the same step (the scaler never sees a gap to fill twice).
        Returns False when it had left the fleet already."""
        fleet = self._fleet

        def leave(state: FleetState) -> tuple[FleetState, bool]:
            if not state.has(index) or state.member(index).handle != handle:
                return state, False
            state, _ = state.remove(index)
            return (state.reserve_again(index) if replace else state), True

        if not fleet.change(leave):
            return False
        link = fleet.link
        if link is not None:
            try:
                link.remove_node(index, drain_timeout)  # a lost node's tasks were re-run when it was declared lost
            except ConfigurationError:
                pass  # the client had forgotten it already
        self._delete([handle])
        fleet.emit(NodeRemoved(node=index, instance_id=handle.instance_id, reason=reason))
        return True

    def _delete(self, handles: Sequence[NodeHandle]) -> None:
        if not handles:
            return
        for handle in handles:
            self._fleet.emit(InstanceStopping(instance_id=handle.instance_id))
        try:
            self._driver.remove_nodes(list(handles))
        finally:
            self._fleet.bill(stopped=handles)


def open_when_ready(fleet: Fleet, changes: NodeChanges, handles: Sequence[NodeHandle], ready: int) -> None:
    """``Nodes.ready`` below the nodes launched: connect to each as it answers (on threads
    of their own, which go on after the pool opened) and return once ``ready`` of them
    joined. Raises ``BootstrapTimeoutError`` (a failover reason) when too few can."""
    if not handles:
        return
    threading.Thread(target=_adopt_quietly, args=(changes, handles), name="skyward-join-at-start", daemon=True).start()

    def settled() -> bool:
        state = fleet.state
        return len(state.members) >= ready or len(state.members) + len(state.joining) < ready

    with fleet.joined:
        fleet.joined.wait_for(settled, timeout=fleet.bootstrap_timeout + _JOIN_MARGIN)
        joined = len(fleet.state.members)
    if joined < ready:
        raise BootstrapTimeoutError(
            f"{joined} of the {len(handles)} nodes launched answered within the bootstrap timeout "
            f"({fleet.bootstrap_timeout:g} s), and the pool needs {ready} ready before it opens "
            "(sky.Nodes(min=...)); the Error events say why each other node failed"
        )


_JOIN_MARGIN = 5.0
"""Seconds past the bootstrap timeout the start waits for the joining threads to settle
(each gives up at the timeout itself)."""


def _adopt_quietly(changes: NodeChanges, handles: Sequence[NodeHandle]) -> None:
    try:
        changes.adopt(handles, "scale-up")
    except Exception:
        pass
