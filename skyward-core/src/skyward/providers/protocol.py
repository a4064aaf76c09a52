"""The seam between the pool and a provider.

The pool owns tasks, keys and events; a provider owns machines. It prepares shared
infrastructure, launches N nodes each running the user-data the pool renders for it,
reports how to reach each node's agent, and terminates what it made. It knows nothing
of tasks.

Shaped like httpx's ``BaseTransport``: :class:`Provider` is one small generic base class
with a default for everything but ``launch`` and ``terminate``; what only some providers
can do is an ability of its own, a runtime-checkable Protocol the pool tests with
``isinstance`` (:class:`SpotMarket`, :class:`SpotReplacement`, :class:`ReclaimWatch`,
:class:`InterruptionNotices`, :class:`PortMapping`, :class:`VolumeMounts`,
:class:`FollowsBootstrap`, :class:`ConsoleOutput`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar, runtime_checkable

from skyward.image import BootstrapContext

if TYPE_CHECKING:
    from skyward.events import SkywardEvent
    from skyward.providers.spec import PoolSpec
    from skyward.spot import SpotStrategy


@dataclass(frozen=True, slots=True)
class NodeHandle:
    """One launched node. ``endpoint`` is where the pool's client connects (its agent)."""

    node: int
    """The node's index in the pool, from 0."""
    instance_id: str
    """The provider's id of the instance."""
    endpoint: str
    """Where the pool's client reaches the node's agent (``tcp://host:port`` or an ipc path)."""
    instance_type: str
    """The machine type the node runs on."""
    spot: bool = False
    """Whether the node runs on the spot market."""
    ip: str | None = None
    """The node's public address, or ``None`` where it has none."""
    private_ip: str | None = None
    """The node's address inside the provider's network, or ``None``."""
    price_on_demand: float = 0.0
    """On-demand price, USD per hour."""
    price_spot: float | None = None
    """Spot price, USD per hour, or ``None`` (on demand, or unknown)."""
    extra: tuple[tuple[str, str], ...] = ()
    """Provider facts about the node as ``(key, value)`` pairs (its name, its region), shown in the log."""

    @property
    def hourly_price(self) -> float:
        """What the node costs per hour on its market: the spot price on spot, else on-demand."""
        return self.price_spot if self.spot and self.price_spot is not None else self.price_on_demand


class UserDataFactory(Protocol):
    """Renders node ``node``'s bootstrap script (the pool's; a driver calls it once per node
    it starts, and once per replacement).

    ``bind`` is where the node's agent listens, as the node sees itself; the provider
    chooses it, and the agent binds exactly that (nothing on the node overrides it):

    * ``tcp://0.0.0.0:PORT``: every address of the node's machine. Right where a node is
      a machine (or a container) of its own: a cloud VM is reached at its public address
      through NAT or, on AWS, through an SSM tunnel ending at the VM's loopback, so no
      one address of it would do; a marketplace container's 0.0.0.0 is its own network
      namespace. The provider's firewall admits only the client (``agent_port`` and the
      ports after it, :func:`skyward.agent.config.node_ports`).
    * ``tcp://ADDRESS:PORT``: one address of the node, where nodes share a host (host
      processes, containers on the host's network): each node needs its own address or
      its own ports. A node listens on PORT and on the next ``2 * workers_per_node`` ports
      (one per worker, then each worker's data port), so on one address nodes' PORTs lie
      ``2 * workers_per_node + 1`` apart (:func:`skyward.agent.config.node_ports`). PORT 0
      picks free ports (the agent reports its endpoint on its stdout, in the line starting
      ``::skyward-ready``, which only a provider that reads the node's stdout can see:
      Local).
    * ``ipc:///path``: a unix socket, for nodes on the client's own machine (Local).

    An agent that cannot bind ``bind`` (taken by another node's agent, not an address of
    its machine) says so on stderr and exits non-zero. ``NodeHandle.endpoint`` is where
    the client reaches that bind from outside; two nodes never share one.

    ``instance_id`` is the identity the node's agent reports in the handshake; the client
    refuses an agent whose node index, pool or instance id is not the one it expects
    (``NodeIdentityError``). Each node also gets its own CURVE server key in its
    user-data: render a node's user-data once per start and launch what it returned.
    ``run_dir`` is the node's private directory for sockets and notices;
    ``visible_devices`` pins each worker to devices (a driver that maps devices itself).
    """

    def __call__(
        self,
        node: int,
        bind: str,
        context: BootstrapContext,
        *,
        run_dir: str,
        visible_devices: Sequence[str | None] = (),
        instance_id: str = "",
    ) -> str: ...


EventSink = Callable[["SkywardEvent"], None]
"""Where a provider sends lifecycle events (the pool delivers them on its event thread)."""

C = TypeVar("C")


@runtime_checkable
class ProviderDriver(Protocol):
    """What the pool calls. All methods block; in order: ``validate`` (at construction),
    ``prepare``, ``launch``, later ``terminate`` and ``teardown`` (always, even after a
    failure). :class:`Provider` implements it with defaults."""

    name: str
    """The provider's name (``"aws"``), as events and ``skyward ls`` show it."""

    def validate(self, spec: PoolSpec) -> None:
        """Refuse, before anything is made, what the provider cannot do (ConfigurationError)."""
        ...

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        """Make shared infrastructure; returns the region label for ``InfraCreated``."""
        ...

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        """Start every node; returns once each agent's endpoint is known, removes what it started on failure."""
        ...

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete these nodes (not merely stop them: a stopped instance can still bill)."""
        ...

    def teardown(self) -> None:
        """Remove what ``prepare`` made; called always, even after a failure."""
        ...


class Provider(Generic[C]):
    """Base class of a provider driver, generic over its config type (a frozen dataclass,
    best derived from :class:`skyward.providers.ProviderSettings`).

    Lifecycle events are the pool's and the cloud template's business: a driver emits at
    most ``InstanceLaunching``/``InstanceProvisioned``/``BootstrapStarting`` (the template
    does that for cloud drivers) and never ``BootstrapCompleted``: the pool says it, once
    per node, when the node's agent has answered.
    """

    name: str = ""
    """The provider's name (``"aws"``), as events and ``skyward ls`` show it; set by each subclass."""

    def __init__(self, config: C) -> None:
        self.config = config
        """The provider's config, as the user gave it."""

    def validate(self, spec: PoolSpec) -> None:
        """Refuse, before anything is made, what this provider cannot do
        (ConfigurationError naming the parameter). The pool has already applied the rules
        common to every provider (spot without a market, volumes without mounts)."""

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        """Make shared infrastructure; returns the region label for ``InfraCreated``."""
        return self.name

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        """Start every node and return once each agent's endpoint is known. On failure
        remove what was started, then raise."""
        raise NotImplementedError(f"{type(self).__name__}.launch")

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete these nodes (not merely stop them: a stopped instance can still bill)."""
        raise NotImplementedError(f"{type(self).__name__}.terminate")

    def teardown(self) -> None:
        """Remove what ``prepare`` made."""


# -- abilities ------------------------------------------------------------------------


@runtime_checkable
class SpotMarket(Protocol):
    """The provider sells spot (interruptible) capacity. A provider without this ability
    gets the core's one rule (``skyward.providers.rules.check_spot``)."""

    def default_spot(self) -> SpotStrategy:
        """The strategy of a pool that leaves ``spot`` unset."""
        ...


@runtime_checkable
class SpotReplacement(Protocol):
    """The provider can start a node again after its spot instance was reclaimed."""

    def replaces_interrupted(self, spec: PoolSpec) -> bool:
        """Whether a reclaimed node should be replaced (``Spot.Always``)."""
        ...

    def replace(self, spec: PoolSpec, handle: NodeHandle, user_data: UserDataFactory, emit: EventSink) -> NodeHandle:
        """Start a new node with ``handle.node``'s index; return once its agent's
        endpoint is known."""
        ...


@runtime_checkable
class InterruptionNotices(Protocol):
    """The provider warns a spot node before reclaiming it (AWS: two minutes, through the
    instance metadata). Its watcher on the node writes a JSON object with
    ``kind=NoticeKind.INTERRUPTION`` into ``skyward.agent.notices.notices_dir``; the agent
    forwards it and the pool takes the interruption path."""

    def notice_watch_step(self, notices_dir: str) -> tuple[str, str]:
        """The bootstrap step (name, script) that starts the watcher on a spot node."""
        ...


@runtime_checkable
class ReclaimWatch(Protocol):
    """The provider gives no advance notice (Verda, marketplaces): the pool asks, every
    ``reclaim_poll_interval`` seconds while spot nodes run, which of them the provider
    stopped or deleted, and takes the same interruption path for each."""

    reclaim_poll_interval: float
    """Seconds between asks while spot nodes run: each ask is an API call, so not too often."""

    def reclaimed(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        """Instance id -> reason, for those of ``nodes`` the provider took away."""
        ...


@runtime_checkable
class ElasticNodes(Protocol):
    """The provider adds nodes to a running pool and removes single ones: what elastic
    pools grow and shrink with, and what replaces a node lost for any reason (the pool
    removes the lost node, then adds one at its index). Without it a pool is a fixed set
    of nodes: ``nodes=(2, 16)`` is refused at construction and a lost node is not
    replaced."""

    def add_nodes(
        self, spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        """Start one node per index (its user data rendered for that index, on the
        infrastructure ``prepare`` made) and return their handles, in ``indices`` order,
        once each agent's endpoint is known: ``launch``'s contract for a few nodes while
        the others run. On failure nothing it started is left, and the error is the kind
        ``launch`` raises (``CapacityError``, ``QuotaError``, ``ProvisioningError``)."""
        ...

    def remove_nodes(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete exactly these nodes (the others keep running); a node already gone is
        not an error."""
        ...


@runtime_checkable
class NodeWatch(Protocol):
    """The provider can tell which nodes are gone (a Local node's process exited, a
    cloud instance terminated, stopped or failed) sooner than the liveness window: the
    pool asks every ``node_poll_interval`` seconds and takes the lost-node path for
    each. A spot node found gone takes the interruption path instead."""

    node_poll_interval: float
    """Seconds between asks; shorter than the liveness window, or the watch would add nothing."""

    def gone(self, nodes: Sequence[NodeHandle]) -> dict[str, str]:
        """Instance id -> why, for those of ``nodes`` that are gone (one cheap call:
        Local polls its processes, a cloud lists its instances once)."""
        ...


@runtime_checkable
class PortMapping(Protocol):
    """Nodes are containers whose ports the host maps to others (VastAI, RunPod): the
    agent's and each worker's endpoint go through the mapping."""

    def mapped_endpoint(self, handle: NodeHandle, container_port: int) -> str:
        """Where the client reaches ``container_port`` of the node (``tcp://host:port``)."""
        ...


@runtime_checkable
class VolumeMounts(Protocol):
    """The provider mounts volumes (AWS: S3). Without it, ``volume=`` is refused."""

    def mounts(self, volume: object) -> bool:
        """Whether this provider can mount ``volume`` (AWS: an ``S3Volume``); the pool refuses others."""
        ...


CONTAINERS_HAVE_NO_FUSE = (
    "its nodes are containers started without /dev/fuse or CAP_SYS_ADMIN (the marketplace's create API has no "
    "field that asks for either), so FUSE cannot mount there"
)
"""Why a provider without :class:`FuseMounts` cannot mount a ``sky.Volume``."""


@runtime_checkable
class FuseMounts(Protocol):
    """The provider's nodes may mount FUSE filesystems (a virtual machine; Local as root):
    ``sky.Volume(mode="mount")`` is possible there. Without it the pool refuses such a
    volume when it is configured, with :data:`CONTAINERS_HAVE_NO_FUSE`, and points at
    ``mode="sync"``, which needs no FUSE."""

    def fuse_unavailable(self, spec: PoolSpec) -> str | None:
        """``None`` when ``spec``'s nodes can mount a ``sky.Volume``; else why not, in a
        clause that follows "cannot be mounted on the X provider:"."""
        ...


@runtime_checkable
class FollowsBootstrap(Protocol):
    """The driver reads each node's bootstrap as it runs and emits BootstrapProgress
    itself (Local reads its nodes' stdout); the pool then does not repeat the steps from
    the agent's hello."""

    follows_bootstrap: Literal[True]
    """Always ``True``: the marker the pool checks for."""


@runtime_checkable
class ConsoleOutput(Protocol):
    """The provider can read what a node printed to its console (EC2's
    ``GetConsoleOutput``, a container's log, a serial console). When a node fails to
    start (it stopped or vanished while starting, or was not running within
    ``provision_timeout``), the cloud template appends the tail of it to the error, so
    the user reads the bootstrap's last lines instead of a bare state."""

    def console_output(self, instance_id: str) -> str:
        """Everything the instance printed so far (``""`` when the provider has nothing
        yet). One read-only call; an error here never hides the start-up failure."""
        ...
