"""``ComputePool``: provisions nodes through a provider, runs computations, tears down.

Construction validates everything (every candidate's configuration) and provisions nothing. ``with pool:`` (or
``pool.open()``) provisions, bootstraps and connects; leaving the block stops the agents,
terminates every node and removes the provider's infrastructure, whatever happened
inside. A timer stops the pool after ``timeout`` seconds; each node also enforces that
limit (plus ``NODE_TTL_MARGIN``) on its own, and exits when the client has been silent
for its grace period, so nothing outlives the pool because a laptop closed.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from skyward.agent.config import AgentConfig
from skyward.agent.notices import NoticeKind
from skyward.api import failover
from skyward.api.compute import PendingBatch, PendingCompute
from skyward.api.progress import Progress
from skyward.api.spec import PoolSpec, build_spec
from skyward.errors import (
    ConfigurationError,
    PoolClosedError,
    PoolTimeoutError,
    ProvisioningError,
    UnavailableError,
    VersionMismatchError,
)
from skyward.image import CLIENT_PYTHON, BootstrapContext, Image
from skyward.plugins.contributions import BootstrapStep
from skyward.plugins.registry import registry
from skyward.providers import rules
from skyward.providers.protocol import (
    FollowsBootstrap,
    NodeHandle,
    PortMapping,
    ProviderDriver,
    ReclaimWatch,
    SpotMarket,
    SpotReplacement,
    VolumeMounts,
)
from skyward.providers.settings import NODE_TTL_MARGIN, ProviderSettings, settings_of
from skyward.transport import serialize, wire
from skyward.transport.client import PoolClient
from skyward.transport.handshake import NodeIdentity
from skyward.transport.inputs import split_inputs
from skyward.transport.results import ResultDecoder
from skyward.transport.safe_pickle import ResultPolicy, safe_loads, third_party_hosts
from skyward.transport.security import PoolKeys
from skyward.transport.stream import STREAM_WINDOW, RemoteStream
from skyward.wheels.cache import OfferedWheels

T = TypeVar("T")

COST_UPDATE_INTERVAL = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class _Candidate:
    """One candidate, validated at construction: what the pool needs to start on it."""

    index: int
    label: str
    spec: PoolSpec
    provider_name: str
    driver: ProviderDriver
    settings: ProviderSettings
    spot_notice: str | None
    decoder: ResultDecoder


def _common_rules(provider_name: str, driver: ProviderDriver, spec: PoolSpec) -> str | None:
    """The rules every provider shares (skyward.providers.rules); returns the Notice
    a pool that runs on-demand instead of spot says when it opens."""
    rules.unmounted_volumes(provider_name, spec.volumes, isinstance(driver, VolumeMounts))
    if isinstance(driver, VolumeMounts):
        for volume in spec.volumes:
            if not driver.mounts(volume):
                raise ConfigurationError(
                    f"ComputePool(volume=...): the {provider_name} provider cannot mount {volume!r}"
                )
    if isinstance(driver, SpotMarket):
        return None
    return rules.spot_without_market(provider_name, spec.spot)


class _EventPump:
    """Delivers events on a thread of their own: a slow user callback never stalls I/O."""

    def __init__(self, deliver: Callable[[Any], None]) -> None:
        self._deliver = deliver
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="skyward-events", daemon=True)
        self._thread.start()

    def put(self, event: Any) -> None:
        self._queue.put(event)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            self._deliver(event)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)


class ComputePool:
    """A pool of nodes from one provider. See the README for the full parameter table.

    ``provider`` may be a list of candidates (configurations or ``sky.Spec`` values): the
    pool starts on the first that can provide every node, in the order ``selection`` gives
    (``"first"``: as listed; ``"cheapest"``: by the whole pool's live hourly price), and
    moves on only for what another candidate can fix (``skyward.api.failover``). Until it
    opens, ``spec`` and ``provider_name`` are the first candidate's; then the chosen one's."""

    def __init__(
        self,
        provider: Any = None,
        image: Image | None = None,
        nodes: int = 1,
        machine: str | None = None,
        accelerator: Any = None,
        cpu: int | None = None,
        memory: str | int | None = None,
        volume: Sequence[Any] | None = None,
        spot: Any = None,
        timeout: float = 3600,
        env: Mapping[str, str] | None = None,
        concurrency: int = 1,
        display: str = "log",
        on_event: Callable[[Any], Any] | None = None,
        collect_metrics: bool = True,
        pip: Sequence[str] | None = None,
        safe_results: bool | None = None,
        allow_results: Sequence[str | type] = (),
        selection: str = "first",
        max_hourly_cost: float | None = None,
    ) -> None:
        from skyward.callbacks import EventBus
        from skyward.display import create_display
        from skyward.providers.local import Local

        if provider is None:
            provider = Local()
        if on_event is not None and not callable(on_event):
            raise ConfigurationError(f"ComputePool(on_event={on_event!r}): must be a callable taking an event")
        self._selection = failover.selection_of(selection)
        candidates = failover.candidates_from(
            provider, accelerator=accelerator, spot=spot, machine=machine, max_hourly_cost=max_hourly_cost
        )
        self._candidates: list[_Candidate] = []
        pool_id: str | None = None
        for index, candidate in enumerate(candidates):
            spec = build_spec(
                provider=candidate.provider, image=image, pip=pip, nodes=nodes, machine=candidate.machine,
                accelerator=candidate.accelerator, cpu=cpu, memory=memory, volume=volume, spot=candidate.spot,
                timeout=timeout, env=env, concurrency=concurrency, display=display,
                collect_metrics=collect_metrics, max_hourly_cost=candidate.max_hourly_cost,
            )  # fmt: skip
            pool_id = pool_id or spec.pool_id
            spec = dataclasses.replace(spec, pool_id=pool_id)  # one pool, whichever candidate runs it
            plugin = registry.provider_for(candidate.provider)
            driver: ProviderDriver = plugin.create_driver(candidate.provider)
            notice = _common_rules(plugin.name, driver, spec)
            driver.validate(spec)  # every candidate's configuration, before anything is made
            self._candidates.append(
                _Candidate(
                    index=index,
                    label=failover.label(index, plugin.name, candidate.provider),
                    spec=spec,
                    provider_name=plugin.name,
                    driver=driver,
                    settings=settings_of(candidate.provider),
                    spot_notice=notice,
                    decoder=_result_decoder(candidate.provider, safe_results, allow_results),
                )
            )
        self._use(self._candidates[0])
        self._region = ""  # where the pool runs, as the provider's prepare() named it
        self._candidate_clean = False  # the current candidate's resources were all removed
        self._plugin_steps = _plugin_steps(self.spec.image)  # once, and before anything starts
        self._display = create_display(self.spec.display)
        self._bus = EventBus(on_event=on_event, display=self._display)
        self._pump: _EventPump | None = None
        self._keys = PoolKeys()  # a server keypair per node, made as its user-data is rendered
        self._rendered: dict[int, str] = {}  # node -> the instance id its latest user-data names
        self._fn_pickles = serialize.FunctionPickles()  # pickled functions reused across calls
        self._client: PoolClient | None = None
        self._wheels = OfferedWheels()  # what the nodes' user-data names: sent when they ask
        self._nodes: list[NodeHandle] = []
        self._mapped: dict[int, NodeHandle] = {}  # node -> its newest handle (PortMapping)
        self._started_at = 0.0
        self._timer: threading.Timer | None = None
        self._cost_thread: threading.Thread | None = None
        self._state_lock = threading.Lock()
        self._state = "new"  # new -> starting -> active -> stopped
        self._stop_error: BaseException | None = None
        self._head_port = _free_port()
        self._cluster: list[bytes] = []
        self._progress = Progress(self._emit_progress)
        self._stopped = threading.Event()  # set when a shutdown (whoever started it) has finished
        self._owner_pid = os.getpid()
        self._reclaim_thread: threading.Thread | None = None
        self._interrupted: set[str] = set()  # instance ids that took the interruption path

    # -- events -----------------------------------------------------------------------

    def emit(self, event: Any) -> None:
        if self._pump is not None:
            self._pump.put(event)
        else:
            self._bus.emit(event)

    def _use(self, candidate: _Candidate) -> None:
        """Make ``candidate`` the pool's provider (its spec, driver, settings, decoder)."""
        self.spec = candidate.spec
        self.provider_name = candidate.provider_name
        self._driver = candidate.driver
        self._settings = candidate.settings
        self._spot_notice = candidate.spot_notice
        self._decoder = candidate.decoder

    def on(self, event_type: Any, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``handler`` for every event of ``event_type`` (a type, tuple or union).
        Returns a function that removes the handler."""
        return self._bus.on(event_type, handler)

    # -- lifecycle --------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._state == "active"

    @property
    def instance_count(self) -> int:
        return len(self._nodes) if self._nodes else self.spec.nodes

    @property
    def nodes(self) -> tuple[NodeHandle, ...]:
        return tuple(self._nodes)

    def __enter__(self) -> ComputePool:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _bake_if_asked(self) -> None:
        """``Image(bake=True)``: once every agent has answered, a provider that bakes
        saves node 0's disk when no baked image matched (skyward.baking)."""
        from skyward.baking import Bakes
        from skyward.events import Notice

        if not self.spec.image.bake or not self._nodes:
            return
        if isinstance(self._driver, Bakes):
            self._driver.bake(self.spec, self._nodes[0], self.emit)
        else:
            self.emit(Notice(message=f"Image(bake=True): the {self.provider_name} provider does not bake images"))

    def open(self) -> None:
        from skyward.events import PoolStarted

        with self._state_lock:
            if self._state != "new":
                raise PoolClosedError(f"this pool was already opened (state: {self._state}); make a new ComputePool")
            self._state = "starting"
        self._pump = _EventPump(self._bus.emit)
        try:
            self._start_some_candidate()
        except BaseException:
            self._teardown_after_failure()
            raise
        self._started_at = time.monotonic()
        with self._state_lock:
            self._state = "active"
        self._timer = threading.Timer(self.spec.timeout, self._on_timeout)
        self._timer.daemon = True
        self._timer.start()
        self.emit(PoolStarted())
        self._cost_thread = threading.Thread(target=self._cost_ticker, name="skyward-cost", daemon=True)
        self._cost_thread.start()
        if isinstance(self._driver, ReclaimWatch) and any(n.spot for n in self._nodes):
            self._reclaim_thread = threading.Thread(
                target=self._watch_reclaims, args=(self._driver,), name="skyward-reclaims", daemon=True
            )
            self._reclaim_thread.start()

    def _start_some_candidate(self) -> None:
        """Start the pool on the first candidate (in the selection's order) that can
        provide it. One that fails for a reason another may not share is cleaned up
        entirely, said in a CandidateFailed event, and the next one starts from nothing;
        any other failure stops here. With one candidate, its error is raised as is."""
        from skyward.events import CandidateFailed, Notice

        candidates = self._candidates
        if len(candidates) == 1:
            self._start_candidate(candidates[0])
            return
        prices: list[float | None] = [None] * len(candidates)
        if self._selection == "cheapest":
            prices = self._prices()
            ranked = failover.order(self._selection, prices)
            labels = [candidates[i].label for i in ranked]
            self.emit(Notice(message="cheapest first: " + failover.ranking(labels, [prices[i] for i in ranked])))
        failures: list[tuple[str, UnavailableError]] = []
        for index in failover.order(self._selection, prices):
            candidate = candidates[index]
            try:
                self._start_candidate(candidate)
                return
            except Exception as error:
                reason = failover.moves_on(error)
                if reason is None:
                    raise
                self._clean_candidate()  # raises (and stops) when something was left behind
                failures.append((candidate.label, reason))
                region = (
                    candidate.spec.provider.region if isinstance(candidate.spec.provider, failover.Regional) else None
                )
                self.emit(
                    CandidateFailed(
                        candidate=index, provider=candidate.provider_name, region=region, reason=reason.reason,
                        message=str(reason),
                    )
                )  # fmt: skip
        raise failover.all_failed(failures)

    def _prices(self) -> list[float | None]:
        """Each candidate's whole-pool hourly price from its provider's offers (None:
        unknown, tried after every priced one)."""
        from skyward.api.candidate_prices import candidate_price

        return [candidate_price(c.spec, c.driver) for c in self._candidates]

    def _start_candidate(self, candidate: _Candidate) -> None:
        from skyward.events import InfraCreated, InfraCreating, Notice

        self._use(candidate)
        self._keys = PoolKeys()  # nothing a failed candidate left running answers to this one's keys
        self._candidate_clean = False
        self.emit(InfraCreating())
        if self._spot_notice is not None:
            self.emit(Notice(message=self._spot_notice))
        self._region = self._driver.prepare(self.spec, self.emit)
        self.emit(InfraCreated(region=self._region))
        self._nodes = self._driver.launch(self.spec, self._user_data, self.emit)
        infos = self._connect()
        for handle, info in zip(self._nodes, infos, strict=True):
            self._report_bootstrap(handle, info)
        self._bake_if_asked()

    def _clean_candidate(self) -> None:
        """Remove everything the current candidate made (client, nodes, infrastructure)
        before the next one starts."""
        client, nodes = self._client, self._nodes
        self._client, self._nodes = None, []
        try:
            if client is not None:
                client.close(ProvisioningError("the pool moved on to another candidate"))
        finally:
            try:
                self._driver.terminate(nodes)
            finally:
                self._driver.teardown()
        self._candidate_clean = True  # nothing for _teardown_after_failure to remove twice

    def _user_data(
        self,
        node: int,
        bind: str,
        context: BootstrapContext,
        *,
        run_dir: str,
        visible_devices: Sequence[str | None] = (),
        instance_id: str = "",
    ) -> str:
        spec = self.spec
        grace = float(self._settings.grace_period)
        # A cloud node partitions its own GPUs; a driver that maps devices itself (Local,
        # or a provider whose machines come partitioned) passes visible_devices instead.
        mig = spec.accelerator is not None and bool(spec.accelerator.mig) and not visible_devices
        mig_steps: list[tuple[str, str]] = []
        if mig and spec.accelerator is not None:
            from skyward.accelerators.mig_node import mig_setup_script

            mig_steps.append(("mig", mig_setup_script(spec.accelerator.mig, spec.accelerator.count)))
        config = AgentConfig(
            pool_id=spec.pool_id,
            node=node,
            total_nodes=spec.nodes,
            workers=spec.workers_per_node,
            bind=bind,
            run_dir=run_dir,
            server_secret=self._keys.node(node).secret.decode() if bind.startswith("tcp://") else None,
            client_public=self._keys.client.public.decode() if bind.startswith("tcp://") else None,
            ttl_seconds=spec.timeout + NODE_TTL_MARGIN,
            grace_seconds=grace,
            metrics_interval=2.0 if spec.collect_metrics else 0.0,
            accelerators=[str(spec.accelerator)] * max(1, spec.partitions) if spec.accelerator else [],
            visible_devices=list(visible_devices),
            mig_devices=spec.partitions if mig else 0,
            instance_id=instance_id,
        )
        from skyward.agent.config import ENV_VAR

        self._rendered[node] = instance_id
        self._wheels.offer(context.wheels)
        steps = [*mig_steps, *((s.name, s.script) for s in self._plugin_steps)]
        steps += [("volumes", script) for script in _volume_scripts(spec.volumes)]
        ctx = dataclasses.replace(  # every field the provider set (``baked`` among them)
            context,
            agent_env={**context.agent_env, ENV_VAR: config.to_json()},
            extra_steps=(*context.extra_steps, *steps),
        )
        return spec.image.bootstrap(int(spec.timeout + NODE_TTL_MARGIN), context=ctx)

    def _identity(self, node: int) -> NodeIdentity:
        """Who must answer at node ``node``'s endpoint: what its latest user-data names."""
        return NodeIdentity(self.spec.pool_id, node, self._rendered.get(node, ""))

    def _report_bootstrap(self, handle: NodeHandle, info: dict[str, Any]) -> None:
        """BootstrapCompleted for a node whose agent answered: said here, and only here,
        for every provider. Before it, BootstrapProgress for each step its agent's hello
        lists, unless the driver followed the bootstrap live (FollowsBootstrap: Local reads
        its nodes' stdout); a cloud node's stdout cannot be read while it boots."""
        from skyward.events import BootstrapCompleted, BootstrapProgress

        followed = isinstance(self._driver, FollowsBootstrap)
        for step in [] if followed else info.get("bootstrap_steps", []):
            self.emit(BootstrapProgress(instance_id=handle.instance_id, step=step))
        self.emit(BootstrapCompleted(instance_id=handle.instance_id))

    def _port_map(self) -> Callable[[int, int], str] | None:
        """For a provider whose nodes are containers behind a host's port mapping
        (PortMapping): each worker's port is looked up through it, on the node's newest
        handle (a replacement's included, set before its handshake)."""
        driver = self._driver
        if not isinstance(driver, PortMapping):
            return None
        self._mapped = {n.node: n for n in self._nodes}
        return lambda node, port: driver.mapped_endpoint(self._mapped[node], port)

    def _connect(self) -> list[dict[str, Any]]:
        """Connects to every agent and checks it can serve this client; returns their hellos."""
        import cloudpickle

        endpoints = [n.endpoint for n in self._nodes]
        self._client = PoolClient(
            endpoints,
            self._keys,
            self._on_node_message,
            rerun_interrupted=any(n.spot for n in self._nodes),
            decoder=self._decoder,
            port_map=self._port_map(),
            wheels=self._wheels,
            identities=[self._identity(n.node) for n in self._nodes],
        )
        infos = self._client.connect(timeout=float(self._settings.bootstrap_timeout))
        for node, info in zip(self._nodes, infos, strict=True):
            problem = version_mismatch(node.node, info, CLIENT_PYTHON, cloudpickle.__version__)
            if problem is not None:
                raise VersionMismatchError(problem)
        head = self._nodes[0]
        cluster = {
            "head_addr": head.private_ip or head.ip or "127.0.0.1",
            "head_port": self._head_port,
            "total_nodes": len(self._nodes),
            "job_id": self.spec.pool_id,
        }
        self._cluster = [wire.CLUSTER, wire.encode_json(cluster)]
        self._client.broadcast_control(self._cluster)
        return infos

    def _on_node_message(self, node: int, kind: bytes, payload: Any) -> None:
        from skyward.events import Error, LogLine, Metrics, Notice

        handle = self._nodes[node]
        if kind == wire.LOG:
            for line in payload["lines"]:
                self.emit(LogLine(node=node, instance_id=handle.instance_id, line=line, timestamp=payload["ts"]))
        elif kind == wire.METRICS:
            self.emit(Metrics(instance_id=handle.instance_id, node=node, **payload))
        elif kind == wire.NOTICE:
            if payload.get("kind") == "worker-ready":
                self.emit(Notice(message=f"node {node}: worker {payload['worker']} restarted and ready"))
            elif payload.get("kind") == NoticeKind.INTERRUPTION:
                self._on_interruption(node, handle, str(payload.get("message")))
            elif payload.get("kind") == NoticeKind.REBALANCE:
                self.emit(Notice(message=f"node {node} ({handle.instance_id}): {payload.get('message')}"))
            else:
                self.emit(Error(message=str(payload.get("message")), instance_id=handle.instance_id))

    def _on_interruption(self, node: int, handle: NodeHandle, reason: str) -> None:
        """A spot node got its notice: tell the user, move its work to the other nodes,
        and, where the provider's strategy says so (Spot.Always), start a replacement.
        Once per instance: a provider with both a notice and a reclaim watch (or a notice
        file seen twice) does not start two replacements."""
        from skyward.events import InstanceInterrupted

        with self._state_lock:
            if handle.instance_id in self._interrupted:
                return
            self._interrupted.add(handle.instance_id)
        self.emit(InstanceInterrupted(instance_id=handle.instance_id, node=node, reason=reason))
        if self._client is not None:
            self._client.drain_node(node)
        driver = self._driver
        if isinstance(driver, SpotReplacement) and driver.replaces_interrupted(self.spec):
            threading.Thread(
                target=self._replace_node, args=(driver, node, handle), name=f"skyward-replace-{node}", daemon=True
            ).start()

    def _watch_reclaims(self, driver: ReclaimWatch) -> None:
        """For a provider that gives no advance notice: every ``reclaim_poll_interval``
        seconds, ask which spot nodes it took away and take the interruption path for each
        (once per instance). The agent's silence alone is not proof (a network blip looks
        the same), so the provider's own word decides."""
        from skyward.events import Notice

        seen: set[str] = set()
        while self._state == "active":
            deadline = time.monotonic() + driver.reclaim_poll_interval
            while self._state == "active" and time.monotonic() < deadline:
                time.sleep(min(0.2, driver.reclaim_poll_interval))
            if self._state != "active":
                return
            watched = [n for n in self._nodes if n.spot and n.instance_id not in seen]
            if not watched:
                continue
            try:
                gone = driver.reclaimed(watched)
            except Exception as error:  # the next poll tries again
                self.emit(Notice(message=f"could not check whether spot nodes were reclaimed: {error}"))
                continue
            for handle in watched:
                if handle.instance_id in gone:
                    seen.add(handle.instance_id)
                    self._on_interruption(handle.node, handle, gone[handle.instance_id])

    def _replace_node(self, driver: SpotReplacement, node: int, handle: NodeHandle) -> None:
        from skyward.events import Error, Notice

        try:
            self._keys.renew(node)  # the replacement's own key: the node it replaces cannot answer for it
            new = driver.replace(self.spec, handle, self._user_data, self.emit)
            timeout = float(self._settings.bootstrap_timeout)
            if self._client is None or self._state != "active":
                return
            self._mapped[node] = new
            info = self._client.replace_node(node, new.endpoint, self._cluster, timeout, self._identity(node))
            self._nodes[node] = new
            self._report_bootstrap(new, info)
            self.emit(Notice(message=f"node {node} replaced: {handle.instance_id} -> {new.instance_id}"))
        except Exception as error:
            self.emit(
                Error(
                    message=f"node {node} could not be replaced after its interruption: {error}",
                    instance_id=handle.instance_id,
                )
            )

    def _priced(self) -> list[Any]:
        from skyward.cost import PricedInstance

        return [
            PricedInstance(
                instance_id=n.instance_id, spot=n.spot, hourly_price=n.hourly_price, on_demand_price=n.price_on_demand
            )
            for n in self._nodes
        ]

    def _cost_ticker(self) -> None:
        from skyward.cost import cost_update

        while self._state == "active":
            elapsed = time.monotonic() - self._started_at
            self.emit(cost_update(self._priced(), elapsed, provider=self.provider_name, region=self._region))
            deadline = time.monotonic() + COST_UPDATE_INTERVAL
            while self._state == "active" and time.monotonic() < deadline:
                time.sleep(0.2)
                self._progress.flush_due()

    def _on_timeout(self) -> None:
        from skyward.events import Error

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
            pump = self._pump._thread if self._pump is not None else None
            if threading.current_thread() not in (self._timer, pump):
                self._stopped.wait()  # the timer's teardown (or another thread's) finishes first
            return
        try:
            self._stop(error)
        finally:
            self._stopped.set()

    def _stop(self, error: BaseException) -> None:
        from skyward.cost import cost_final
        from skyward.events import InstanceStopping, PoolStopping

        if self._timer is not None:
            self._timer.cancel()
        elapsed = time.monotonic() - self._started_at if self._started_at else 0.0
        self.emit(PoolStopping())
        try:
            if self._client is not None:
                self._client.close(error)
        finally:
            for handle in self._nodes:
                self.emit(InstanceStopping(instance_id=handle.instance_id))
            try:
                self._driver.terminate(self._nodes)
            finally:
                self._driver.teardown()
                self.emit(cost_final(self._priced(), elapsed, provider=self.provider_name, region=self._region))
                self._finish_events()

    def _teardown_after_failure(self) -> None:
        with self._state_lock:
            self._state = "stopped"
        try:
            if self._client is not None:
                self._client.close(ProvisioningError("the pool failed to start"))
        finally:
            try:
                if not self._candidate_clean:
                    self._driver.terminate(self._nodes)
            finally:
                try:
                    if not self._candidate_clean:
                        self._driver.teardown()
                finally:
                    self._finish_events()
                    self._stopped.set()

    def _finish_events(self) -> None:
        if self._pump is not None:
            self._pump.close()
        close = getattr(self._display, "close", None)
        if close is not None:
            close()

    # -- running computations -----------------------------------------------------------

    def _require_client(self) -> PoolClient:
        if _forked_since(self._owner_pid):
            raise PoolClosedError(
                f"this pool belongs to process {self._owner_pid}; this process ({os.getpid()}) was forked from it "
                "and cannot use it (its sockets and threads stayed in the parent): open a pool in this process, "
                "or send work from the parent"
            )
        if self._state != "active" or self._client is None:
            if self._stop_error is not None and self._state == "stopped":
                why = "its timeout passed" if isinstance(self._stop_error, PoolTimeoutError) else "it was closed"
                raise PoolClosedError(f"this pool is stopped ({why}); make a new ComputePool")
            raise PoolClosedError(
                "this pool is not active: use it inside 'with ComputePool(...) as pool:' (or call pool.open())"
            )
        return self._client

    def _payload(
        self,
        pending: PendingCompute[Any],
        functions: dict[int, tuple[bytes, bytes]],
        inputs: list[tuple[str, Any]] | None = None,
    ) -> list[serialize.Frame]:
        """The task's frames. Arguments for parameters annotated ``Iterator[T]`` or
        ``Iterable[T]`` are input streams: they go to ``inputs`` (the worker pulls them
        as it reads them); where ``inputs`` is None (``@``, ``gather``), they are refused."""
        if not isinstance(pending, PendingCompute):
            raise ConfigurationError(
                f"a pool runs computations (the result of calling a @compute function), got {pending!r}"
            )
        key_raw = functions.get(id(pending.fn))
        if key_raw is None:
            key_raw = self._fn_pickles.get(pending.fn)
            functions[id(pending.fn)] = key_raw
        args, kwargs, streams = split_inputs(pending.fn, pending.args, pending.kwargs)
        if streams:
            if inputs is None:
                raise ConfigurationError(
                    f"argument {streams[0][0]!r} of {pending.name} is an input stream (annotated Iterator/Iterable): "
                    "it streams to one worker, so run it with >>, pool.submit or pool.stream, not @, & or gather"
                )
            inputs.extend(streams)
        return [*key_raw, *serialize.dumps_arguments(pending.fn, args, kwargs)]

    def _emit_progress(self, done: int, submitted: int, failed: int) -> None:
        from skyward.events import TaskProgress

        self.emit(TaskProgress(done=done, submitted=submitted, failed=failed))

    def submit(self, pending: PendingCompute[T]) -> Future[T]:
        """Run on one worker without waiting: a ``concurrent.futures.Future``. It is
        running once the task was sent to a worker; ``cancel()`` before that succeeds and
        the task never starts, after it returns False (``wait``, ``as_completed`` and
        ``set_running_or_notify_cancel`` behave as for the standard executors)."""
        if isinstance(pending, PendingCompute) and pending.is_stream:
            raise ConfigurationError(
                f"pool.submit({pending.name}(...)): a generator function streams its values; "
                "iterate `computation >> pool` or pool.stream(computation) instead of a Future"
            )
        client = self._require_client()
        inputs: list[tuple[str, Any]] = []
        payload = self._payload(pending, {}, inputs)
        future = client.submit_with_inputs(payload, inputs) if inputs else client.submit(payload)
        self._progress.track(future)
        return future

    def abandon(self, futures: Sequence[Future[Any]]) -> None:
        """Nobody wants these futures' results (an abort, a timeout): the ones still queued
        are cancelled, the ones sent to a worker but not begun are taken back and never
        start (they end with ``AbandonedError``), the ones running finish as usual."""
        self._require_client().abandon_futures(futures)

    def run(self, pending: PendingCompute[T]) -> T:
        """Run on the first available worker and return its result (``pending >> pool``).
        A generator function returns an iterator over what it yields (see ``stream``)."""
        if pending.is_stream:
            return self.stream(pending)  # type: ignore[arg-type,return-value]
        client = self._require_client()
        inputs: list[tuple[str, Any]] = []
        payload = self._payload(pending, {}, inputs)
        self._progress.add(1)
        try:
            result = client.run(payload) if not inputs else client.submit_with_inputs(payload, inputs).result()
        except BaseException:
            self._progress.finished(failed=True)
            raise
        self._progress.finished(failed=False)
        return result  # type: ignore[no-any-return]

    def stream(
        self,
        pending: PendingCompute[Generator[T, Any, Any]] | PendingCompute[Iterator[T]],
        window: int = STREAM_WINDOW,
    ) -> RemoteStream[T]:
        """Run a generator function on one worker: an iterator over what it yields, as it
        yields it (``pending >> pool`` with the default ``window``). The worker sends at
        most ``window`` values ahead of your loop, then waits; ``close()`` (or dropping
        the iterator, as ``break`` does) stops the generator there, running its ``finally``."""
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigurationError(f"ComputePool.stream(window={window!r}): must be an int >= 1")
        if not isinstance(pending, PendingCompute) or not pending.is_stream:
            raise ConfigurationError(
                f"ComputePool.stream needs a computation of a generator function (def with yield), got {pending!r}"
            )
        client = self._require_client()
        inputs: list[tuple[str, Any]] = []
        payload = self._payload(pending, {}, inputs)
        self._progress.add(1)
        return client.stream(payload, window=window, on_finish=self._progress.finished, inputs=inputs or None)

    def run_batch(self, batch: PendingBatch[Any]) -> tuple[Any, ...]:
        """Run every computation of the batch in parallel; results in order. The first
        failure (in batch order) is raised and what has not begun never starts."""
        client = self._require_client()
        functions: dict[int, tuple[bytes, bytes]] = {}
        payloads = [self._payload(p, functions) for p in batch.items]
        self._progress.add(len(payloads))
        kinds: dict[int, bool] = {}  # per function: is_stream inspects its code
        streams = [
            kinds[id(p.fn)] if id(p.fn) in kinds else kinds.setdefault(id(p.fn), p.is_stream) for p in batch.items
        ]
        if not any(streams):
            return client.submit_batch(payloads, on_finish=self._progress.finished).wait()
        # generators: an iterator each, in order (they queue like tasks: with more of them
        # than workers, the later ones start as the earlier ones end)
        started: list[Any] = []
        try:
            for payload, stream in zip(payloads, streams, strict=True):
                started.append(client.stream(payload, on_finish=self._progress.finished) if stream else None)
            plain = [p for p, s in zip(payloads, streams, strict=True) if not s]
            values = iter(client.submit_batch(plain, on_finish=self._progress.finished).wait())
        except BaseException:
            for it in started:
                if it is not None:
                    it.close()
            raise
        return tuple(it if it is not None else next(values) for it in started)

    def broadcast(self, pending: PendingCompute[T]) -> tuple[T, ...]:
        """Run on every worker of every node (``pending @ pool``); one result per worker,
        ordered by node then worker. Fails at once with ``NodeLostError`` when a node of
        the pool was lost."""
        client = self._require_client()
        payload = self._payload(pending, {})
        expected = len(self._nodes) * self.spec.workers_per_node
        if pending.is_stream:
            return tuple(client.stream_on_all(payload))  # type: ignore[arg-type]
        self._progress.add(expected)
        try:
            results = client.run_on_all(payload)
        except BaseException:
            for _ in range(expected):
                self._progress.finished(failed=True)
            raise
        for _ in range(expected):
            self._progress.finished(failed=False)
        return tuple(results)

    def __repr__(self) -> str:
        return f"<ComputePool {self.spec.pool_id} {self.provider_name} nodes={self.spec.nodes} {self._state}>"


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


_fork_generation = 0  # bumped in a forked child: a pool compares it without a syscall per call


def _after_fork_in_child() -> None:
    global _fork_generation
    _fork_generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


def _forked_since(owner_pid: int) -> bool:
    """Whether this process is a fork of the one that opened the pool (checked on every
    call, so it reads a counter; ``os.getpid()`` only when a fork happened)."""
    return _fork_generation > 0 and os.getpid() != owner_pid


def _result_decoder(provider: object, safe: bool | None, allow: Sequence[str | type]) -> ResultDecoder:
    """How results are read: ``safe_results=None`` follows the provider (safe where its
    hosts are third parties); ``allow_results`` widens safe mode's allow-list."""
    if safe is not None and not isinstance(safe, bool):
        raise ConfigurationError(
            f"ComputePool(safe_results={safe!r}): must be True, False or None (the provider's default)"
        )
    policy = ResultPolicy.build(allow)
    if safe is None:
        safe = third_party_hosts(provider)
    return ResultDecoder(safe_loads(policy)) if safe else ResultDecoder()


def _volume_scripts(volumes: Sequence[Any]) -> list[str]:
    plugins = registry.volumes()
    scripts = []
    for volume in volumes:
        plugin = next(p for p in plugins if isinstance(volume, p.volume_type))
        scripts.append(plugin.mount_script(volume))
    return scripts


def _plugin_steps(image: Image) -> list[BootstrapStep]:
    results = registry.pm.hook.skyward_bootstrap_steps(image=image)
    return [step for group in results for step in group]
