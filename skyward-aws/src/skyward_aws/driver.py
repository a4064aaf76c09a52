"""``AWSDriver``: EC2's verbs on the cloud template (``skyward.providers.cloud``).

The template owns the orchestration every cloud shares: sweep leftovers, plan, make the
shared infrastructure, create the nodes in parallel under their spot plan, poll them
until running, emit the lifecycle events, delete everything made when a step fails,
terminate with verification, tear down. This module supplies what only EC2 knows: the
offer (instance type, zones, per-zone spot prices, machine image), one node's
``RunInstances`` round over the zones, ``DescribeInstances``, ``TerminateInstances``,
the shared pieces (security group, an IAM role for S3 volumes and SSM), and how the
client reaches an agent (its public address, or an SSM tunnel).
"""

from __future__ import annotations

import gzip
import logging
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog
from botocore.exceptions import BotoCoreError, ClientError

from skyward.errors import CapacityError, NoOfferError, ProvisioningError, SkywardError
from skyward.providers import (
    BakedImage,
    Bakery,
    BootstrapContext,
    EventSink,
    Market,
    NodeHandle,
    NodePlan,
    Notice,
    PoolSpec,
    SpotAlways,
    SpotStrategy,
    current_catalog,
    min_spot_nodes,
    normalize_spot,
    wants_spot,
)
from skyward.providers.cloud import ChosenOffer, Instance, InstanceState, Labels, NodeRequest, SpotCloudProvider
from skyward_aws import ami, baking, console, families, iam, infra, interruption, launch, offers, resources
from skyward_aws.client_ip import Discover, discover_public_ip
from skyward_aws.config import AWS
from skyward_aws.endpoints import EndpointResolver, PublicAddress, SsmTunnels, require_session_manager_plugin
from skyward_aws.pricing import shipped_catalog
from skyward_aws.session import Clients, explain, make_clients, new_session, require_credentials
from skyward_aws.volumes import S3Volume, partition, policy_statements

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
_STATES = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPED,
    "stopped": InstanceState.STOPPED,
    "shutting-down": InstanceState.GONE,
    "terminated": InstanceState.GONE,
}
RECLAIM_BACKSTOP_INTERVAL = 30.0
"""Seconds between the template's describe-based checks for reclaimed spot nodes. EC2
warns two minutes ahead (the node's watcher, InterruptionNotices), so describing is only
the backstop for a notice the watcher missed: four looks within the warning, instead of a
DescribeInstances every ``poll_interval`` for the pool's whole life."""
_FILTER_VALUES = 200  # EC2 takes at most 200 values per filter


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


class AWSDriver(SpotCloudProvider[AWS]):
    """EC2 provider. ``session`` (a boto3 Session), ``discover_ip`` (the client's address
    as a CIDR), ``clock`` and ``sleep`` are seams; by default boto3's chain,
    ``AWS.address_url``, ``time.time`` and ``time.sleep``.

    Abilities: a spot market (default ``Spot.Always``), two minutes' notice before a
    reclaim (InterruptionNotices) besides the template's describe-based ReclaimWatch,
    replacement of a reclaimed node (SpotReplacement), S3 volumes (VolumeMounts), the
    console's last lines in the error of a node that fails to start (ConsoleOutput)."""

    name = "aws"

    def fuse_unavailable(self, spec: PoolSpec) -> str | None:
        return None  # FuseMounts: a virtual machine, root, and /dev/fuse (the bootstrap installs rclone)

    def __init__(
        self,
        config: AWS,
        *,
        session: Any = None,
        discover_ip: Discover | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, clock=clock, sleep=sleep)
        self._session = session
        self._discover_ip = discover_ip
        self._clients: Clients | None = None
        self.offer: offers.Ec2Offer | None = None
        self.image: ami.ResolvedImage | None = None
        self.network: infra.Network | None = None
        self.group_id: str | None = None
        self.role: iam.PoolRole | None = None
        self.spot_prices: dict[str, float] = {}
        self._profile_arn: str | None = None
        self._resolver: EndpointResolver | None = None
        self._described: dict[str, Mapping[str, Any]] = {}  # id -> the last describe_instances item
        self._seen: set[str] = set()  # ids describe has answered for at least once
        self._pool_id = ""
        self._bakery = Bakery()  # Image(bake=True): the baked AMI this pool starts from, the one it bakes

    # -- abilities -------------------------------------------------------------------------

    def default_spot(self) -> SpotStrategy:
        return DEFAULT_SPOT

    def strategy(self, spec: PoolSpec) -> SpotStrategy:
        return DEFAULT_SPOT if spec.spot is None else normalize_spot(spec.spot)

    def mounts(self, volume: object) -> bool:
        return isinstance(volume, S3Volume)

    def notice_watch_step(self, notices_dir: str) -> tuple[str, str]:
        return ("spot-watch", interruption.bootstrap_step(notices_dir))

    @property
    def reclaim_poll_interval(self) -> float:
        return max(self.config.poll_interval, RECLAIM_BACKSTOP_INTERVAL)

    # -- validate ------------------------------------------------------------------------

    def validate(self, spec: PoolSpec) -> None:
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
            config = self.config
            self._clients = make_clients(
                self._get_session(), config.region, attempts=config.api_retries, timeout=config.api_timeout
            )
        return self._clients

    # -- prepare -------------------------------------------------------------------------

    def prepare(self, spec: PoolSpec, emit: EventSink) -> str:
        self._pool_id = spec.pool_id
        try:
            super().prepare(spec, emit)
        except (ClientError, BotoCoreError) as error:
            raise explain(error, f"preparing pool {spec.pool_id} in {self.config.region}") from error
        zones = ",".join(self.offer.zones[:3]) if self.offer else ""
        return f"{self.config.region} ({zones})" if zones else self.config.region

    def reap(self, spec: PoolSpec, emit: EventSink) -> None:
        """What dead clients left past their expiry (``resources.sweep_expired``: never
        fails the pool start; what it could not do is a Notice)."""
        resources.sweep_at_start(self.clients, self.config.region, spec.pool_id, emit)

    def request_for(self, spec: PoolSpec) -> offers.Request:
        workers = spec.workers_per_node
        return offers.Request(
            accelerator=spec.accelerator,
            cpu=None if spec.cpu is None else spec.cpu * workers,
            memory=None if spec.memory_mb is None else spec.memory_mb * 2**20 * workers,
            machine=spec.machine,
            needs_spot=min_spot_nodes(self.strategy(spec), spec.nodes) > 0,
        )

    def plan(self, spec: PoolSpec, emit: EventSink) -> offers.Ec2Offer:
        """The instance type, its zones and prices, and the machine image (read-only calls)."""
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
        self.offer = chosen
        if self.config.ami is not None:
            self.image = ami.ResolvedImage(self.config.ami, "explicit")
        else:
            self.image = ami.resolve_image(
                ec2, self.clients.ssm, ami.image_kind(chosen.device_vendor), chosen.architecture
            )
        if spec.image.bake:
            self._choose_baked(spec, emit)
        log.info(
            "aws plan",
            pool=spec.pool_id,
            instance_type=chosen.name,
            zones=list(chosen.zones),
            image=self.image.image_id,
            image_from=self.image.how,
        )
        return chosen

    def _choose_baked(self, spec: PoolSpec, emit: EventSink) -> None:
        """``Image(bake=True)``: start from this image's baked AMI when one matches its key
        exactly (skyward.providers.baking.Bakery); a stale one is left alone."""
        assert self.image is not None
        base = self.image.image_id
        chosen = self._bakery.choose(
            baking.Ec2BakeStore(self.clients.ec2), spec.image, self._environment_context(), base, emit
        )
        if chosen is not None:
            self.image = ami.ResolvedImage(chosen.id, f"baked:{base}")

    def bake(self, spec: PoolSpec, handle: NodeHandle, emit: EventSink) -> BakedImage | None:
        """The Bakes ability: CreateImage from ``handle`` (skyward.providers.baking.Bakery)."""
        return self._bakery.bake(baking.Ec2BakeStore(self.clients.ec2), spec, handle, emit)

    def _environment_context(self) -> BootstrapContext:
        """What every node's environment is built from (its key), without per-node steps:
        the template's cloud context with AWS's NODE_HOME."""
        return replace(self.shared_context(), home=NODE_HOME)

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        chosen = self.plan(spec, emit)
        return ChosenOffer(
            instance_type=chosen.name,
            region=self.config.region,
            price_on_demand=chosen.instance.on_demand_price,
            price_spot=chosen.instance.spot_price,
            spot_available=chosen.supports_spot,
        )

    def ingress_source(self) -> str:
        """``client_cidr`` (deprecated), ``client_address``, or the discovered address;
        ``""`` with ``use_ssm``: the group admits nothing from outside, nothing is asked."""
        config = self.config
        if config.use_ssm:
            return ""
        if config.ingress_cidr is not None:
            return config.ingress_cidr
        if self._discover_ip is not None:
            return self._discover_ip()
        return discover_public_ip(config.address_url, config.api_timeout)

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: EventSink) -> None:
        """The pool's security group (the node ports from ``labels.client_cidr`` only, all
        traffic between the pool's nodes) and, when S3 volumes or SSM need one, its IAM role."""
        assert self.network is not None
        tags = infra.pool_tags(spec.pool_id, infra.expiry_tag(labels.expires), name=f"skyward-{spec.pool_id}")
        self.group_id = infra.create_security_group(
            self.clients.ec2,
            pool_id=spec.pool_id,
            vpc_id=self.network.vpc_id,
            client_cidr=labels.client_cidr or None,
            ports=labels.ports,
            tags=tags,
        )
        plan = self._role_plan(spec)
        if plan.needed and self.config.instance_profile is None:
            self.role = iam.PoolRole.create(self.clients.iam, f"skyward-{spec.pool_id}", plan, tags)
        if self.role is not None:
            self._profile_arn = self.role.arn
        elif self.config.instance_profile is not None:
            profile = self.clients.iam.get_instance_profile(InstanceProfileName=self.config.instance_profile)
            self._profile_arn = str(profile["InstanceProfile"]["Arn"])

    def _role_plan(self, spec: PoolSpec) -> iam.RolePlan:
        statements: list[dict[str, Any]] = []
        for volume in spec.volumes:
            if isinstance(volume, S3Volume):
                statements += policy_statements(volume, self.config.region)
        return iam.plan_role(statements, self.config.use_ssm, partition(self.config.region))

    # -- the node's script ------------------------------------------------------------------

    def run_dir(self, spec: PoolSpec, node: int) -> str:
        return node_run_dir(spec.pool_id, node)

    def instance_name(self, spec: PoolSpec, node: int) -> str:
        return f"skyward-{spec.pool_id}-node-{node}"

    def bootstrap_context(self, spec: PoolSpec, market: Market, run_dir: str, node: int) -> BootstrapContext:
        """The template's (with the spot watcher on spot nodes), after the region for AWS
        tools on the node (mount-s3 for volumes, the SDKs); environments under NODE_HOME."""
        context = super().bootstrap_context(spec, market, run_dir, node)
        region = shlex.quote(self.config.region)
        step = ("region", f"export AWS_REGION={region} AWS_DEFAULT_REGION={region}")
        steps = (step, *context.extra_steps)
        return replace(context, extra_steps=steps, home=NODE_HOME, baked=self._bakery.starts_baked)

    # -- the verbs ---------------------------------------------------------------------------

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        """One RunInstances round over the offer's zones (``launch.launch_in_zones``)."""
        offer, image, network, group_id = self.offer, self.image, self.network, self.group_id
        assert offer is not None and image is not None and network is not None and group_id is not None
        body = encode_user_data(request.script)
        tags = infra.pool_tags(spec.pool_id, infra.expiry_tag(labels.expires), name=request.name)
        tags.append({"Key": infra.TAG_NODE, "Value": str(request.node)})

        def run_once(zone: str) -> Mapping[str, Any]:
            arguments = launch.run_instances_request(
                image_id=image.image_id,
                instance_type=offer.name,
                user_data=body,
                subnet_id=network.subnets[zone],
                group_id=group_id,
                market=request.market,
                tags=tags,
                # a public address even with SSM: in a default VPC it is the node's only way
                # out (to the package index, S3 and SSM itself); the group admits nothing
                public_ip=True,
                instance_profile_arn=self._profile_arn,
            )
            instance: Mapping[str, Any] = self.clients.launch.run_instances(**arguments)["Instances"][0]
            return instance

        instance, zone = launch.launch_in_zones(
            request.node, request.market, list(offer.zones), run_once, sleep=self._sleep
        )
        instance_id = str(instance["InstanceId"])
        log.info(
            "aws instance launched",
            pool=spec.pool_id,
            node=request.node,
            instance=instance_id,
            market=request.market.value,
            zone=zone,
        )
        return instance_id

    def is_capacity_refusal(self, error: Exception) -> bool:
        return isinstance(error, CapacityError)

    def explain_create_failure(self, error: Exception, market: Market, created: int, total: int) -> Exception:
        if isinstance(error, ClientError | BotoCoreError):
            error = explain(error, f"launching pool {self._pool_id}")
        if isinstance(error, CapacityError) and error.node is not None:
            if market is Market.SPOT:
                tries = self.plan_for(error.node).retries + 1
                advice = (
                    f" in each of {tries} round{'s' if tries > 1 else ''}. Try again later, another instance type or "
                    "region, or spot='if-available' to fall back to on-demand"
                )
            else:
                advice = "; try another instance type or region"
            error = CapacityError(f"{error}{advice}", node=error.node, market=error.market)
        return super().explain_create_failure(error, market, created, total)

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        """By an instance-id filter, which omits an id EC2 does not know yet (its API is
        eventually consistent) instead of failing the call: one never seen is still
        pending, one seen before and now missing is gone."""
        ids = list(dict.fromkeys(instance_ids))
        found: dict[str, Instance] = {}
        try:
            for start in range(0, len(ids), _FILTER_VALUES):
                filters = [{"Name": "instance-id", "Values": ids[start : start + _FILTER_VALUES]}]
                for page in self.clients.ec2.get_paginator("describe_instances").paginate(Filters=filters):
                    for reservation in page["Reservations"]:
                        for item in reservation["Instances"]:
                            found[str(item["InstanceId"])] = self._instance(item)
        except (ClientError, BotoCoreError) as error:
            raise explain(error, f"describing pool {self._pool_id}'s instances") from error
        with self._lock:
            self._seen.update(found)
            for instance_id in ids:
                if instance_id not in found and instance_id not in self._seen:
                    found[instance_id] = Instance(instance_id, InstanceState.PENDING, status="not yet listed")
        return found

    def _instance(self, item: Mapping[str, Any]) -> Instance:
        instance_id = str(item["InstanceId"])
        with self._lock:
            self._described[instance_id] = item
        status = str(item.get("State", {}).get("Name", "unknown"))
        if status in ("stopping", "stopped", "shutting-down", "terminated"):
            reason = item.get("StateReason", {}).get("Message")
            status = f"{status}: {reason}" if reason else status
        zone = str(item.get("Placement", {}).get("AvailabilityZone", ""))
        spot = item.get("InstanceLifecycle") == "spot"
        return Instance(
            instance_id,
            _STATES.get(str(item.get("State", {}).get("Name")), InstanceState.PENDING),
            ip=item.get("PublicIpAddress") or item.get("PrivateIpAddress"),
            private_ip=item.get("PrivateIpAddress"),
            status=status,
            price_spot=self.spot_prices.get(zone) if spot else None,
            extra=(("zone", zone), ("image", self.image.image_id if self.image else "")),
        )

    def endpoint(self, instance: Instance) -> str:
        """Through the endpoint resolver: the public address, an SSM tunnel, or the
        caller's own (``AWS(endpoint_resolver=...)``)."""
        with self._lock:
            item = self._described[instance.id]
        return self.resolver().resolve(item).endpoint

    def resolver(self) -> EndpointResolver:
        if self._resolver is None:
            config = self.config
            if config.endpoint_resolver is not None:
                self._resolver = config.endpoint_resolver
            elif config.use_ssm:
                workers = self._labels.ports[1] - self._labels.ports[0] if self._labels else 1
                self._resolver = SsmTunnels(self.clients.ssm, config.region, port=config.agent_port, workers=workers)
            else:
                self._resolver = PublicAddress(port=config.agent_port)
        return self._resolver

    def delete(self, instance_ids: Sequence[str]) -> None:
        """TerminateInstances (EBS volumes go with them: DeleteOnTermination)."""
        try:
            self.clients.ec2.terminate_instances(InstanceIds=list(instance_ids))
        except (ClientError, BotoCoreError) as error:
            # a node shutting itself down (TTL, lost client) races this call; the template
            # describes them again and retries what still lives
            raise explain(error, f"terminating {', '.join(instance_ids)}") from error
        with self._lock:
            self._seen.update(instance_ids)  # EC2 knows them: missing from a describe now means gone
        log.info("aws instances terminated", pool=self._pool_id, instances=list(instance_ids))

    def console_output(self, instance_id: str) -> str:
        """The ConsoleOutput ability: what the instance printed (``console.read_console``)."""
        try:
            return console.read_console(self.clients.ec2, instance_id)
        except (ClientError, BotoCoreError) as error:
            raise explain(error, f"reading the console output of {instance_id}") from error

    def cleanup_hint(self, instance_ids: Sequence[str]) -> str:
        return (
            f"Terminate them yourself: aws ec2 terminate-instances --region {self.config.region} "
            f"--instance-ids {' '.join(instance_ids)}"
        )

    def listed(self) -> list[str]:
        if not self._pool_id:
            return []
        filters = [{"Name": f"tag:{infra.TAG_POOL}", "Values": [self._pool_id]}]
        found = []
        for page in self.clients.ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                for item in reservation["Instances"]:
                    if _STATES.get(str(item["State"]["Name"])) is not InstanceState.GONE:
                        found.append(str(item["InstanceId"]))
        return found

    def remove_nodes(self, nodes: Sequence[NodeHandle]) -> None:
        """The template's verified delete of exactly these nodes, then their SSM tunnels
        closed (the other nodes' stay open)."""
        try:
            super().remove_nodes(nodes)
        finally:
            if isinstance(self._resolver, SsmTunnels):
                for node in nodes:
                    self._resolver.release(node.instance_id)

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """The template's verified terminate, then the endpoints' tunnels closed."""
        try:
            super().terminate(nodes)
        finally:
            if self._resolver is not None:
                self._resolver.close()

    def delete_infrastructure(self) -> list[str]:
        """The security group (waiting for instances to let go of it), then the role."""
        failures: list[str] = []
        if self.group_id is not None:
            try:
                infra.delete_security_group(self.clients.ec2, self.group_id, sleep=self._sleep)
                self.group_id = None
            except (SkywardError, OSError) as error:
                failures.append(str(error))
        if self.role is not None:
            role = self.role
            try:
                role.delete(self.clients.iam)
                self.role = None
            except (ClientError, BotoCoreError, SkywardError) as error:
                failures.append(f"IAM role {role.name}: {error}")
        return failures
