"""The scaler of an open pool: the thread that keeps the fleet at its desired size and
heals it.

Each tick it reads the client's load (``PoolClient.load()``), asks the pure policy
(``skyward.api.autoscale.desired_nodes``) for the desired count on an elastic pool, and
acts through ``NodeChanges``: more nodes when the fleet is below it, idle ones removed
(highest index first, drained) when above. ``pool.resize(n)`` sets the count by hand.
A lost node (the client's ``on_node_lost``, or the provider's ``NodeWatch`` saying it is
gone) is removed and, with ``replace_lost_nodes``, started again at its index, on
elastic and fixed pools alike; when the pool then has no node and cannot get one, the
tasks waiting for one fail with the reason (``fail_waiting``) instead of waiting forever.

Node changes block for as long as a provider takes to boot a node (a minute or more on
a cloud), so they run on the scaler's thread or on a thread of their own (a loss), never
on the client's I/O thread or the caller's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from skyward.api.autoscale import AutoscaleSettings, Demand, desired_nodes
from skyward.api.fleet import Fleet
from skyward.api.node_changes import DRAIN_TIMEOUT, NodeChanges
from skyward.errors import ConfigurationError
from skyward.events import NodeChange, Notice, PoolResized
from skyward.providers.protocol import ElasticNodes, NodeHandle, NodeWatch
from skyward.providers.spec import PoolSpec
from skyward.scaling import Nodes


@dataclass(frozen=True, slots=True)
class ClientHealing:
    """What the pool's client does when a node is lost: ``rerun_lost``, its tasks run
    again elsewhere (off when the user asked for the error, ``replace_lost_nodes=False``,
    unless the pool is spot, whose reclaimed nodes' tasks always moved on);
    ``wait_for_nodes``, tasks wait for a node while the pool has none (a pool that
    replaces or adds nodes will get one) instead of failing."""

    rerun_lost: bool
    wait_for_nodes: bool


def client_healing(spec: PoolSpec, driver: object, settings: AutoscaleSettings) -> ClientHealing:
    scales = isinstance(driver, ElasticNodes)
    elastic = spec.scaling is not None and spec.scaling.elastic
    return ClientHealing(
        rerun_lost=settings.replace_lost,
        wait_for_nodes=scales and (settings.replace_lost or elastic),
    )


_TICK = 0.2
"""How often the scaler looks at the load: cheap (one lock in the client), and a burst
of work is seen within it; the cooldown, not the tick, paces the changes."""


class Scaler:
    """Keeps ``fleet`` at its desired node count and replaces its lost nodes."""

    def __init__(
        self,
        fleet: Fleet,
        changes: NodeChanges | None,
        bounds: Nodes,
        settings: AutoscaleSettings,
        clock: Callable[[], float] = time.monotonic,
        spawn: Callable[[Callable[[], None], str], None] | None = None,
        watch: bool = True,
    ) -> None:
        self._fleet = fleet
        # False: this process's driver did not start the nodes (an attached pool), so its
        # NodeWatch knows none of them; lost nodes are found by the client's liveness window
        self._watch = watch
        self._spawn = spawn or _spawn  # where a healing runs (tests run it in place)
        self._changes = changes  # None: the provider cannot add or remove nodes
        self._bounds = bounds
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._desired = bounds.desired
        self._reason: NodeChange = "scale-up"  # why the desired count last changed: what NodeAdded/NodeRemoved say
        # the first decision is free: a pool born empty starts a node for its first task at once
        self._changed_at = clock() - settings.cooldown
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        if changes is not None:
            fleet.on_leaving(self._interrupted)

    @property
    def desired(self) -> int:
        return self._desired

    # -- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        """Run the scaler (an elastic pool) and the provider's node watch (``NodeWatch``)."""
        if self._changes is None and self._settings.replace_lost:
            self._fleet.emit(
                Notice(
                    message=f"replace_lost_nodes: the {self._fleet.driver.name} provider cannot replace a lost node "
                    "(it has no ElasticNodes ability): a lost node's tasks run again on the other nodes and the pool "
                    "goes on with one node fewer (ComputePool(replace_lost_nodes=False) silences this)"
                )
            )
        if self._changes is not None:
            self._thread = threading.Thread(target=self._run, name="skyward-scaler", daemon=True)
            self._thread.start()
        driver = self._fleet.driver
        if isinstance(driver, NodeWatch) and self._watch:
            threading.Thread(target=self._watch_nodes, args=(driver,), name="skyward-node-watch", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    def _running(self) -> bool:
        return not self._stopped.is_set() and self._fleet.active()

    def _run(self) -> None:
        while self._running():
            try:
                self.tick()
            except Exception as error:  # a provider's error: said, and tried again next tick
                self._fleet.emit(Notice(message=f"the pool could not change its size: {error}"))
                self._pause(self._settings.cooldown)
            self._pause(_TICK)

    def _pause(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def tick(self) -> None:
        """One decision and the action it asks for (the scaler thread; tests call it)."""
        link = self._fleet.link
        if link is None or self._changes is None:
            return
        load = link.load()
        now = self._clock()
        state = self._fleet.state
        if self._bounds.elastic:
            idle = [now - load.idle_since[h.node] for h in state.live if h.node in load.idle_since]
            demand = Demand(load.queued, load.running, self._fleet.spec.workers_per_node, idle)
            with self._lock:
                old = self._desired
                new = desired_nodes(
                    demand,
                    desired=old,
                    bounds=self._bounds,
                    settings=self._settings,
                    since_change=now - self._changed_at,
                )
            if new != old:
                self._set(new, "scale-up" if new > old else "scale-down", now)
        self._reconcile(set(load.idle_since))

    def _reconcile(self, idle: set[int]) -> None:
        changes = self._changes
        assert changes is not None
        state = self._fleet.state
        size, desired = state.size, self._desired
        why: NodeChange = "resize" if self._reason == "resize" else "scale-up"
        if desired > size:
            try:
                changes.add(desired - size, why)
            except Exception as error:
                self._cannot_grow(str(error))
                raise
        elif desired < size:
            live = sorted((h.node for h in state.live), reverse=True)
            # idle nodes first (highest index first), then busy ones for a resize by hand
            ordered = [i for i in live if i in idle] + [i for i in live if i not in idle]
            changes.remove(ordered[: size - desired], "resize" if why == "resize" else "scale-down")

    def _cannot_grow(self, why: str) -> None:
        """No node came: tasks waiting for one fail with the reason when the pool has none."""
        state = self._fleet.state
        link = self._fleet.link
        if link is not None and not state.live and not state.joining:
            link.fail_waiting(f"the pool has no node and could not start one: {why}")

    # -- by hand ----------------------------------------------------------------------------

    def resize(self, count: int) -> None:
        """Set the desired count to ``count`` (within the bounds); the scaler gets there."""
        bounds = self._bounds
        if not bounds.elastic:
            raise ConfigurationError(
                f"pool.resize({count!r}): this pool is fixed at {bounds.desired} nodes; make it elastic to resize "
                f"it, e.g. ComputePool(nodes=({bounds.desired}, {bounds.desired * 2})) or sky.Nodes(desired, max=...)"
            )
        if isinstance(count, bool) or not isinstance(count, int) or not bounds.floor <= count <= bounds.ceiling:
            raise ConfigurationError(
                f"pool.resize({count!r}): must be an integer from {bounds.floor} to {bounds.ceiling}, the pool's "
                f"bounds (ComputePool(nodes=sky.Nodes(desired, min={bounds.floor}, max={bounds.ceiling})))"
            )
        if self._changes is None:
            raise ConfigurationError(
                f"pool.resize({count}): the {self._fleet.driver.name} provider cannot add or remove nodes of a running "
                "pool (it has no ElasticNodes ability)"
            )
        self._set(count, "resize", self._clock())

    def _set(self, desired: int, reason: NodeChange, now: float) -> None:
        with self._lock:
            if desired == self._desired:
                return
            self._desired, self._changed_at, self._reason = desired, now, reason
        self._fleet.emit(PoolResized(desired=desired, current=len(self._fleet.state.live), reason=reason))
        self._wake.set()

    # -- healing ----------------------------------------------------------------------------

    def node_lost(self, index: int, reason: str) -> None:
        """The client declared node ``index`` lost (its I/O thread: must not block)."""
        state = self._fleet.state
        if not state.has(index):
            return
        handle = state.member(index).handle
        self._spawn(lambda: self._heal(index, handle, reason, "lost"), f"skyward-heal-{index}")

    def _interrupted(self, index: int, handle: NodeHandle, reason: str) -> None:
        """A spot node got its notice (drained already): removed and replaced."""
        self._spawn(lambda: self._heal(index, handle, reason, "reclaimed"), f"skyward-heal-{index}")

    def _heal(self, index: int, handle: NodeHandle, why: str, kind: NodeChange) -> None:
        fleet = self._fleet
        changes = self._changes
        first = fleet.change(lambda s: s.interrupt(handle.instance_id)) if kind == "lost" else True
        if not first:
            return
        if changes is None:
            return  # said once when the pool opened; the node stays a member until the pool stops
        replace = self._settings.replace_lost and fleet.active()
        if kind == "lost":  # a reclaim was said by InstanceInterrupted; a loss is said here, with its cause
            then = "; replacing it" if replace else ""
            fleet.emit(Notice(message=f"node {index} ({handle.instance_id}) was lost: {why}{then}"))
        drain = DRAIN_TIMEOUT if kind == "reclaimed" else 0.0  # a notice leaves its running tasks time
        if not changes.forget_lost(index, handle, kind, replace, drain):
            return
        if not replace:
            if not self._bounds.elastic:
                with self._lock:  # a fixed pool goes on with one node fewer, not a new one
                    self._desired = max(self._desired - 1, 0)
            if not fleet.state.live and not fleet.state.joining and fleet.link is not None:
                fleet.link.fail_waiting(f"node {index} was lost ({why}) and the pool replaces no lost node")
            return
        try:
            (new,) = changes.add_at(index, "replacement")
        except Exception as error:
            fleet.emit(Notice(message=f"node {index} was lost ({why}) and could not be replaced: {error}"))
            self._cannot_grow(f"node {index} was lost ({why}) and could not be replaced: {error}")
            return
        fleet.emit(Notice(message=f"node {index} replaced: {handle.instance_id} -> {new.instance_id}"))

    def _watch_nodes(self, driver: NodeWatch) -> None:
        """Every ``node_poll_interval`` seconds, ask the provider which nodes are gone: a
        spot node takes the interruption path, any other the lost-node path (the client
        fails it, which calls ``node_lost``)."""
        while self._running():
            self._stopped.wait(driver.node_poll_interval)
            if not self._running():
                return
            live = [h for h in self._fleet.state.handles if h.instance_id not in self._fleet.state.interrupted]
            if not live:
                continue
            try:
                gone = driver.gone(live)
            except Exception as error:  # the next poll tries again
                self._fleet.emit(Notice(message=f"could not check whether nodes are gone: {error}"))
                continue
            for handle in live:
                why = gone.get(handle.instance_id)
                if why is None:
                    continue
                if handle.spot:
                    self._fleet.on_interruption(handle.node, handle, why)
                elif self._fleet.link is not None:
                    self._fleet.link.fail_node(handle.node, why)


def _spawn(run: Callable[[], None], name: str) -> None:
    threading.Thread(target=run, name=name, daemon=True).start()
