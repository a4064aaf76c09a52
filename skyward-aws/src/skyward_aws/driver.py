"""``AWSDriver``: the pool's EC2 provider (see ``skyward.providers.protocol``).

``validate`` checks the request and that credentials exist, touching nothing.
``prepare`` first decides everything with read-only calls (instance type, zones, prices,
machine image, the client's address), then makes the pool's security group and, when
nodes need AWS access, its IAM role. ``launch`` starts one instance per node with that
node's user-data and waits until every agent listens; on any failure it terminates every
instance it started before the error leaves it. ``terminate`` and ``teardown`` remove
instances, then the group and the role.
"""

from __future__ import annotations

import datetime
import gzip
import logging
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from skyward.agent.config import DEFAULT_AGENT_PORT, node_ports
from skyward.agent.notices import notices_dir
from skyward.api.failover import check_price_cap, pool_hourly
from skyward.api.spec import PoolSpec
from skyward.baking import BakedImage, BakeKey, bake_key, being_baked, choose_baked
from skyward.errors import ConfigurationError, LaunchTimeoutError, NoOfferError, ProvisioningError
from skyward.image import BootstrapContext
from skyward.providers.cloud.naming import lifetime
from skyward.providers.cloud.parallel import in_parallel
from skyward.providers.protocol import EventSink, NodeHandle, Provider, UserDataFactory
from skyward.providers.settings import NODE_TTL_MARGIN
from skyward.spot import Market, NodePlan, SpotAlways, SpotStrategy, normalize_spot, plan_markets, wants_spot
from skyward_aws import ami, baking, iam, infra, interruption, launch, offers, resources
from skyward_aws.client_ip import Discover, discover_public_ip
from skyward_aws.config import AWS
from skyward_aws.endpoints import (
    EndpointResolver,
    NodeAddress,
    PublicAddress,
    SsmTunnels,
    require_session_manager_plugin,
)
from skyward_aws.pricing import shipped_catalog
from skyward_aws.session import Clients, explain, make_clients, new_session, require_credentials

# structlog on top of the standard library's logging: silent unless the application
# configures logging, and then under the "skyward.aws" logger
log = structlog.wrap_logger(
    logging.getLogger("skyward.aws"),
    processors=[structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)],
    wrapper_class=structlog.stdlib.BoundLogger,
)

# The node side: where environments live. cloud-init runs user-data as root, often
# without HOME (the core bootstrap defines one), so nothing here depends on it.
NODE_HOME = "/opt/skyward"
USER_DATA_LIMIT = 16 * 1024  # EC2's limit on raw user-data
DEFAULT_SPOT: SpotStrategy = SpotAlways()  # the seed's default: spot="always"
PROBE_INTERVAL = 0.5
STATE_CHECK_INTERVAL = 5.0
TERMINATE_ATTEMPTS = 3  # a node shutting itself down can make one TerminateInstances fail


def node_run_dir(pool_id: str, node: int) -> str:
    return f"/tmp/skyward-{pool_id}-{node}"


def encode_user_data(script: str) -> str | bytes:
    """The script as EC2 takes it: plain while it fits the 16 KiB limit, else gzip
    (cloud-init recognises and unpacks gzip user-data)."""
    raw = script.encode()
    if len(raw) <= USER_DATA_LIMIT:
        return script
    packed = gzip.compress(raw, mtime=0)
    if len(packed) > USER_DATA_LIMIT:
        raise ProvisioningError(
            f"the node's bootstrap script is {len(raw):,} bytes ({len(packed):,} gzipped), over EC2's "
            f"{USER_DATA_LIMIT:,}-byte user-data limit; trim Image(env=...) or Image(pip=...)"
        )
    return packed


def _endpoint_host_port(endpoint: str) -> tuple[str, int]:
    if not endpoint.startswith("tcp://"):
        raise ProvisioningError(f"cannot probe endpoint {endpoint!r}: only tcp:// endpoints reach cloud nodes")
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    return host.strip("[]"), int(port)


def agent_listening(endpoint: str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections at the agent's endpoint (a bare TCP connect:
    the agent only listens once its bootstrap is through)."""
    host, port = _endpoint_host_port(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class _Node:
    index: int
    plan: NodePlan
    instance_id: str | None = None
    market: Market | None = None
    zone: str | None = None
    address: NodeAddress | None = None
    description: dict[str, Any] = field(default_factory=dict)


class AWSDriver(Provider[AWS]):
    """EC2 provider. ``session`` (a boto3 Session), ``discover_ip`` and ``sleep`` are
    seams for callers that need them; by default boto3's chain, checkip.amazonaws.com and
    ``time.sleep``.

    Abilities: a spot market (SpotMarket, default ``Spot.Always``), two minutes' notice
    before a reclaim (InterruptionNotices), replacement of a reclaimed node
    (SpotReplacement), S3 volumes (VolumeMounts)."""

    name = "aws"

    def __init__(
        self,
        config: AWS,
        *,
        session: Any = None,
        discover_ip: Discover = discover_public_ip,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config)
        self._session = session
        self._discover_ip = discover_ip
        self._sleep = sleep
        self._clients: Clients | None = None
        self._lock = threading.Lock()
        self.offer: offers.Offer | None = None
        self.image: ami.ResolvedImage | None = None
        self.network: infra.Network | None = None
        self.client_cidr: str | None = None
        self.group_id: str | None = None
        self.role: iam.PoolRole | None = None
        self.spot_prices: dict[str, float] = {}
        self.instance_ids: list[str] = []  # every instance this driver started, in order
        self.terminated: set[str] = set()  # asked to terminate already (EC2 needs asking once)
        self._resolver: EndpointResolver | None = None
        self._expires_at = ""
        self._pool_id = ""
        self._bake_key: BakeKey | None = None  # Image(bake=True): the key this pool's image bakes under
        self._baked: BakedImage | None = None  # the baked AMI this pool starts from
        self._bake_pending = False  # another pool's bake of this key is under way

    # -- validate ------------------------------------------------------------------------

    def strategy(self, spec: PoolSpec) -> SpotStrategy:
        return DEFAULT_SPOT if spec.spot is None else normalize_spot(spec.spot)

    def default_spot(self) -> SpotStrategy:
        return DEFAULT_SPOT

    def mounts(self, volume: object) -> bool:
        from skyward_aws.volumes import S3Volume

        return isinstance(volume, S3Volume)

    def notice_watch_step(self, notices_dir: str) -> tuple[str, str]:
        return ("spot-watch", interruption.bootstrap_step(notices_dir))

    def validate(self, spec: PoolSpec) -> None:
        from skyward_aws import families

        if spec.accelerator is not None and spec.machine is None:
            families.families_for(spec.accelerator)
        if self.config.use_ssm and self.config.endpoint_resolver is None:
            require_session_manager_plugin()
        require_credentials(self._get_session())

    def _get_session(self) -> Any:
        if self._session is None:
            self._session = new_session(self.config.region)
        return self._session

    @property
    def clients(self) -> Clients:
        if self._clients is None:
            self._clients = make_clients(self._get_session(), self.config.region)
        return self._clients

    # -- prepare -------------------------------------------------------------------------

    def request_for(self, spec: PoolSpec) -> offers.Request:
        workers = spec.workers_per_node
        return offers.Request(
            accelerator=spec.accelerator,
            cpu=None if spec.cpu is None else spec.cpu * workers,
            memory=None if spec.memory_mb is None else spec.memory_mb * 2**20 * workers,
            machine=spec.machine,
            needs_spot=_needs_some_spot(self.strategy(spec), spec.nodes),
        )

    def plan(self, spec: PoolSpec, emit: EventSink) -> offers.Offer:
        """Everything decided before anything is made (read-only calls only)."""
        from skyward.accelerators import current_catalog
        from skyward.events import Notice

        ec2 = self.clients.ec2
        self.network = infra.find_network(ec2, self.config.subnet_ids)
        request = self.request_for(spec)
        found = offers.fetch_offers(
            ec2,
            request,
            region=self.config.region,
            usable_zones=sorted(self.network.subnets),
            prices=shipped_catalog(),
            catalog=current_catalog(),
        )
        chosen = offers.choose(found, request, current_catalog())
        if not chosen.zones:
            raise NoOfferError(
                f"{chosen.name} is not offered in any zone of {self.config.region} where the pool has a subnet"
            )
        if wants_spot(self.strategy(spec)) and chosen.supports_spot:
            self.spot_prices = offers.latest_spot_prices(ec2, chosen.name, chosen.zones)
            chosen = offers.with_spot_price(chosen, self.spot_prices)
        if chosen.price_note:
            emit(Notice(message=chosen.price_note))
        markets = [p.market for p in plan_markets(self.strategy(spec), spec.nodes)]
        hourly = pool_hourly(markets, chosen.instance.on_demand_price, chosen.instance.spot_price)
        check_price_cap(spec.max_hourly_cost, hourly, f"{chosen.name} in {self.config.region}")
        self.offer = chosen
        if self.config.ami is not None:
            self.image = ami.ResolvedImage(self.config.ami, "explicit")
        else:
            self.image = ami.resolve_image(
                ec2, self.clients.ssm, ami.image_kind(chosen.device_vendor), chosen.architecture
            )
        if spec.image.bake:
            self._choose_baked(spec, emit)
        if self.config.use_ssm:
            self.client_cidr = None  # nothing is opened to the outside
        else:
            self.client_cidr = self.config.ingress_cidr or self._discover_ip()
        log.info(
            "aws plan",
            pool=spec.pool_id,
            instance_type=chosen.name,
            zones=list(chosen.zones),
            image=self.image.image_id,
            image_from=self.image.how,
            client_cidr=self.client_cidr,
        )
        return chosen

    def _choose_baked(self, spec: PoolSpec, emit: EventSink) -> None:
        """``Image(bake=True)``: start from this image's baked AMI when one matches its key
        exactly (skyward.baking.choose_baked); a stale one is left alone."""
        from skyward.events import Notice

        assert self.image is not None
        base = self.image.image_id
        self._bake_key = bake_key(spec.image, self._environment_context(), base)
        listed = baking.list_baked(self.clients.ec2)
        self._baked = choose_baked(listed, self._bake_key)
        self._bake_pending = being_baked(listed, self._bake_key)
        if self._baked is not None:
            self.image = ami.ResolvedImage(self._baked.id, f"baked:{base}")
            emit(Notice(message=f"starting from baked image {self._baked.id}: apt, uv and the environment are skipped"))

    def bake(self, spec: PoolSpec, handle: NodeHandle, emit: EventSink) -> BakedImage | None:
        """The Bakes ability: CreateImage from ``handle`` when the pool asked to bake and
        started without a matching baked AMI. A failure is a Notice, never the pool's."""
        from skyward.events import Notice

        if self._bake_key is None or self._baked is not None or self._bake_pending:
            return None
        try:
            made = baking.create_baked(self.clients.ec2, handle.instance_id, self._bake_key, spec.pool_id)
        except Exception as error:
            emit(Notice(message=f"could not bake an image from {handle.instance_id}: {error}"))
            return None
        emit(
            Notice(
                message=f"baking image {made.id} from {handle.instance_id}: the next pool with this Image starts "
                f"from it. It bills for its snapshot (about ${baking.SNAPSHOT_PRICE_GB_MONTH:.2f} per GB-month) "
                "until `skyward down` deletes it"
            )
        )
        return made

    def _environment_context(self) -> BootstrapContext:
        """What every node's environment is built from (its key), without per-node steps."""
        from skyward.bootstrap import client_requirements

        core, pinned = client_requirements()
        return BootstrapContext(local=False, skyward_requirement=core, pinned=tuple(pinned), home=NODE_HOME)

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        self._pool_id = spec.pool_id
        now = datetime.datetime.now(datetime.UTC)
        self._expires_at = infra.expiry(now, lifetime(spec.timeout, self.config.bootstrap_timeout, NODE_TTL_MARGIN))
        try:
            resources.sweep_at_start(self.clients, self.config.region, spec.pool_id, emit)  # what dead clients left
            self.plan(spec, emit)
            assert self.network is not None
            tags = infra.pool_tags(spec.pool_id, self._expires_at, name=f"skyward-{spec.pool_id}")
            self.group_id = infra.create_security_group(
                self.clients.ec2,
                pool_id=spec.pool_id,
                vpc_id=self.network.vpc_id,
                client_cidr=self.client_cidr,
                ports=node_ports(DEFAULT_AGENT_PORT, spec.workers_per_node),
                tags=tags,
            )
            plan = self._role_plan(spec)
            if plan.needed and self.config.instance_profile is None:
                self.role = iam.PoolRole.create(self.clients.iam, f"skyward-{spec.pool_id}", plan, tags)
        except (ClientError, BotoCoreError) as error:
            raise explain(error, f"preparing pool {spec.pool_id} in {self.config.region}") from error
        zones = ",".join(self.offer.zones[:3]) if self.offer else ""
        return f"{self.config.region} ({zones})" if zones else self.config.region

    def _role_plan(self, spec: PoolSpec) -> iam.RolePlan:
        from skyward_aws.volumes import S3Volume, partition, policy_statements

        statements: list[dict[str, Any]] = []
        for volume in spec.volumes:
            if isinstance(volume, S3Volume):
                statements += policy_statements(volume, self.config.region)
        return iam.plan_role(statements, self.config.use_ssm, partition(self.config.region))

    def _instance_profile_arn(self) -> str | None:
        if self.role is not None:
            return self.role.arn
        if self.config.instance_profile is not None:
            profile = self.clients.iam.get_instance_profile(InstanceProfileName=self.config.instance_profile)
            return str(profile["InstanceProfile"]["Arn"])
        return None

    # -- launch --------------------------------------------------------------------------

    def resolver(self, spec: PoolSpec) -> EndpointResolver:
        if self._resolver is None:
            if self.config.endpoint_resolver is not None:
                self._resolver = self.config.endpoint_resolver
            elif self.config.use_ssm:
                self._resolver = SsmTunnels(self.clients.ssm, self.config.region, workers=spec.workers_per_node)
            else:
                self._resolver = PublicAddress()
        return self._resolver

    def bootstrap_context(self, spec: PoolSpec, node: _Node, run_dir: str) -> BootstrapContext:
        from skyward.bootstrap import client_requirements

        core, pinned = client_requirements()
        # the region for AWS tools on the node (mount-s3 for volumes, the SDKs); the pool
        # appends the volumes' own mount steps after these
        region = shlex.quote(self.config.region)
        steps = [("region", f"export AWS_REGION={region} AWS_DEFAULT_REGION={region}")]
        if node.plan.market is Market.SPOT:
            steps.append(self.notice_watch_step(notices_dir(run_dir, node.index)))
        return BootstrapContext(
            local=False,
            python_executable=None,
            skyward_requirement=core,
            pinned=tuple(pinned),
            extra_steps=tuple(steps),
            home=NODE_HOME,
            baked=self._baked is not None,
        )

    def render_user_data(self, spec: PoolSpec, user_data: UserDataFactory, node: _Node) -> str | bytes:
        run_dir = node_run_dir(spec.pool_id, node.index)
        context = self.bootstrap_context(spec, node, run_dir)
        script = user_data(
            node.index,
            f"tcp://0.0.0.0:{DEFAULT_AGENT_PORT}",
            context,
            run_dir=run_dir,
            visible_devices=[None] * spec.workers_per_node,
        )
        return encode_user_data(script)

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        from skyward.events import InstanceLaunching

        assert self.offer is not None, "prepare() first"
        emit(InstanceLaunching(count=spec.nodes, instance_type=self.offer.name, provider="aws"))
        plans = plan_markets(self.strategy(spec), spec.nodes)
        nodes = [_Node(index=p.node, plan=p) for p in plans]
        try:
            return self._start(spec, nodes, user_data, emit)
        except BaseException as error:
            self._terminate_started()
            if isinstance(error, Exception) and not isinstance(error, ConfigurationError | ProvisioningError):
                raise explain(error, f"launching pool {spec.pool_id}") from error
            raise

    def replaces_interrupted(self, spec: PoolSpec) -> bool:
        """Whether a reclaimed spot node gets a replacement: under Spot.Always, where the
        pool must run on spot at full size."""
        return isinstance(self.strategy(spec), SpotAlways)

    def replace(self, spec: PoolSpec, handle: NodeHandle, user_data: UserDataFactory, emit: EventSink) -> NodeHandle:
        """Start a new instance for node ``handle.node`` (after its spot instance was
        reclaimed), with the same market plan, and return it once its agent listens."""
        plans = plan_markets(self.strategy(spec), spec.nodes)
        node = _Node(index=handle.node, plan=plans[handle.node])
        before = len(self.instance_ids)
        try:
            return self._start(spec, [node], user_data, emit)[0]
        except BaseException:
            self._terminate(self.instance_ids[before:])
            raise

    def _start(
        self, spec: PoolSpec, nodes: list[_Node], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        from skyward.events import Notice

        assert self.offer is not None and self.image is not None and self.network is not None
        assert self.group_id is not None
        profile_arn = self._instance_profile_arn()
        # a public address even with SSM: in a default VPC it is the node's only way out (to
        # the package index, S3 and SSM itself); the security group admits nothing from it
        public_ip = True

        def start_one(node: _Node) -> None:
            body = self.render_user_data(spec, user_data, node)
            tags = infra.pool_tags(spec.pool_id, self._expires_at, name=f"skyward-{spec.pool_id}-node-{node.index}")
            tags.append({"Key": infra.TAG_NODE, "Value": str(node.index)})

            def run_once(market: Market, zone: str) -> dict[str, Any]:
                assert self.offer is not None and self.image is not None and self.network is not None
                assert self.group_id is not None
                request = launch.run_instances_request(
                    image_id=self.image.image_id,
                    instance_type=self.offer.name,
                    user_data=body,
                    subnet_id=self.network.subnets[zone],
                    group_id=self.group_id,
                    market=market,
                    tags=tags,
                    public_ip=public_ip,
                    instance_profile_arn=profile_arn,
                )
                instance: dict[str, Any] = self.clients.launch.run_instances(**request)["Instances"][0]
                with self._lock:
                    self.instance_ids.append(str(instance["InstanceId"]))
                return instance

            assert self.offer is not None
            launched = launch.launch_node(
                node.plan, list(self.offer.zones), run_once, notice=lambda m: emit(Notice(message=m)), sleep=self._sleep
            )
            node.instance_id = str(launched.instance["InstanceId"])
            node.market, node.zone = launched.market, launched.zone
            log.info(
                "aws instance launched",
                pool=spec.pool_id,
                node=node.index,
                instance=node.instance_id,
                market=launched.market.value,
                zone=launched.zone,
            )

        in_parallel(start_one, nodes)
        self._await_running(nodes)
        for node in nodes:
            node.address = self.resolver(spec).resolve(node.description)
            self._emit_provisioned(node, emit)
        self._await_agents(spec, nodes)
        return [self._handle(node) for node in nodes]

    def _describe(self, instance_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for page in self.clients.ec2.get_paginator("describe_instances").paginate(InstanceIds=list(instance_ids)):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    found[instance["InstanceId"]] = instance
        return found

    def _await_running(self, nodes: list[_Node]) -> None:
        ids = [n.instance_id for n in nodes if n.instance_id is not None]
        deadline = time.monotonic() + self.config.bootstrap_timeout
        while True:
            described = self._describe(ids)
            pending = []
            for node in nodes:
                instance = described.get(node.instance_id or "", {})
                state = instance.get("State", {}).get("Name", "unknown")
                if state in ("shutting-down", "terminated", "stopping", "stopped"):
                    reason = instance.get("StateReason", {}).get("Message", "no reason given")
                    raise ProvisioningError(
                        f"node {node.index} ({node.instance_id}) went {state} while starting: {reason}"
                    )
                if state != "running":
                    pending.append(node.index)
                node.description = instance
            if not pending:
                return
            if time.monotonic() > deadline:
                raise LaunchTimeoutError(
                    f"nodes {pending} were not running within bootstrap_timeout={self.config.bootstrap_timeout:g} s"
                )
            self._sleep(2.0)

    def _emit_provisioned(self, node: _Node, emit: EventSink) -> None:
        from skyward.events import BootstrapStarting, InstanceProvisioned

        assert self.offer is not None and node.address is not None and node.instance_id is not None
        spot = node.market is Market.SPOT
        emit(
            InstanceProvisioned(
                instance_id=node.instance_id,
                node=node.index,
                spot=spot,
                provider="aws",
                ip=node.address.ip,
                instance_type=self.offer.name,
                price_on_demand=self.offer.instance.on_demand_price or None,
                price_spot=self._spot_price(node) if spot else None,
            )
        )
        emit(BootstrapStarting(instance_id=node.instance_id))

    def _spot_price(self, node: _Node) -> float | None:
        if node.zone in self.spot_prices:
            return self.spot_prices[node.zone]
        return self.offer.instance.spot_price if self.offer else None

    def _await_agents(self, spec: PoolSpec, nodes: list[_Node]) -> None:
        """Wait until every agent listens; fail fast when an instance dies meanwhile. The
        pool says BootstrapCompleted once it has the agent's hello (with the steps it took)."""
        waiting = {n.index: n for n in nodes}
        deadline = time.monotonic() + self.config.bootstrap_timeout
        next_state_check = time.monotonic() + STATE_CHECK_INTERVAL
        while waiting:
            for index, node in list(waiting.items()):
                assert node.address is not None and node.instance_id is not None
                if agent_listening(node.address.endpoint):
                    del waiting[index]
            if not waiting:
                return
            now = time.monotonic()
            if now > deadline:
                late = sorted(waiting.values(), key=lambda n: n.index)
                names = ", ".join(f"node {n.index} ({n.instance_id})" for n in late)
                first = late[0].instance_id
                machine = self.offer.name if self.offer else "instance"
                image = self.image.image_id if self.image else "?"
                raise ProvisioningError(
                    f"{names} did not start its agent within bootstrap_timeout={self.config.bootstrap_timeout:g} s "
                    f"({machine}, image {image}): "
                    "the bootstrap failed or is still building the environment. Every instance of the pool has "
                    "been terminated. To see why, read a node's console output while EC2 keeps it: "
                    f"aws ec2 get-console-output --instance-id {first} --region {self.config.region}; "
                    "for slow environments raise AWS(bootstrap_timeout=...)"
                )
            if now >= next_state_check:
                next_state_check = now + STATE_CHECK_INTERVAL
                described = self._describe([n.instance_id for n in waiting.values() if n.instance_id])
                for node in waiting.values():
                    state = described.get(node.instance_id or "", {}).get("State", {}).get("Name")
                    if state in ("shutting-down", "terminated", "stopping", "stopped"):
                        reason = described[node.instance_id or ""].get("StateReason", {}).get("Message", "")
                        raise ProvisioningError(
                            f"node {node.index} ({node.instance_id}) went {state} during its bootstrap: {reason}"
                        )
            self._sleep(PROBE_INTERVAL)

    def _handle(self, node: _Node) -> NodeHandle:
        assert self.offer is not None and node.address is not None and node.instance_id is not None
        spot = node.market is Market.SPOT
        extra = [("zone", node.zone or ""), ("image", self.image.image_id if self.image else "")]
        return NodeHandle(
            node=node.index,
            instance_id=node.instance_id,
            endpoint=node.address.endpoint,
            instance_type=self.offer.name,
            spot=spot,
            ip=node.address.ip,
            private_ip=node.address.private_ip,
            price_on_demand=self.offer.instance.on_demand_price,
            price_spot=self._spot_price(node) if spot else None,
            extra=tuple(extra),
        )

    # -- terminate / teardown ------------------------------------------------------------

    def _still_alive(self, instance_ids: Sequence[str]) -> list[str]:
        """Which of these instances are not yet terminated or terminating (a node may have
        ended itself: TTL, spot reclaim)."""
        described = self._describe(instance_ids)
        gone = ("shutting-down", "terminated")
        return [i for i in instance_ids if i in described and described[i]["State"]["Name"] not in gone]

    def _terminate(self, instance_ids: Sequence[str]) -> None:
        with self._lock:
            ids = sorted(set(instance_ids) - self.terminated)
        if not ids:
            return
        try:
            for attempt in range(TERMINATE_ATTEMPTS):
                ids = self._still_alive(ids)
                if not ids:
                    return
                try:
                    self.clients.ec2.terminate_instances(InstanceIds=ids)
                    break
                except Exception:
                    # A node that shuts itself down (its agent exited, TTL) races this call;
                    # what matters is whether any is still alive, so look again.
                    if attempt == TERMINATE_ATTEMPTS - 1:
                        raise
                    self._sleep(0.5 * (attempt + 1))
            with self._lock:
                self.terminated.update(ids)
            log.info("aws instances terminated", pool=self._pool_id, instances=ids)
        except Exception as error:
            log.error("aws terminate failed", pool=self._pool_id, instances=ids, error=str(error))
            raise ProvisioningError(
                f"could not terminate {', '.join(ids)}: {error}. Terminate them yourself: "
                f"aws ec2 terminate-instances --region {self.config.region} --instance-ids {' '.join(ids)}"
            ) from error

    def _terminate_started(self) -> None:
        with self._lock:
            ids = list(self.instance_ids)
        self._terminate(ids)

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Terminate every instance this driver started (the pool's nodes and any left
        from a failed start), and close the endpoints' tunnels."""
        try:
            with self._lock:
                ids = [*self.instance_ids, *(n.instance_id for n in nodes)]
            self._terminate(ids)
        finally:
            if self._resolver is not None:
                self._resolver.close()

    def teardown(self) -> None:
        """Remove the security group and the role (waiting for instances to let go)."""
        errors: list[BaseException] = []
        if self.group_id is not None:
            try:
                infra.delete_security_group(self.clients.ec2, self.group_id, sleep=self._sleep)
                self.group_id = None
            except BaseException as error:
                errors.append(error)
        if self.role is not None:
            try:
                self.role.delete(self.clients.iam)
                self.role = None
            except BaseException as error:
                errors.append(error)
        if errors:
            raise errors[0]


def _needs_some_spot(strategy: SpotStrategy, nodes: int) -> bool:
    from skyward.spot import min_spot_nodes

    return min_spot_nodes(strategy, nodes) > 0
