"""``ComputePool``: provisions nodes through a provider, runs computations, tears down.

Construction validates everything (every candidate's configuration) and provisions nothing. ``with pool:`` (or
``pool.open()``) provisions, bootstraps and connects; leaving the block stops the agents,
terminates every node and removes the provider's infrastructure, whatever happened
inside. A timer stops the pool after ``timeout`` seconds; each node also enforces that
limit (plus ``NODE_TTL_MARGIN``) on its own, and exits when the client has been silent
for its grace period, so nothing outlives the pool because a laptop closed.

The pool is a facade over parts with one job each: ``launcher`` (candidates, failover,
each node's user data, the version check, baking), ``fleet`` (the live nodes while the
pool is open: interruptions, replacements, the timer, the cost ticker), ``runner`` (the
run API) and ``pool_events`` (the event bus, display and event thread). What is left
here is the pool's lifecycle: new -> starting -> active -> stopped.
"""

from __future__ import annotations

import os
import threading
import time
import types
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar, overload

from skyward.agent.config import DEFAULT_AGENT_PORT, node_ports
from skyward.api import failover
from skyward.api.autoscale import AutoscaleSettings
from skyward.api.compute import PendingBatch, PendingCompute
from skyward.api.failover import ProviderChoice
from skyward.api.fleet import Fleet
from skyward.api.kept.keeper import (
    ATTACH_TIMEOUT,
    AttachTarget,
    Keeper,
    NodeFacts,
    attach_notice,
    check_display,
    detach_notice,
    mapped_ports,
    with_display,
)
from skyward.api.kept.record import PoolStore
from skyward.api.kept.stop import Stopper, StopReport, delete_pool_resources, provider_session, stop_pool
from skyward.api.launcher import Candidate, Launcher, make_candidates, result_decoder
from skyward.api.node_changes import version_mismatch
from skyward.api.options import AcceleratorChoice, EventHandler, NodesChoice, PoolOptions, SpotChoice
from skyward.api.pool_events import PoolEvents
from skyward.api.progress import Progress
from skyward.api.runner import Runner
from skyward.api.spec import PoolSpec
from skyward.cost import cost_final
from skyward.errors import (
    AttachError,
    BootstrapTimeoutError,
    ConfigurationError,
    KeyRefusedError,
    PoolClosedError,
    PoolTimeoutError,
    ProvisioningError,
)
from skyward.events import (
    Error,
    LogLine,
    NodeAdded,
    NodeRemoved,
    Notice,
    PoolStarted,
    PoolStopping,
    SkywardEvent,
    TaskProgress,
)
from skyward.files.sender import ShippedFiles
from skyward.image import Image
from skyward.plugins.registry import registry
from skyward.providers.local import Local
from skyward.providers.local_sweep import started_at
from skyward.providers.protocol import NodeHandle, ProviderDriver
from skyward.providers.settings import check_seconds_value, settings_of
from skyward.providers.sweeping import sweep_advice, sweep_installed
from skyward.secrets import EnvValue
from skyward.transport.client import PoolClient
from skyward.transport.security import PoolKeys
from skyward.transport.stream import STREAM_WINDOW, RemoteStream

__all__ = ["ComputePool", "attach", "version_mismatch"]

T = TypeVar("T")
E = TypeVar("E", bound=SkywardEvent)


class ComputePool:
    """A pool of nodes from one provider. See the README for the full parameter table.

    ``provider`` may be a list of candidates (configurations or ``sky.Spec`` values): the
    pool starts on the first that can provide every node, in the order ``selection`` gives
    (``"first"``: as listed; ``"cheapest"``: by the whole pool's live hourly price), and
    moves on only for what another candidate can fix (``skyward.api.failover``). Until it
    opens, ``spec`` and ``provider_name`` are the first candidate's; then the chosen one's."""

    def __init__(
        self,
        provider: ProviderChoice | None = None,
        image: Image | None = None,
        nodes: NodesChoice = 1,
        machine: str | None = None,
        accelerator: AcceleratorChoice | None = None,
        cpu: int | None = None,
        memory: str | int | None = None,
        volume: Sequence[object] | None = None,
        spot: SpotChoice | None = None,
        timeout: float = 3600,
        env: Mapping[str, EnvValue] | None = None,
        concurrency: int = 1,
        display: str = "log",
        on_event: EventHandler | None = None,
        collect_metrics: bool = True,
        pip: Sequence[str] | None = None,
        safe_results: bool | None = None,
        allow_results: Sequence[str | type] = (),
        selection: str = "first",
        max_hourly_cost: float | None = None,
        autoscale_cooldown: float = 30.0,
        autoscale_idle_timeout: float = 60.0,
        replace_lost_nodes: bool = True,
        name: str | None = None,
        keep_alive: float | None = None,
    ) -> None:
        if on_event is not None and not callable(on_event):
            raise ConfigurationError(f"ComputePool(on_event={on_event!r}): must be a callable taking an event")
        options = PoolOptions(
            image=image, nodes=nodes, machine=machine, accelerator=accelerator, cpu=cpu, memory=memory,
            volume=volume, spot=spot, timeout=timeout, env=env, concurrency=concurrency, display=display,
            on_event=on_event, collect_metrics=collect_metrics, pip=pip, safe_results=safe_results,
            allow_results=allow_results, selection=selection, max_hourly_cost=max_hourly_cost,
            autoscale_cooldown=autoscale_cooldown, autoscale_idle_timeout=autoscale_idle_timeout,
            replace_lost_nodes=replace_lost_nodes, name=name, keep_alive=keep_alive,
        )  # fmt: skip
        chosen = failover.selection_of(selection)
        autoscale = AutoscaleSettings(autoscale_cooldown, autoscale_idle_timeout, replace_lost_nodes)
        candidates = make_candidates(Local() if provider is None else provider, options)
        self._setup(candidates, chosen, on_event, autoscale)

    def _setup(
        self,
        candidates: Sequence[Candidate],
        chosen: failover.Selection,
        on_event: EventHandler | None,
        autoscale: AutoscaleSettings,
        target: AttachTarget | None = None,
    ) -> None:
        """What every pool holds, whether it opens new nodes or attaches to kept ones."""
        self._target = target  # the kept pool this one attaches to (None: it makes its own nodes)
        self._attach_timeout = ATTACH_TIMEOUT
        self._launcher = Launcher(candidates, chosen, self.emit, lambda: self._state == "active", autoscale)
        self._events = PoolEvents(self.spec.display, on_event)
        self._state_lock = threading.Lock()
        self._state = "new"  # new -> starting -> active -> stopped
        self._stop_error: BaseException | None = None
        self._stopped = threading.Event()  # set when a shutdown (whoever started it) has finished
        self._owner_pid = os.getpid()
        self._progress = Progress(self._emit_progress)
        self._runner = Runner(self._require_client, self._progress, self._broadcast_width)
        self._keeper = Keeper(PoolStore())  # this pool's record in the skyward home
        self._stop_report: StopReport | None = None  # what stopping an attached pool left, if anything

    # -- what the pool is ---------------------------------------------------------------

    @property
    def spec(self) -> PoolSpec:
        """The validated parameters of the candidate that runs (or will first try) the pool."""
        return self._launcher.candidate.spec

    @property
    def provider_name(self) -> str:
        """The short name of the provider that runs (or will first try) the pool: ``"local"``, ``"aws"``, ..."""
        return self._launcher.candidate.provider_name

    @property
    def is_active(self) -> bool:
        """Whether the pool is open and runs work (between ``open()`` and ``close()``)."""
        return self._state == "active"

    @property
    def instance_count(self) -> int:
        """How many nodes the pool has now (members of the fleet), or will start with before it opens."""
        nodes = self.nodes
        return len(nodes) if nodes else self.spec.nodes

    @property
    def desired_nodes(self) -> int:
        """The node count the pool works towards (``spec.nodes`` until it opens; then what
        the autoscaler or ``resize`` set)."""
        scaler = self._launcher.scaler
        return scaler.desired if scaler is not None and self._state == "active" else self.spec.nodes

    def resize(self, nodes: int) -> None:
        """Set the desired node count by hand, within the pool's bounds (``sky.Nodes``'s
        ``min`` and ``max``): returns at once, the pool grows (new nodes join as they
        answer) or shrinks (nodes drained first, highest index first, idle ones before
        busy ones) in the background, and says ``PoolResized`` then ``NodeAdded`` /
        ``NodeRemoved``. On an elastic pool the autoscaler may change it again after
        ``autoscale_cooldown`` seconds."""
        if self._target is not None:
            raise ConfigurationError(
                f"pool.resize({nodes!r}): an attached pool cannot add or remove nodes (that needs what the provider "
                "made in the process that opened the pool); resize it there, or open a new pool"
            )
        scaler = self._launcher.scaler
        if self._state != "active" or scaler is None:
            raise PoolClosedError("pool.resize: the pool is not open (use it inside 'with ComputePool(...) as pool:')")
        scaler.resize(nodes)

    @property
    def nodes(self) -> tuple[NodeHandle, ...]:
        """The handles of the pool's member nodes, in index order (draining ones included;
        empty before it opens). An elastic or healing pool's members change while it runs."""
        fleet = self._launcher.fleet
        return fleet.handles if fleet is not None else ()

    @property
    def files(self) -> ShippedFiles | None:
        """The project's files this pool shipped (``Image(includes=...)``): their
        ``files_hash``, count and bytes, and the blob bytes that actually crossed the wire
        to its nodes, 0 when every node already had every file. None without includes,
        or before the pool opens."""
        shipment = self._launcher.files
        return shipment.stats() if shipment is not None else None

    @property
    def _fleet(self) -> Fleet | None:
        return self._launcher.fleet

    @property
    def _driver(self) -> ProviderDriver:
        """The current candidate's provider driver (tests and integrations reach it)."""
        return self._launcher.candidate.driver

    @property
    def _keys(self) -> PoolKeys:
        return self._launcher.keys

    @property
    def _client(self) -> PoolClient | None:
        return self._launcher.client

    def __repr__(self) -> str:
        size = self.spec.scaling or self.spec.nodes
        return f"<ComputePool {self.spec.pool_id} {self.provider_name} nodes={size} {self._state}>"

    # -- events -------------------------------------------------------------------------

    def emit(self, event: SkywardEvent) -> None:
        """Deliver ``event`` to the pool's subscribers (on its event thread once open)."""
        self._events.emit(event)

    @overload
    def on(self, event_type: type[E], handler: Callable[[E], object]) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event_type: tuple[type[SkywardEvent], ...] | types.UnionType,
        handler: Callable[[SkywardEvent], object],
    ) -> Callable[[], None]: ...

    def on(
        self,
        event_type: type[E] | tuple[type[SkywardEvent], ...] | types.UnionType,
        handler: Callable[[E], object] | Callable[[SkywardEvent], object],
    ) -> Callable[[], None]:
        """Call ``handler`` for every event of ``event_type`` (a type, tuple or union).
        Returns a function that removes the handler."""
        return self._events.bus.on(event_type, handler)

    def _emit_progress(self, done: int, submitted: int, failed: int) -> None:
        self.emit(TaskProgress(done=done, submitted=submitted, failed=failed))

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> ComputePool:
        if not (self._target is not None and self._state == "active"):  # sky.attach returns it open
            self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> None:
        """Provision, bootstrap and connect every node; raises (having removed whatever
        was made) when no candidate could provide the pool."""
        with self._state_lock:
            if self._state != "new":
                raise PoolClosedError(f"this pool was already opened (state: {self._state}); make a new ComputePool")
            self._state = "starting"
        try:
            if self._target is None:
                self._keeper.claim(self.spec.label)
            else:
                self._keeper.reattached(self._target.record)  # AttachError when another client holds it
        except BaseException:
            with self._state_lock:
                self._state = "stopped"
            self._stopped.set()
            raise
        self._events.start()
        try:
            fleet = self._launch_or_reconnect()
        except BaseException:
            self._teardown_after_failure()
            raise
        with self._state_lock:
            self._state = "active"
        fleet.start_timer(self._time_left(), self._on_timeout)
        self.emit(PoolStarted())
        fleet.watch(self._on_tick)
        self.on(LogLine, self._keeper.log_line)
        self.on((NodeAdded, NodeRemoved), lambda _event: self._record_nodes())
        scaler = self._launcher.scaler
        if scaler is not None:
            scaler.start()
        if self.spec.kept and self._target is None:
            advice = sweep_advice(self.provider_name, self.spec.provider, sweep_installed())
            if advice is not None:
                self.emit(Notice(message=advice))

    def _launch_or_reconnect(self) -> Fleet:
        """New nodes through the provider, or (attaching) a connection to the kept ones;
        then the pool's record."""
        target = self._target
        if target is not None:
            self.emit(Notice(message=attach_notice(target.record, time.time())))
            return self._launcher.reconnect(
                target.handles(), target.pool_keys(), target.answers_as(), target.record.region, target.port_map(),
                timeout=self._attach_timeout,
            )  # fmt: skip
        fleet = self._launcher.launch()
        self._record_nodes()
        return fleet

    def _answers_as(self, fleet: Fleet) -> dict[int, str]:
        user_data = self._launcher.user_data
        return {h.node: user_data.identity(h.node).instance_id for h in fleet.handles}

    def _agent_pids(self) -> dict[int, tuple[int, float | None]]:
        """Each node's agent pid (as its hello said) and, on this machine (Local), the
        process's start time: what ``skyward down`` checks before it signals a pid."""
        local = self.provider_name == "local"
        return {node: (pid, started_at(pid) if local else None) for node, pid in self._launcher.agent_pids.items()}

    def _ports(self, fleet: Fleet) -> dict[int, dict[int, str]]:
        base, last = node_ports(DEFAULT_AGENT_PORT, self.spec.workers_per_node)
        return mapped_ports(fleet.handles, fleet.port_map(), range(base, last + 1))

    def _record_nodes(self) -> None:
        """Record the pool's nodes (at open, and whenever they change)."""
        fleet = self._launcher.fleet
        if fleet is None or self._target is not None:
            return
        facts = NodeFacts(self._answers_as(fleet), self._ports(fleet), self._agent_pids())
        self._keeper.record_nodes(
            self.spec, self.provider_name, self._launcher.region, fleet.handles, self._keys, facts
        )

    def _on_tick(self) -> None:
        """The fleet's ticker: due progress, and the pool's status for ``skyward ls``."""
        self._progress.flush_due()
        client = self._launcher.client
        if client is not None and self._state == "active":
            load = client.load()
            self._keeper.tick(load.running, load.queued)

    def _time_left(self) -> float:
        """Seconds until the pool's timeout: all of it for a new pool; what is left of the
        kept pool's for an attached one (at least a moment, so its timer still fires)."""
        if self._target is None:
            return self.spec.timeout
        return max(self._target.record.expires_at - time.time(), 0.1)

    def _on_timeout(self) -> None:
        error = PoolTimeoutError(
            f"the pool's timeout of {self.spec.timeout:g} s passed: it stopped itself and cancelled "
            "its running tasks (raise ComputePool(timeout=...) for longer work)"
        )
        self.emit(Error(message=str(error), instance_id=None))
        self._shutdown(error)

    def close(self) -> None:
        """Stop the pool: idempotent, safe from any thread. Returns once the nodes are
        terminated and the provider's infrastructure removed, also when the teardown was
        started by someone else (the pool's timeout timer): a script that leaves
        ``with`` never ends while its nodes still run.

        A kept pool (``keep_alive=``) is not stopped but detached: its nodes stay up
        until no client has been attached for ``keep_alive`` seconds (``sky.attach``
        reconnects; ``pool.stop()`` or ``skyward down NAME`` stops it)."""
        error = PoolClosedError("the pool was closed while this task was outstanding")
        self._shutdown(error, detach=self.spec.kept)

    def stop(self) -> None:
        """Stop the pool and its nodes, kept or not, attached or not (``close`` only
        detaches from a kept pool). Returns once they are gone; raises
        ``ProvisioningError`` naming what is left when something could not be stopped."""
        self._shutdown(PoolClosedError("the pool was stopped while this task was outstanding"), detach=False)
        report = self._stop_report
        if report is not None and not report.ok:
            raise ProvisioningError(f"pool {self.spec.label!r}: could not stop {'; '.join(report.left)}")

    @classmethod
    def attach(
        cls,
        name: str,
        *,
        display: str = "log",
        on_event: EventHandler | None = None,
        safe_results: bool | None = None,
        allow_results: Sequence[str | type] = (),
        timeout: float = ATTACH_TIMEOUT,
    ) -> ComputePool:
        """Reconnect to the running nodes of kept pool ``name`` (opened with ``name=`` and
        ``keep_alive=`` by any process of this user on this machine): an open pool that
        runs work as any pool, with no new node. Leaving its ``with`` block (or
        ``close()``) detaches again; ``stop()`` ends it. One client at a time: while
        another holds the pool, attaching raises ``AttachError`` naming it; so does a
        name with no kept pool, keys the nodes refuse, or nodes that stopped. An attached
        pool does not replace a lost node or resize (that needs what the provider made
        in the process that opened the pool): a lost node's tasks fail with
        ``NodeLostError``."""
        if on_event is not None and not callable(on_event):
            raise ConfigurationError(f"sky.attach(on_event={on_event!r}): must be a callable taking an event")
        seconds = check_seconds_value("sky.attach", "timeout", timeout)
        check_display(display)  # bad input is refused before any file is read
        target = AttachTarget.load(PoolStore(), name, time.time())
        spec = with_display(target.spec, display)
        plugin = registry.provider_for(spec.provider)
        candidate = Candidate(
            index=0, label=plugin.name, spec=spec, provider_name=plugin.name,
            driver=plugin.create_driver(spec.provider), settings=settings_of(spec.provider), spot_notice=None,
            decoder=result_decoder(spec.provider, safe_results, allow_results),
        )  # fmt: skip
        pool = cls.__new__(cls)
        pool._setup([candidate], "first", on_event, AutoscaleSettings(replace_lost=False), target)
        pool._attach_timeout = seconds
        try:
            pool.open()
        except KeyRefusedError:
            raise AttachError(
                f"the nodes of pool {name!r} refused this client's key: the keys in {pool._keeper.store.path(name)} "
                "are not the ones its nodes were started with (only the client that opened it wrote them); stop it "
                f"with `skyward down {name}` from there, or let its keep-alive end it"
            ) from None
        except BootstrapTimeoutError:
            raise AttachError(
                f"no node of pool {name!r} answered within {pool._attach_timeout:g} s: its nodes have likely stopped "
                f"(its keep-alive or timeout passed); `skyward down {name}` removes what is left"
            ) from None
        except ProvisioningError as error:
            raise AttachError(f"could not attach to pool {name!r}: {error}") from error
        return pool

    def _shutdown(self, error: BaseException, detach: bool = False) -> None:
        with self._state_lock:
            if self._state in ("stopped", "new"):
                if self._state == "new":
                    self._state = "stopped"
                    self._stopped.set()
                started_elsewhere = True
            else:
                started_elsewhere = False
                self._state = "stopped"
                self._stop_error = error
        if started_elsewhere:
            fleet = self._launcher.fleet
            on_timer = fleet is not None and fleet.on_timer_thread()
            if not on_timer and not self._events.on_event_thread():
                self._stopped.wait()  # the timer's teardown (or another thread's) finishes first
            return
        try:
            self._stop(error, detach)
        finally:
            self._stopped.set()

    def _stop(self, error: BaseException, detach: bool = False) -> None:
        fleet = self._launcher.fleet
        driver = self._driver
        if fleet is not None:
            fleet.stop_watching()
        if self._launcher.scaler is not None:
            self._launcher.scaler.stop()
        self._progress.flush_due()  # the last counts, held back by the throttle: the ticker has stopped
        if detach:
            self._detach(error)
            return
        self.emit(PoolStopping())
        if self._target is not None:
            self._stop_attached(error)
            return
        try:
            self._keeper.leave(detach=False)
            if self._launcher.client is not None:
                self._launcher.client.close(error)
        finally:
            try:
                if fleet is not None:
                    fleet.terminate()
                else:
                    driver.terminate([])
            finally:
                driver.teardown()
                if fleet is not None:
                    self.emit(fleet.cost_final())  # each node for exactly the time it lived
                else:
                    self.emit(cost_final([], 0.0, provider=self.provider_name, region=self._launcher.region))
                self._events.finish()

    def _detach(self, error: BaseException) -> None:
        """Leave a kept pool's nodes running: recall what workers have not begun, close
        this client without stopping the agents, say how to come back."""
        try:
            if self._launcher.client is not None:
                self._launcher.client.close(error, stop_agents=False)
        finally:
            record = self._keeper.leave(detach=True)
            if record is not None:
                self.emit(Notice(message=detach_notice(record, time.time())))
            self._events.finish()

    def _stop_attached(self, error: BaseException) -> None:
        """Stop a kept pool this client attached to: its agents are told to stop, then
        ``stop_pool`` makes sure (Local processes, cloud resources by pool id), as
        ``skyward down NAME`` does; the record goes once nothing is left."""
        try:
            if self._launcher.client is not None:
                self._launcher.client.close(error)
        finally:
            record = self._keeper.let_go()
            try:
                if record is not None:
                    config = self.spec.provider  # the pool's own settings (its API endpoint, region)
                    stopper = Stopper(
                        delete=lambda r: delete_pool_resources(provider_session(r.provider, config), r.pool_id)
                    )
                    self._stop_report = stop_pool(record.name, store=self._keeper.store, stopper=stopper)
            finally:
                self._events.finish()

    def _teardown_after_failure(self) -> None:
        with self._state_lock:
            self._state = "stopped"
        try:
            if self._target is not None:  # attaching failed: the kept nodes stay as they were
                if self._launcher.client is not None:
                    self._launcher.client.close(PoolClosedError("attaching failed"), stop_agents=False)
                self._keeper.leave(detach=True)
            else:
                self._keeper.leave(detach=False)
                self._launcher.teardown_after_failure()
        finally:
            self._events.finish()
            self._stopped.set()

    # -- running computations -------------------------------------------------------------

    def _require_client(self) -> PoolClient:
        if _forked_since(self._owner_pid):
            raise PoolClosedError(
                f"this pool belongs to process {self._owner_pid}; this process ({os.getpid()}) was forked from it "
                "and cannot use it (its sockets and threads stayed in the parent): open a pool in this process, "
                "or send work from the parent"
            )
        client = self._launcher.client
        if self._state != "active" or client is None:
            if self._stop_error is not None and self._state == "stopped":
                why = "its timeout passed" if isinstance(self._stop_error, PoolTimeoutError) else "it was closed"
                raise PoolClosedError(f"this pool is stopped ({why}); make a new ComputePool")
            raise PoolClosedError(
                "this pool is not active: use it inside 'with ComputePool(...) as pool:' (or call pool.open())"
            )
        return client

    def _broadcast_width(self) -> int:
        """How many results ``@`` gives: the client counts the workers of its live nodes."""
        return self._require_client().broadcast_width()

    def submit(self, pending: PendingCompute[T]) -> Future[T]:
        """Run on one worker without waiting: a ``concurrent.futures.Future``. It is
        running once the task was sent to a worker; ``cancel()`` before that succeeds and
        the task never starts, after it returns False (``wait``, ``as_completed`` and
        ``set_running_or_notify_cancel`` behave as for the standard executors)."""
        return self._runner.submit(pending)

    def abandon(self, futures: Sequence[Future[Any]]) -> None:
        """Nobody wants these futures' results (an abort, a timeout): the ones still queued
        are cancelled, the ones sent to a worker but not begun are taken back and never
        start (they end with ``AbandonedError``), the ones running finish as usual."""
        self._runner.abandon(futures)

    def run(self, pending: PendingCompute[T]) -> T:
        """Run on the first available worker and return its result (``pending >> pool``).
        A generator function returns an iterator over what it yields (see ``stream``)."""
        return self._runner.run(pending)

    def stream(
        self,
        pending: PendingCompute[Generator[T, Any, Any]] | PendingCompute[Iterator[T]],
        window: int = STREAM_WINDOW,
    ) -> RemoteStream[T]:
        """Run a generator function on one worker: an iterator over what it yields, as it
        yields it (``pending >> pool`` with the default ``window``). The worker sends at
        most ``window`` values ahead of your loop, then waits; ``close()`` (or dropping
        the iterator, as ``break`` does) stops the generator there, running its ``finally``."""
        return self._runner.stream(pending, window)

    def run_batch(self, batch: PendingBatch[Any]) -> tuple[Any, ...]:
        """Run every computation of the batch in parallel; results in order. The first
        failure (in batch order) is raised and what has not begun never starts."""
        return self._runner.run_batch(batch)

    def broadcast(self, pending: PendingCompute[T]) -> tuple[T, ...]:
        """Run on every worker of every node live when it is called (``pending @ pool``);
        one result per worker, ordered by node then worker. A node joining, draining or
        being replaced at that moment is left out, and a ``Notice`` names it; with no live
        node it fails with ``NodeLostError``."""
        client = self._require_client()
        live = client.live_nodes()
        left_out = sorted({h.node for h in self.nodes} - set(live))
        if left_out:
            names = ", ".join(map(str, left_out))
            self.emit(
                Notice(message=f"@ runs on nodes {', '.join(map(str, live)) or 'none'}: node(s) {names} "
                       "not live now (joining, draining or being replaced)")
            )  # fmt: skip
        return self._runner.broadcast(pending)


def attach(
    name: str,
    *,
    display: str = "log",
    on_event: EventHandler | None = None,
    safe_results: bool | None = None,
    allow_results: Sequence[str | type] = (),
    timeout: float = ATTACH_TIMEOUT,
) -> ComputePool:
    """Reconnect to kept pool ``name``: ``ComputePool.attach`` (see there)."""
    return ComputePool.attach(
        name,
        display=display,
        on_event=on_event,
        safe_results=safe_results,
        allow_results=allow_results,
        timeout=timeout,
    )


_fork_generation = 0  # bumped in a forked child: a pool compares it without a syscall per call


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


def _forked_since(owner_pid: int) -> bool:
    """Whether this process is a fork of the one that opened the pool (checked on every
    call, so it reads a counter; ``os.getpid()`` only when a fork happened)."""
    return _fork_generation > 0 and os.getpid() != owner_pid
