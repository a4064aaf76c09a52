"""The live nodes of an open pool, and what changes them while work runs.

``Fleet`` keeps the nodes' bookkeeping in one ``FleetState`` value (pure changes, see
``skyward.api.fleet_state``) swapped under one lock, and wires each change to the
pool's client: a spot notice or a reclaim drains the node (its work moves to the
others) and, where the provider's strategy says so, launches a replacement that takes
the node's index once its agent answered the same handshake as at start. It also runs
what watches the fleet while the pool is active: the pool's timeout timer, the cost
ticker and, for a provider that gives no notice, the reclaim watch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from skyward.agent.notices import NoticeKind
from skyward.api.fleet_state import FleetState
from skyward.api.spec import PoolSpec
from skyward.api.volume_reports import VolumeReports
from skyward.cost import CostLedger, PricedInstance
from skyward.events import (
    BootstrapCompleted,
    BootstrapProgress,
    CostFinal,
    Error,
    InstanceInterrupted,
    InstanceStopping,
    LogLine,
    Metrics,
    Notice,
    SkywardEvent,
)
from skyward.providers.protocol import (
    EventSink,
    FollowsBootstrap,
    NodeHandle,
    PortMapping,
    ProviderDriver,
    ReclaimWatch,
    SpotReplacement,
    UserDataFactory,
)
from skyward.secrets import redact, secret_values
from skyward.transport import wire
from skyward.transport.handshake import NodeIdentity
from skyward.transport.links import NodeInfo
from skyward.volume import volume_secrets

COST_UPDATE_INTERVAL = 10.0
"""Seconds between two ``CostUpdate`` events: often enough for a live display's total,
rare enough that a quiet pool's log is not a cost ticker."""

_TICK = 0.2
"""How often the watch loops look whether the pool is still active (and the cost ticker
flushes due progress): a closed pool's threads end within this."""


T = TypeVar("T")


class ClientLoadView(Protocol):
    """What the scaler reads of ``PoolClient.load()`` (a ``ClientLoad``): tasks on no
    worker, tasks on one, tasks each live node holds, usable workers, and the monotonic
    time each idle node went idle (absent while busy)."""

    @property
    def queued(self) -> int: ...

    @property
    def running(self) -> int: ...

    @property
    def per_node(self) -> Mapping[int, int]: ...

    @property
    def slots(self) -> int: ...

    @property
    def idle_since(self) -> Mapping[int, float]: ...


class NodeLink(Protocol):
    """What the fleet asks of the pool's client (``PoolClient``): the socket side of a
    node joining, leaving, being lost or replaced, and the load the autoscaler reads. A
    protocol, so the fleet's wiring is tested without sockets (tests/unit/test_fleet.py,
    tests/unit/test_scaler.py)."""

    def drain_node(self, index: int) -> None: ...

    def replace_node(
        self, index: int, endpoint: str, cluster: list[bytes], timeout: float, identity: NodeIdentity | None = None
    ) -> NodeInfo: ...

    def add_node(
        self,
        index: int,
        endpoint: str,
        timeout: float,
        cluster: list[bytes] | None = None,
        identity: NodeIdentity | None = None,
    ) -> NodeInfo: ...

    def remove_node(self, index: int, timeout: float) -> None: ...

    def fail_node(self, index: int, reason: str) -> None: ...

    def fail_waiting(self, reason: str) -> None: ...

    def load(self) -> ClientLoadView: ...


class NodeIdentities(Protocol):
    """Who must answer for each node, and a fresh key for a replacement (the pool's
    ``NodeUserData``)."""

    def identity(self, node: int) -> NodeIdentity: ...

    def renew(self, node: int) -> None: ...


def bootstrap_events(driver: ProviderDriver, handle: NodeHandle, info: NodeInfo) -> list[SkywardEvent]:
    """What the pool says of a node whose agent answered: ``BootstrapProgress`` for each
    step its hello lists, unless the driver followed the bootstrap live
    (``FollowsBootstrap``: Local reads its nodes' stdout; a cloud node's cannot be read
    while it boots), then ``BootstrapCompleted``. Said here, and only here, for every
    provider, at start and for a replacement."""
    followed = isinstance(driver, FollowsBootstrap)
    events: list[SkywardEvent] = [
        BootstrapProgress(instance_id=handle.instance_id, step=step)
        for step in ([] if followed else info.get("bootstrap_steps", []))
    ]
    events.append(BootstrapCompleted(instance_id=handle.instance_id))
    return events


class Fleet:
    """The nodes of one pool on one provider (the candidate it started on)."""

    def __init__(
        self,
        *,
        spec: PoolSpec,
        driver: ProviderDriver,
        provider_name: str,
        region: str,
        handles: Sequence[NodeHandle],
        user_data: UserDataFactory,
        bootstrap_timeout: float,
        emit: EventSink,
        active: Callable[[], bool],
        identities: NodeIdentities | None = None,
        state: FleetState | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spec = spec
        self._secrets = secret_values(spec.image.env, volume_secrets(spec.volumes))  # redacted from what nodes say
        self._driver = driver
        self._identities = identities  # None: replacements keep their node's key, unchecked
        self._provider_name = provider_name
        self._region = region
        self._user_data = user_data
        self._bootstrap_timeout = bootstrap_timeout
        self._emit = emit
        self._active = active  # the pool is open: watches run, replacements are installed
        self._lock = threading.Lock()
        self._state = FleetState.of(handles) if state is None else state
        self._clock = clock
        self._ledger = CostLedger()
        for handle in self._state.everything:
            self._ledger = self._ledger.start(_priced(handle), 0.0)
        self._link: NodeLink | None = None
        self._cluster: list[bytes] = []
        self.volume_reports = VolumeReports()
        self._started_at = 0.0
        self._timer: threading.Timer | None = None
        self._on_leaving: Callable[[int, NodeHandle, str], None] | None = None
        self._terminated = False
        self.joined = threading.Condition(self._lock)  # notified when a member joins or a start fails

    # -- reading --------------------------------------------------------------------------

    @property
    def state(self) -> FleetState:
        return self._state

    @property
    def handles(self) -> tuple[NodeHandle, ...]:
        return self._state.handles

    @property
    def spec(self) -> PoolSpec:
        return self._spec

    @property
    def driver(self) -> ProviderDriver:
        return self._driver

    @property
    def link(self) -> NodeLink | None:
        return self._link

    @property
    def cluster(self) -> list[bytes]:
        return self._cluster

    @property
    def bootstrap_timeout(self) -> float:
        return self._bootstrap_timeout

    @property
    def user_data(self) -> UserDataFactory:
        return self._user_data

    @property
    def identities(self) -> NodeIdentities | None:
        return self._identities

    def emit(self, event: SkywardEvent) -> None:
        self._emit(event)

    def active(self) -> bool:
        return self._active()

    def change(self, change: Callable[[FleetState], tuple[FleetState, T]]) -> T:
        """Apply a pure change to the fleet's state under its lock; returns what it gave."""
        with self._lock:
            self._state, out = change(self._state)
            self.joined.notify_all()
            return out

    def admit(self, handles: Sequence[NodeHandle]) -> bool:
        """Record nodes the provider just started on reserved indices, billed from now;
        False, recording nothing, when the fleet was terminated meanwhile (the pool
        stopped while they booted): whoever started them deletes them."""
        now = self._now()
        with self._lock:
            if self._terminated:
                return False
            for handle in handles:
                self._state = self._state.launched(handle)
                self._ledger = self._ledger.start(_priced(handle), now)
            return True

    def update(self, change: Callable[[FleetState], FleetState]) -> None:
        """Apply a pure change that returns only the new state."""
        with self._lock:
            self._state = change(self._state)
            self.joined.notify_all()

    def priced(self) -> list[PricedInstance]:
        """The nodes billed now (members, replacements and nodes still starting)."""
        return list(self._ledger.running(self._now()))

    def _now(self) -> float:
        """Seconds since the pool became active (0 before): the cost ledger's clock."""
        return max(self._clock() - self._started_at, 0.0) if self._started_at else 0.0

    def bill(self, started: Sequence[NodeHandle] = (), stopped: Sequence[NodeHandle] = ()) -> None:
        """Each node is billed for exactly the time it lived: from its launch (or the
        pool's start, for the nodes launched with it) to its removal."""
        now = self._now()
        with self._lock:
            for handle in started:
                self._ledger = self._ledger.start(_priced(handle), now)
            for handle in stopped:
                self._ledger = self._ledger.stop(handle.instance_id, now)

    def cost_final(self) -> CostFinal:
        """``CostFinal`` for every node the pool ever had, each for its own lifetime."""
        return self._ledger.final(self._now(), provider=self._provider_name, region=self._region)

    def on_leaving(self, heal: Callable[[int, NodeHandle, str], None]) -> None:
        """Who takes a node that goes (a spot notice on a provider with ``ElasticNodes``):
        the pool's scaler removes it after its drain and, where it should, replaces it."""
        self._on_leaving = heal

    def port_map(self) -> Callable[[int, int], str] | None:
        """For a provider whose nodes are containers behind a host's port mapping
        (``PortMapping``): each worker's port is looked up through it, on the node's newest
        handle (a replacement's included, from before its handshake)."""
        driver = self._driver
        if not isinstance(driver, PortMapping):
            return None
        return lambda node, port: driver.mapped_endpoint(self._addressed(node), port)

    def _addressed(self, node: int) -> NodeHandle:
        """The handle the client talks to for ``node``: a member's (or its replacement's),
        or a node still starting (it joins through the same handshake)."""
        state = self._state
        if state.has(node):
            return state.member(node).addressed
        for handle in state.starting:
            if handle.node == node:
                return handle
        raise ValueError(f"node {node} is neither in the fleet nor starting (members: {list(state.indices)})")

    # -- start and stop ---------------------------------------------------------------------

    def attach(self, link: NodeLink) -> None:
        """The client that talks to these nodes."""
        self._link = link

    def set_cluster(self, cluster: list[bytes]) -> None:
        """The CLUSTER message every node got; a replacement gets it too."""
        self._cluster = cluster

    def report_bootstrap(self, handle: NodeHandle, info: NodeInfo) -> None:
        for event in bootstrap_events(self._driver, handle, info):
            self._emit(event)

    def start_timer(self, timeout: float, on_timeout: Callable[[], None]) -> None:
        """The pool is active: ``on_timeout`` runs once ``timeout`` seconds have passed."""
        self._started_at = self._clock()
        self._timer = threading.Timer(timeout, on_timeout)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, flush: Callable[[], None]) -> None:
        """Start the cost ticker (which also calls ``flush`` for due progress) and, for
        spot nodes of a provider without notices, the reclaim watch."""
        threading.Thread(target=self._cost_ticker, args=(flush,), name="skyward-cost", daemon=True).start()
        driver = self._driver
        if isinstance(driver, ReclaimWatch) and any(n.spot for n in self._state.handles):
            threading.Thread(target=self._watch_reclaims, args=(driver,), name="skyward-reclaims", daemon=True).start()

    def on_timer_thread(self) -> bool:
        return self._timer is not None and threading.current_thread() is self._timer

    def stop_watching(self) -> float:
        """Cancel the timer; returns the seconds the pool was active (0 if it never was).
        The other watches end on their own within a tick of the pool going inactive."""
        if self._timer is not None:
            self._timer.cancel()
        return self._clock() - self._started_at if self._started_at else 0.0

    def terminate(self) -> None:
        """Terminate every node, those still starting included (``InstanceStopping`` for
        each, then the provider's call), and stop billing them."""
        with self._lock:
            self._terminated = True  # a node started from now on is deleted by its starter
            handles = self._state.everything
        for handle in handles:
            self._emit(InstanceStopping(instance_id=handle.instance_id))
        try:
            self._driver.terminate(list(handles))
        finally:
            self.bill(stopped=handles)

    # -- what the nodes say -----------------------------------------------------------------

    def on_node_message(self, node: int, kind: bytes, payload: Mapping[str, Any]) -> None:
        """A node's log lines, metrics and notices, as events (the client's I/O thread).
        ``payload`` is the message's decoded JSON (its values are JSON's)."""
        if not self._state.has(node):
            return  # it left the fleet; a last line still in flight
        handle = self._state.member(node).addressed
        if kind == wire.LOG:
            for raw in payload["lines"]:
                line = redact(raw, self._secrets)
                self._emit(LogLine(node=node, instance_id=handle.instance_id, line=line, timestamp=payload["ts"]))
        elif kind == wire.METRICS:
            self._emit(Metrics(instance_id=handle.instance_id, node=node, **payload))
        elif kind == wire.NOTICE:
            notice = payload.get("kind")
            if notice == "worker-ready":
                self._emit(Notice(message=f"node {node}: worker {payload['worker']} restarted and ready"))
            elif notice == NoticeKind.INTERRUPTION:
                self.on_interruption(node, handle, str(payload.get("message")))
            elif notice == "volumes":
                message = redact(str(payload.get("message")), self._secrets)
                self.volume_reports.record(node, payload.get("ok") is True, message)
                if payload.get("ok") is not True:
                    self._emit(Error(message=message, instance_id=handle.instance_id))
            elif notice == NoticeKind.REBALANCE:
                self._emit(Notice(message=f"node {node} ({handle.instance_id}): {payload.get('message')}"))
            else:
                message = redact(str(payload.get("message")), self._secrets)
                self._emit(Error(message=message, instance_id=handle.instance_id))

    # -- changing the fleet -----------------------------------------------------------------

    def on_interruption(self, node: int, handle: NodeHandle, reason: str) -> None:
        """A spot node got its notice: tell the user, move its work to the other nodes,
        and, where the provider's strategy says so (Spot.Always), start a replacement.
        Once per instance: a provider with both a notice and a reclaim watch (or a notice
        file seen twice) does not start two replacements."""
        with self._lock:
            self._state, first = self._state.interrupt(handle.instance_id)
        if not first:
            return
        self._emit(InstanceInterrupted(instance_id=handle.instance_id, node=node, reason=reason))
        self.drain_node(node)
        if self._on_leaving is not None:  # ElasticNodes: removed after its drain, replaced there
            self._on_leaving(node, handle, reason)
            return
        driver = self._driver
        if isinstance(driver, SpotReplacement) and driver.replaces_interrupted(self._spec):
            threading.Thread(
                target=self.replace_node, args=(driver, node, handle), name=f"skyward-replace-{node}", daemon=True
            ).start()

    def drain_node(self, node: int) -> None:
        """Node ``node`` takes no new work; its running and queued tasks run again on the
        other nodes (``PoolClient.drain_node``)."""
        with self._lock:
            if self._state.has(node):
                self._state = self._state.drain(node)
        if self._link is not None:
            self._link.drain_node(node)

    def replace_node(self, driver: SpotReplacement, node: int, handle: NodeHandle) -> None:
        """Launch a replacement for ``node`` and, once its agent answered, make it the node
        (live again, same index). A failure is said as an ``Error`` event; the node stays
        drained."""
        try:
            if self._identities is not None:
                self._identities.renew(node)  # the replacement's own key: the node it replaces cannot answer
            new = driver.replace(self._spec, handle, self._user_data, self._emit)
            link = self._link
            if link is None or not self._active():
                return
            with self._lock:
                self._state = self._state.begin_replace(node, new)
            try:
                identity = self._identities.identity(node) if self._identities is not None else None
                info = link.replace_node(node, new.endpoint, self._cluster, self._bootstrap_timeout, identity)
            except BaseException:
                with self._lock:
                    self._state, _ = self._state.cancel_replace(node)
                raise
            with self._lock:
                self._state, _ = self._state.finish_replace(node)
            self.bill(started=[new], stopped=[handle])
            self.report_bootstrap(new, info)
            self._emit(Notice(message=f"node {node} replaced: {handle.instance_id} -> {new.instance_id}"))
        except Exception as error:
            self._emit(
                Error(
                    message=f"node {node} could not be replaced after its interruption: {error}",
                    instance_id=handle.instance_id,
                )
            )

    # -- watches ----------------------------------------------------------------------------

    def _cost_ticker(self, flush: Callable[[], None]) -> None:
        while self._active():
            self._emit(self._ledger.update(self._now(), provider=self._provider_name, region=self._region))
            deadline = time.monotonic() + COST_UPDATE_INTERVAL
            while self._active() and time.monotonic() < deadline:
                time.sleep(_TICK)
                flush()

    def _watch_reclaims(self, driver: ReclaimWatch) -> None:
        """For a provider that gives no advance notice: every ``reclaim_poll_interval``
        seconds, ask which spot nodes it took away and take the interruption path for each
        (once per instance). The agent's silence alone is not proof (a network blip looks
        the same), so the provider's own word decides."""
        while self._active():
            deadline = time.monotonic() + driver.reclaim_poll_interval
            while self._active() and time.monotonic() < deadline:
                time.sleep(min(_TICK, driver.reclaim_poll_interval))
            if not self._active():
                return
            watched = self._state.unreported_spot()
            if not watched:
                continue
            try:
                gone = driver.reclaimed(watched)
            except Exception as error:  # the next poll tries again
                self._emit(Notice(message=f"could not check whether spot nodes were reclaimed: {error}"))
                continue
            for handle in watched:
                if handle.instance_id in gone:
                    self.on_interruption(handle.node, handle, gone[handle.instance_id])


def _priced(handle: NodeHandle) -> PricedInstance:
    return PricedInstance(
        instance_id=handle.instance_id,
        spot=handle.spot,
        hourly_price=handle.hourly_price,
        on_demand_price=handle.price_on_demand,
    )
