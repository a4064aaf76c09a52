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

from skyward.api import failover
from skyward.api.autoscale import AutoscaleSettings
from skyward.api.compute import PendingBatch, PendingCompute
from skyward.api.failover import ProviderChoice
from skyward.api.fleet import Fleet
from skyward.api.kept.record import PoolStore, client_alive
from skyward.api.kept.registration import Registration, keys_of, record_of
from skyward.api.launcher import Launcher, make_candidates
from skyward.api.node_changes import version_mismatch
from skyward.api.options import AcceleratorChoice, EventHandler, NodesChoice, PoolOptions, SpotChoice
from skyward.api.pool_events import PoolEvents
from skyward.api.progress import Progress
from skyward.api.runner import Runner
from skyward.api.spec import PoolSpec
from skyward.cost import cost_final
from skyward.errors import ConfigurationError, PoolClosedError, PoolTimeoutError
from skyward.events import Error, Notice, PoolStarted, PoolStopping, SkywardEvent, TaskProgress
from skyward.image import Image
from skyward.providers.local import Local
from skyward.providers.protocol import NodeHandle, ProviderDriver
from skyward.transport.client import PoolClient
from skyward.transport.security import PoolKeys
from skyward.transport.stream import STREAM_WINDOW, RemoteStream

__all__ = ["ComputePool", "version_mismatch"]

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
        env: Mapping[str, str] | None = None,
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
        self._launcher = Launcher(candidates, chosen, self.emit, lambda: self._state == "active", autoscale)
        self._events = PoolEvents(self.spec.display, on_event)
        self._state_lock = threading.Lock()
        self._state = "new"  # new -> starting -> active -> stopped
        self._stop_error: BaseException | None = None
        self._stopped = threading.Event()  # set when a shutdown (whoever started it) has finished
        self._owner_pid = os.getpid()
        self._progress = Progress(self._emit_progress)
        self._runner = Runner(self._require_client, self._progress, self._broadcast_width)
        self._store = PoolStore()
        self._registration: Registration | None = None  # this pool's entry in the store, once open

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
            self._store.claim(self.spec.label, time.time(), client_alive)
        except BaseException:
            with self._state_lock:
                self._state = "stopped"
            self._stopped.set()
            raise
        self._events.start()
        try:
            fleet = self._launcher.launch()
            self._registration = Registration.register(
                self._store,
                record_of(self.spec, self.provider_name, self._launcher.region, fleet.handles, time.time()),
                keys_of(self._keys, fleet.handles),
                self.spec,
            )
        except BaseException:
            self._teardown_after_failure()
            raise
        with self._state_lock:
            self._state = "active"
        fleet.start_timer(self.spec.timeout, self._on_timeout)
        self.emit(PoolStarted())
        fleet.watch(self._progress.flush_due)
        scaler = self._launcher.scaler
        if scaler is not None:
            scaler.start()

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
        ``with`` never ends while its nodes still run."""
        self._shutdown(PoolClosedError("the pool was closed while this task was outstanding"))

    def _shutdown(self, error: BaseException) -> None:
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
            self._stop(error)
        finally:
            self._stopped.set()

    def _stop(self, error: BaseException) -> None:
        fleet = self._launcher.fleet
        driver = self._driver
        if fleet is not None:
            fleet.stop_watching()
        if self._launcher.scaler is not None:
            self._launcher.scaler.stop()
        self.emit(PoolStopping())
        try:
            if self._registration is not None:
                self._registration.end(kept=False)
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

    def _teardown_after_failure(self) -> None:
        with self._state_lock:
            self._state = "stopped"
        try:
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


_fork_generation = 0  # bumped in a forked child: a pool compares it without a syscall per call


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


def _forked_since(owner_pid: int) -> bool:
    """Whether this process is a fork of the one that opened the pool (checked on every
    call, so it reads a counter; ``os.getpid()`` only when a fork happened)."""
    return _fork_generation > 0 and os.getpid() != owner_pid
