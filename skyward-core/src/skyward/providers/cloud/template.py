"""One orchestration for every cloud: a driver supplies its API's verbs, this does the rest.

``CloudProvider.prepare``: sweep leftovers of earlier pools (``reap``), choose the offer,
find the client's address, label everything with the pool id and its expiry, make the
shared infrastructure. ``launch``: render each node's script, create the nodes in
parallel (applying the spot plan: fall back to on-demand or retry on a capacity refusal),
poll them all with one describe call per interval until each runs, emit
``InstanceProvisioned`` and ``BootstrapStarting``, return the handles; any failure deletes
everything created before it leaves. ``terminate``: delete, then describe again until
every instance is gone (retrying the delete). ``teardown``: sweep instances a lost create
answer may have made, remove the infrastructure. The pool then waits for the agents
(``bootstrap_timeout``) and says ``BootstrapCompleted``; if they do not answer it calls
``terminate`` and ``teardown``, so a bootstrap timeout cleans up like any other failure.

While the pool runs (the ElasticNodes and NodeWatch abilities): ``add_nodes`` is
``launch`` for a few new indices (the same offer, labels and infrastructure; a failure
deletes only what it created), ``remove_nodes`` is ``terminate`` for exactly those nodes,
and ``gone`` is one describe call naming the nodes stopped or gone.

:class:`SpotCloudProvider` adds what a cloud with a spot market can do: a default
strategy, replacing a reclaimed node (``Spot.Always``: remove it, add one at its index) and noticing, by describing its
spot instances, one the provider stopped or deleted without warning.

A driver implements ``choose_offer``, ``create``, ``describe`` and ``delete``; the rest
has defaults.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from skyward.agent.config import node_ports
from skyward.agent.notices import notices_dir
from skyward.errors import (
    CapacityError,
    ConfigurationError,
    LaunchTimeoutError,
    ProvisioningError,
    SkywardError,
    UnavailableError,
)
from skyward.events import BootstrapStarting, InstanceLaunching, InstanceProvisioned, Notice
from skyward.image import BootstrapContext
from skyward.pricing import check_price_cap, pool_hourly
from skyward.providers.cloud.addresses import client_address, firewall_source
from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
from skyward.providers.cloud.naming import RUN_DIR_PREFIX, expiry
from skyward.providers.cloud.settings import CloudSettings
from skyward.providers.cloud.startup import addressless_message, console_tail, remove_local_run_dirs
from skyward.providers.protocol import (
    ConsoleOutput,
    EventSink,
    InterruptionNotices,
    NodeHandle,
    Provider,
    UserDataFactory,
)
from skyward.providers.settings import NODE_TTL_MARGIN
from skyward.spot import Market, NodePlan, SpotAlways, SpotNever, SpotStrategy, plan_markets

if TYPE_CHECKING:
    from skyward.providers.spec import PoolSpec

CS = TypeVar("CS", bound=CloudSettings)

CREATE_CONCURRENCY = 8
"""Create calls in flight at once. Against an in-memory API answering each create in 0.1 s,
16 nodes launched in 0.23 s with 8 in flight against 1.61 s one at a time (7x); more in
flight would gain little for typical pool sizes and bunch more calls into a provider's
rate-limit window (a 429 is retried by the API clients, but costs its wait)."""

TERMINATE_ATTEMPTS = 3
"""Delete-then-describe rounds before terminate gives up and names what still lives (a node
shutting itself down can make one delete fail)."""


class InstanceState(Enum):
    """An instance as the template cares: starting, usable, or no longer (billing) there."""

    PENDING = "pending"
    """Being created or booting: the template keeps polling."""
    RUNNING = "running"
    """Up, with its addresses: the agent can be reached."""
    STOPPED = "stopped"
    """Exists, not running (powered off, shut down, reclaimed but kept): it may still bill."""
    GONE = "gone"
    """Deleted, deleting, or unknown to the API."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One describe answer. ``status`` is the provider's own word, for messages. ``ports``
    maps a container port to the host port that reaches it, for clouds that hand out
    containers behind a port mapping (empty: the instance's own ports). ``price_spot``
    is what this spot instance pays where the market prices each place apart (EC2's
    per-zone spot prices; ``None``: the offer's price); ``extra`` goes into its handle."""

    id: str
    """The provider's id of the instance."""
    state: InstanceState
    """Where it is in its life, as the template cares."""
    ip: str | None = None
    """Its public address, where the client reaches the agent; ``None`` until it has one."""
    private_ip: str | None = None
    """Its address inside the provider's network; ``None``: none (the handle then uses ``ip``)."""
    status: str = ""
    """The provider's own word for its state (``"active"``), for messages."""
    ports: Mapping[int, int] = field(default_factory=dict)
    """Container port -> the host port that reaches it; empty: the instance's own ports."""
    price_spot: float | None = None
    """What this spot instance pays, where each place is priced apart; ``None``: the offer's price."""
    extra: tuple[tuple[str, str], ...] = ()
    """Provider-specific ``(key, value)`` pairs that go into the node's handle."""


@dataclass(frozen=True, slots=True)
class ChosenOffer:
    """What ``choose_offer`` decided: the machine every node of this pool gets, where, and
    its prices. ``spot_available`` False makes ``spot='if-available'`` nodes on-demand up
    front. Not an offer table's row (:class:`skyward.providers.Offer`, what ``skyward
    offers`` lists): one pool's decision."""

    instance_type: str
    """The provider's name of the machine type every node gets."""
    region: str
    """Where the nodes are created."""
    price_on_demand: float
    """On-demand price, USD per hour per node."""
    price_spot: float | None = None
    """Spot price, USD per hour per node; ``None`` where there is no spot market."""
    spot_available: bool = True
    """Whether spot capacity is offered; ``False`` starts ``spot='if-available'`` nodes on-demand."""


@dataclass(frozen=True, slots=True)
class Labels:
    """What every resource of the pool carries so leftovers can be found and reaped."""

    pool_id: str
    """The pool's id: how its instances and leftovers are found."""
    expires: int
    """Unix time after which a leftover may be reaped (``skyward.providers.cloud.naming.expiry``)."""
    client_cidr: str
    """The only source the node ports admit (``""``: none from outside, see ``ingress_source``)."""
    ports: tuple[int, int]
    """The inclusive port range a node listens on: the agent's port, then one per worker."""


@dataclass(frozen=True, slots=True)
class NodeRequest:
    """One node to create: its index, its provider-side name, the market, its script."""

    node: int
    """The node's index in the pool."""
    name: str
    """Its provider-side name (``skyward-<pool id>-<node>``)."""
    market: Market
    """The market it is created in."""
    script: str
    """Its bootstrap script, as ``create`` sends it (user data)."""


@dataclass
class _Started:
    request: NodeRequest
    instance_id: str
    market: Market


class CloudProvider(Provider[CS]):
    """Base class of a cloud driver (see the module's docstring). ``clock``, ``sleep``
    and ``context`` (what every node installs: ``cloud_bootstrap_context``) are test
    seams.

    One class past 300 lines on purpose: it is the template a driver subclasses, and a
    driver overrides only its API's verbs (offers, create, describe, delete, optional
    infrastructure); the orchestration those verbs plug into (parallel creates, one poll
    for every node, handles, clean-up on any failure, verified deletes, teardown, and the
    same for nodes added, removed and watched while the pool runs) has to see them all.
    What needs none of a driver's state is already a module of its own (naming, retry,
    sizing, addresses, startup, removal, reaping)."""

    instance_noun = "instance"
    """What the provider calls an instance (``"droplet"``), in messages."""
    running_word = "running"
    """The provider's word for a running instance (``"active"``), in messages."""

    def __init__(
        self,
        config: CS,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        context: Callable[[], BootstrapContext] = cloud_bootstrap_context,
    ) -> None:
        super().__init__(config)
        self._clock = clock
        self._sleep = sleep
        self._context_source = context
        self._context: BootstrapContext | None = None
        self._lock = threading.Lock()
        self._offer: ChosenOffer | None = None
        self._labels: Labels | None = None
        self._plans: list[NodePlan] = []  # the nodes started by launch, by index
        self._strategy: SpotStrategy | None = None  # what plans a node added later
        self._created: dict[str, str] = {}  # id -> name: everything this driver created
        self._deleted: set[str] = set()
        self._creating = False  # a create was sent: teardown must sweep for lost answers
        self._port_maps: dict[str, dict[int, int]] = {}  # instance id -> container port -> host port
        self._run_dirs: set[str] = set()  # every run_dir handed to a node (teardown removes local ones)
        self._pool_id = ""

    @property
    def labels(self) -> Labels | None:
        """What every resource of this pool carries, computed by ``prepare`` (``None``
        before it): ``listed`` finds the pool's instances by ``labels.pool_id``."""
        return self._labels

    # -- the verbs a driver supplies ------------------------------------------------------

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        """The machine for every node (read-only calls)."""
        raise NotImplementedError(f"{type(self).__name__}.choose_offer")

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        """Create one instance running ``request.script``, labelled with ``labels``;
        returns its id. Called from several threads at once."""
        raise NotImplementedError(f"{type(self).__name__}.create")

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        """The state of these instances, in as few calls as the API allows; an id missing
        from the answer is gone."""
        raise NotImplementedError(f"{type(self).__name__}.describe")

    def delete(self, instance_ids: Sequence[str]) -> None:
        """Delete (never merely stop) these instances and what bills with them (disks)."""
        raise NotImplementedError(f"{type(self).__name__}.delete")

    # -- optional verbs ---------------------------------------------------------------------

    def reap(self, spec: PoolSpec, emit: EventSink) -> None:
        """Delete what earlier pools left (``reap=True``); a failure here is a Notice, not
        a reason to fail this pool."""

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: EventSink) -> None:
        """Shared pieces: a firewall admitting ``labels.ports`` from ``labels.client_cidr``
        only, keys, tags."""

    def delete_infrastructure(self) -> list[str]:
        """Remove what ``create_infrastructure`` made; returns what could not be removed."""
        return []

    def listed(self) -> list[str]:
        """Ids of every instance the API lists as this pool's (by its label): teardown
        deletes those too, in case a create's answer was lost."""
        return []

    def is_capacity_refusal(self, error: Exception) -> bool:
        """Whether ``create`` failed for lack of capacity (the spot plan may retry)."""
        return False

    def explain_create_failure(self, error: Exception, market: Market, created: int, total: int) -> Exception:
        """The error a failed create becomes; ``created`` of ``total`` instances had been
        created (and are deleted by then)."""
        if isinstance(error, ConfigurationError | ProvisioningError) and not created:
            return error
        undone = f" ({created} of {total} {self.instance_noun}s had been created; they were deleted)" if created else ""
        # keeps the kind (CapacityError, QuotaError...): the pool's failover reads it
        kind = type(error) if isinstance(error, UnavailableError) else ProvisioningError
        return kind(f"{error}{undone}")

    def cleanup_hint(self, instance_ids: Sequence[str]) -> str:
        """How a user deletes these by hand, for the error when deleting failed."""
        return "delete them in the provider's console"

    def run_dir(self, spec: PoolSpec, node: int) -> str:
        """The node's run directory (its agent's ipc sockets, its notices drop box). The
        default, ``/tmp/skyward-<pool id>``, dies with a cloud VM; where it exists on this
        machine after the nodes are deleted (nodes that are local processes), teardown
        removes it, as it does any run directory named after the pool."""
        return f"{RUN_DIR_PREFIX}{spec.pool_id}"

    def instance_name(self, spec: PoolSpec, node: int) -> str:
        """Node ``node``'s provider-side name: ``skyward-<pool id>-<node>``, unique per pool."""
        return f"skyward-{spec.pool_id}-{node}"

    def bind(self, spec: PoolSpec, node: int) -> str:
        """Where node ``node``'s agent listens, as the instance sees itself (the contract:
        ``skyward.providers.protocol.UserDataFactory``). Every address of the instance
        (0.0.0.0) at ``agent_port``: an instance is a machine or container of its own, and
        the client may reach it through NAT or a tunnel that ends at its loopback, so no
        one address of it is right. A driver whose instances share a host (host
        processes, host networking) returns each node's own address here, and reports
        the same address as the instance's ``ip`` (which :meth:`endpoint` uses): two
        agents at one address and port cannot both listen, and the second one exits."""
        return f"tcp://0.0.0.0:{self.config.agent_port}"

    def endpoint(self, instance: Instance) -> str:
        """Where the client reaches the agent of a running instance (through its port
        mapping, when the cloud reports one)."""
        port = self.config.agent_port
        return f"tcp://{instance.ip}:{instance.ports.get(port, port)}"

    def shared_context(self) -> BootstrapContext:
        """What every node of this driver installs (skyward and the plugins, as the client
        has them), made once per driver rather than once per node: it reads every
        installed distribution's metadata, about 9 ms a call on the benchmark machine,
        which held a 16-node launch 65 ms before its first create call."""
        with self._lock:
            if self._context is None:
                self._context = self._context_source()
            return self._context

    def bootstrap_context(self, spec: PoolSpec, market: Market, run_dir: str, node: int) -> BootstrapContext:
        """What node ``node`` installs: :meth:`shared_context`, plus the notice watch step on
        a spot node of a provider that warns of reclaims (InterruptionNotices)."""
        context = self.shared_context()  # builds the checkout's wheels (skyward.wheels) if needed
        if market is Market.SPOT and isinstance(self, InterruptionNotices):
            step = self.notice_watch_step(notices_dir(run_dir, node))
            context = replace(context, extra_steps=(*context.extra_steps, step))
        return context

    def finish_script(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        """The script as it goes to ``create`` (Verda puts its host firewall first)."""
        return request.script

    def client_address(self) -> ipaddress.IPv4Address:
        """The client's public address: ``client_address`` when given, else asked of
        ``address_url`` once per pool."""
        config = self.config
        return client_address(config.client_address, config.address_url, config.api_timeout, type(config).__name__)

    def ingress_source(self) -> str:
        """The CIDR the node ports admit (``Labels.client_cidr``): the client's address as
        one host. A driver that reaches its nodes another way (AWS's SSM tunnels) returns
        ``""``, and its firewall admits nothing from outside."""
        return firewall_source(self.client_address())

    def strategy(self, spec: PoolSpec) -> SpotStrategy | None:
        """No spot market here: every node on-demand (the pool has already refused what
        needs spot nodes, and said so for ``if-available``)."""
        return None

    # -- the orchestration -------------------------------------------------------------------

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        """Reap leftovers (when ``reap``), plan each node's market, choose the offer, label the
        pool and make its shared infrastructure; returns the region."""
        config = self.config
        if config.reap:
            self.reap(spec, emit)
        self._strategy = self.strategy(spec)
        self._plans = plan_markets(self._strategy, spec.nodes)
        offer = self.choose_offer(spec, self._plans, emit)
        if not offer.spot_available and any(p.market is Market.SPOT and p.fallback for p in self._plans):
            self._strategy = SpotNever()  # nodes added later too
            self._plans = [replace(p, market=Market.ON_DEMAND, fallback=False) for p in self._plans]
            emit(
                Notice(
                    message=f"spot='if-available': no spot capacity for {offer.instance_type} in {offer.region}; "
                    "running on-demand"
                )
            )
        # an elastic pool is held to its cap at its largest (spec.max_nodes), before anything is made
        markets = [self.plan_for(n).market for n in range(spec.max_nodes)]
        hourly = pool_hourly(markets, offer.price_on_demand, offer.price_spot)
        largest = f" x {spec.max_nodes} nodes (sky.Nodes(max=...))" if spec.max_nodes > spec.nodes else ""
        check_price_cap(spec.max_hourly_cost, hourly, f"{offer.instance_type} in {offer.region}{largest}")
        self._offer = offer
        self._labels = Labels(
            pool_id=spec.pool_id,
            expires=expiry(self._clock(), spec.timeout, config.bootstrap_timeout, NODE_TTL_MARGIN),
            client_cidr=self.ingress_source(),
            ports=node_ports(config.agent_port, spec.workers_per_node),
        )
        self.create_infrastructure(spec, offer, self._labels, emit)
        return offer.region

    def plan_for(self, node: int) -> NodePlan:
        """Node ``node``'s spot plan: ``launch``'s for the nodes it started (a node started
        again at that index, a replacement, keeps it); for an index past them, what the
        strategy plans for the last of ``node + 1`` nodes. So a pool that grows keeps its
        strategy's promise: ``Spot.Percent(p)``'s "at least p of the nodes on spot" holds at
        every size, since the nodes it adds are spot (as the last ones of a launch are)."""
        if node < len(self._plans):
            return self._plans[node]
        return plan_markets(self._strategy, node + 1)[node]

    def _request(self, spec: PoolSpec, plan: NodePlan, user_data: UserDataFactory) -> NodeRequest:
        assert self._labels is not None
        name = self.instance_name(spec, plan.node)
        run_dir = self.run_dir(spec, plan.node)
        with self._lock:
            self._run_dirs.add(run_dir)
            self._pool_id = spec.pool_id
        context = self.bootstrap_context(spec, plan.market, run_dir, plan.node)
        script = user_data(plan.node, self.bind(spec, plan.node), context, run_dir=run_dir, instance_id=name)
        request = NodeRequest(node=plan.node, name=name, market=plan.market, script=script)
        return replace(request, script=self.finish_script(spec, request, self._labels))

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        """Create every node in parallel, poll them all until running, and return their
        handles; on any failure delete what was created, then raise."""
        offer = self._offer
        assert offer is not None, "prepare() first"
        emit(InstanceLaunching(count=spec.nodes, instance_type=offer.instance_type, provider=self.name))
        try:
            requests = [(plan, self._request(spec, plan, user_data)) for plan in self._plans]
            started = self._create_all(spec, requests, emit)
            return self._await_running(started, emit)
        except BaseException:
            self._delete_created()
            raise

    def add_nodes(
        self, spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        """The ElasticNodes ability: ``launch`` for a few nodes while the others run, with
        the pool's offer, labels (its expiry among them) and infrastructure, and each
        index's spot plan (:meth:`plan_for`). On failure what this call created is deleted
        (and nothing else), and the error is the kind ``launch`` raises. Each node's
        ``InstanceProvisioned`` and ``BootstrapStarting`` are said as at start; no
        ``InstanceLaunching``, which counts the pool's start (the pool says what it added)."""
        offer = self._offer
        assert offer is not None, "prepare() first"
        if not indices:
            return []
        started: list[_Started] = []
        try:
            requests = [(plan, self._request(spec, plan, user_data)) for plan in map(self.plan_for, indices)]
            started = self._create_all(spec, requests, emit)
            handles = {h.node: h for h in self._await_running(started, emit)}
            return [handles[i] for i in indices]
        except BaseException:
            self._delete_created(only=[s.instance_id for s in started])
            raise

    def remove_nodes(self, nodes: Sequence[NodeHandle]) -> None:
        """The ElasticNodes ability: delete exactly these nodes, verified as ``terminate``
        verifies (one already gone is not an error)."""
        if not nodes:
            return
        with self._lock:
            for node in nodes:
                self._created.setdefault(node.instance_id, node.instance_id)
        self._raise_if_left(self._delete_created(only=[n.instance_id for n in nodes]))

    @property
    def node_poll_interval(self) -> float:
        """The NodeWatch ability: how often the pool asks :meth:`gone` (one describe call)."""
        return self.config.poll_interval

    def gone(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        """The NodeWatch ability: those of ``nodes`` the cloud lists as gone or stopped
        (deleted, terminated, failed, powered off), from one describe call. A spot node's
        reason says it was taken away without notice (the pool takes the interruption path
        for it), as ``reclaimed`` does."""
        spot = {n.instance_id for n in nodes if n.spot}
        return {
            i: self._reclaim_reason(status) if i in spot else f"{self.name} says the {self.instance_noun} is {status}"
            for i, status in self._not_running(nodes).items()
        }

    def _not_running(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        """Instance id -> its status, for those of ``nodes`` that are gone or stopped."""
        described = self.describe([n.instance_id for n in nodes])
        found: dict[str, str] = {}
        for node in nodes:
            instance = described.get(node.instance_id)
            if instance is None or instance.state in (InstanceState.GONE, InstanceState.STOPPED):
                found[node.instance_id] = instance.status if instance is not None and instance.status else "gone"
        return found

    def _reclaim_reason(self, status: str) -> str:
        return f"{self.name} says this spot {self.instance_noun} is {status}: taken away without notice"

    def _create_all(
        self, spec: PoolSpec, requests: Sequence[tuple[NodePlan, NodeRequest]], emit: EventSink
    ) -> list[_Started]:
        """Every create in parallel (at most CREATE_CONCURRENCY at once); when any fails,
        the first failure in node order is raised after every create has returned, so
        what the others made is known and deleted (those, and no node created before)."""
        results: list[_Started | Exception] = []
        with ThreadPoolExecutor(max_workers=min(len(requests), CREATE_CONCURRENCY) or 1) as pool:
            futures = [pool.submit(self._create_one, spec, plan, request, emit) for plan, request in requests]
            for future in futures:
                try:
                    results.append(future.result())
                except Exception as error:
                    results.append(error)
        failures = [(r, plan) for r, (plan, _) in zip(results, requests, strict=True) if isinstance(r, Exception)]
        if failures:
            first, plan = failures[0]
            made = [r.instance_id for r in results if isinstance(r, _Started)]
            self._delete_created(only=made)
            created = len(made)
            explained = self.explain_create_failure(first, plan.market, created, len(requests))
            if self.is_capacity_refusal(first) and not isinstance(explained, UnavailableError):
                explained = CapacityError(str(explained))  # a pool with other candidates moves on
            raise explained from first
        return [r for r in results if isinstance(r, _Started)]

    def _create_one(self, spec: PoolSpec, plan: NodePlan, request: NodeRequest, emit: EventSink) -> _Started:
        """One create, as its spot plan says: on a capacity refusal, fall back to
        on-demand (``if-available``) or try again ``retries`` times ``interval`` apart."""
        assert self._labels is not None
        market, tries = plan.market, 0
        while True:
            attempt = replace(request, market=market)
            with self._lock:
                self._creating = True
            try:
                instance_id = self.create(spec, attempt, self._labels)
            except Exception as error:
                if not self.is_capacity_refusal(error):
                    raise
                if market is Market.SPOT and plan.fallback:
                    emit(Notice(message=f"node {plan.node}: no spot capacity ({error}); running it on-demand"))
                    market = Market.ON_DEMAND
                    continue
                if tries < plan.retries:
                    tries += 1
                    self._sleep(plan.interval)
                    continue
                raise
            with self._lock:
                self._created[instance_id] = request.name
            return _Started(attempt, instance_id, market)

    def _await_running(self, started: Sequence[_Started], emit: EventSink) -> list[NodeHandle]:
        """One describe call per ``poll_interval`` for every node still starting (the
        wait does not grow with the number of nodes)."""
        offer = self._offer
        assert offer is not None
        handles: dict[int, NodeHandle] = {}
        seen: dict[str, Instance] = {}  # each instance's last describe answer
        deadline = self._clock() + self.config.provision_timeout
        while True:
            waiting = [s for s in started if s.request.node not in handles]
            if not waiting:
                return [handles[n] for n in sorted(handles)]
            described = self.describe([s.instance_id for s in waiting])
            for item in waiting:
                instance = described.get(item.instance_id) or Instance(item.instance_id, InstanceState.GONE)
                what = f"{self.instance_noun} {item.request.name} ({item.instance_id})"
                spot_note = " (a spot instance can be reclaimed at any time)" if item.market is Market.SPOT else ""
                seen[item.instance_id] = instance
                if instance.state is InstanceState.GONE:
                    raise ProvisioningError(
                        f"{what} disappeared while it was starting{spot_note}{self._console(item.instance_id)}"
                    )
                if instance.state is InstanceState.STOPPED:
                    raise ProvisioningError(
                        f"{what} is {instance.status or 'stopped'!r} instead of starting{spot_note}"
                        f"{self._console(item.instance_id)}"
                    )
                if instance.state is not InstanceState.RUNNING or not instance.ip:
                    continue
                spot = item.market is Market.SPOT
                price_spot = offer.price_spot if instance.price_spot is None else instance.price_spot
                handle = NodeHandle(
                    node=item.request.node,
                    instance_id=item.instance_id,
                    endpoint=self.endpoint(instance),
                    instance_type=offer.instance_type,
                    spot=spot,
                    ip=instance.ip,
                    private_ip=instance.private_ip or instance.ip,
                    price_on_demand=offer.price_on_demand,
                    price_spot=price_spot,
                    extra=(("name", item.request.name), ("region", offer.region), *instance.extra),
                )
                handles[handle.node] = handle
                with self._lock:
                    self._port_maps[handle.instance_id] = dict(instance.ports)
                emit(
                    InstanceProvisioned(
                        instance_id=handle.instance_id, node=handle.node, spot=spot, provider=self.name,
                        ip=instance.ip, instance_type=offer.instance_type, price_on_demand=offer.price_on_demand,
                        price_spot=price_spot,
                    )
                )  # fmt: skip
                emit(BootstrapStarting(instance_id=handle.instance_id))
            if len(handles) == len(started):
                continue
            if self._clock() > deadline:
                pending = [s for s in started if s.request.node not in handles]
                for item in pending:
                    last = seen.get(item.instance_id)
                    if last is not None and last.state is InstanceState.RUNNING:  # running, but no address
                        what = f"{self.instance_noun} {item.request.name} ({item.instance_id})"
                        raise LaunchTimeoutError(addressless_message(what, self.running_word, type(self).__name__))
                late = ", ".join(s.request.name for s in pending)
                raise LaunchTimeoutError(
                    f"{self.instance_noun}s {late} were not {self.running_word} within provision_timeout="
                    f"{self.config.provision_timeout:g} s; raise {type(self.config).__name__}(provision_timeout=...) "
                    "or try another region" + "".join(self._console(s.instance_id) for s in pending)
                )
            self._sleep(self.config.poll_interval)

    def _console(self, instance_id: str) -> str:
        """The tail of the instance's console output for an error (ConsoleOutput), or ``""``."""
        if not isinstance(self, ConsoleOutput):
            return ""
        try:
            output = self.console_output(instance_id)
        except Exception as error:  # the start-up failure is what the user must read
            return f"\n(the console output of {instance_id} could not be read: {error})"
        return console_tail(instance_id, output)

    # -- the end -------------------------------------------------------------------------------

    def _delete_created(self, only: Sequence[str] | None = None) -> list[str]:
        """Delete every instance created (or those of ``only``) and not yet confirmed
        gone, then describe them until they are, TERMINATE_ATTEMPTS rounds; returns what
        still lives, in words."""
        with self._lock:
            pending = [i for i in self._created if i not in self._deleted and (only is None or i in only)]
        problem = ""
        for attempt in range(TERMINATE_ATTEMPTS):
            if not pending:
                return []
            try:
                self.delete(pending)
            except (SkywardError, OSError) as error:  # look again: some may be gone anyway
                problem = str(error)
            try:
                described = self.describe(pending)
            except (SkywardError, OSError) as error:
                problem = str(error)
                described = {i: Instance(i, InstanceState.RUNNING) for i in pending}
            gone = [i for i in pending if i not in described or described[i].state is InstanceState.GONE]
            with self._lock:
                self._deleted.update(gone)
            pending = [i for i in pending if i not in gone]
            if pending and attempt < TERMINATE_ATTEMPTS - 1:
                self._sleep(min(self.config.poll_interval, 1.0 * (attempt + 1)))
        return [f"{self._created[i]} ({i}){': ' + problem if problem else ''}" for i in pending]

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete (not stop) every instance this driver created and these nodes, and check
        that the API no longer lists them."""
        if not self._created and not nodes:
            return
        with self._lock:
            for node in nodes:
                self._created.setdefault(node.instance_id, node.instance_id)
        self._raise_if_left(self._delete_created())

    def _raise_if_left(self, failures: Sequence[str]) -> None:
        if failures:
            with self._lock:
                left = [i for i in self._created if i not in self._deleted]
            raise ProvisioningError(
                f"could not delete these {self.instance_noun}s, which bill until deleted: " + "; ".join(failures)
                + f". {self.cleanup_hint(left)}"
            )  # fmt: skip

    def teardown(self) -> None:
        """Sweep the pool's instances by their label (a create whose answer was lost may
        have made one), then remove the shared infrastructure."""
        failures: list[str] = []
        if self._creating:
            try:
                listed = self.listed()
            except (SkywardError, OSError) as error:
                failures.append(f"listing the pool's {self.instance_noun}s: {error}")
                listed = []
            with self._lock:
                for instance_id in listed:
                    self._created.setdefault(instance_id, instance_id)
                    self._deleted.discard(instance_id)  # still listed: delete it (again)
            failures += self._delete_created()
        with self._lock:
            run_dirs, pool_id = sorted(self._run_dirs), self._pool_id
        failures += remove_local_run_dirs(run_dirs, pool_id)
        failures += self.delete_infrastructure()
        if failures:
            raise ProvisioningError(f"{type(self.config).__name__} teardown left things behind: " + "; ".join(failures))


class SpotCloudProvider(CloudProvider[CS]):
    """A cloud with a spot market and no advance notice of a reclaim: the pool polls
    :meth:`reclaimed` (ReclaimWatch) and, under ``Spot.Always``, asks for a replacement
    (SpotReplacement). A provider that does warn (InterruptionNotices) gets both paths;
    the pool acts once per instance."""

    def default_spot(self) -> SpotStrategy:
        """The strategy when the pool gives none: on-demand, so nothing is reclaimed unasked."""
        return SpotNever()

    def strategy(self, spec: PoolSpec) -> SpotStrategy | None:
        """The pool's ``spot=``, or :meth:`default_spot` when it gives none."""
        return self.default_spot() if spec.spot is None else spec.spot

    @property
    def reclaim_poll_interval(self) -> float:
        """The config's ``poll_interval``: one describe call per poll."""
        return self.config.poll_interval

    def reclaimed(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        """Instance id -> reason, for those of ``nodes`` now stopped or gone (one describe call)."""
        return {i: self._reclaim_reason(status) for i, status in self._not_running(nodes).items()}

    def replaces_interrupted(self, spec: PoolSpec) -> bool:
        """Whether a reclaimed node is replaced: under ``Spot.Always`` only."""
        return isinstance(self.strategy(spec), SpotAlways)

    def replace(self, spec: PoolSpec, handle: NodeHandle, user_data: UserDataFactory, emit: EventSink) -> NodeHandle:
        """A new instance for node ``handle.node``, on the same spot plan: the old one
        removed first (a stopped spot instance may still bill its disk), then one added at
        its index (ElasticNodes: the pool replaces a node lost for any reason the same way)."""
        self.remove_nodes([handle])
        return self.add_nodes(spec, [handle.node], user_data, emit)[0]


class PortMappedCloudProvider(CloudProvider[CS]):
    """A cloud whose nodes are containers reached through the host's port mapping (VastAI,
    RunPod): ``describe`` reports each instance's ``ports``; the agent's endpoint goes
    through them, and :meth:`mapped_endpoint` (the PortMapping ability) gives the client
    any other port of the node, its workers' among them."""

    def mapped_endpoint(self, handle: NodeHandle, container_port: int) -> str:
        """Where the client reaches ``container_port`` of the node (``tcp://ip:host port``);
        ProvisioningError when the node maps no host port to it."""
        with self._lock:
            ports = self._port_maps.get(handle.instance_id, {})
        if container_port not in ports:
            raise ProvisioningError(
                f"{self.instance_noun} {handle.instance_id} maps no host port to container port {container_port} "
                f"(it maps {sorted(ports) or 'none'}); expose the agent's and the workers' ports when creating it"
            )
        return f"tcp://{handle.ip}:{ports[container_port]}"
