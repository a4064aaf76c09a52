"""The Verda provider driver.

``prepare`` reaps what earlier pools left, reads instance types, locations and live
availability (spot and on-demand), picks the smallest type that fits and a location with
capacity for it (``Verda(region=None)``) or checks the given one, and registers the SSH
key the deploy call requires. ``launch`` creates one startup script per node (its
user-data, behind a host firewall that admits the agent port from the client only),
deploys each node on the market its spot plan says, and waits until each runs with an
address. ``terminate`` deletes the instances with their OS volumes (a shut-down instance
and a left-over disk still bill); ``teardown`` sweeps the pool's instances by their
description and deletes its scripts and key.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from skyward.agent.config import node_ports
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.addresses import client_address, firewall_source
from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
from skyward.providers.cloud.naming import expiry
from skyward.providers.cloud.retry import Backoff
from skyward.providers.cloud.sizing import node_request
from skyward.providers.protocol import EventSink, NodeHandle, UserDataFactory
from skyward.spot import Market, NodePlan, SpotNever, SpotStrategy, plan_markets
from skyward_verda.api import VerdaAPI, VerdaAPIError
from skyward_verda.config import Verda, credentials_from_env
from skyward_verda.markets import markets_needed
from skyward_verda.naming import DEAD, description, hostname, parse_description, resource_name, run_dir
from skyward_verda.offers import (
    Availability,
    Markets,
    VerdaType,
    choose_location,
    offered,
    parse_availability,
    parse_instance_types,
    where_available,
)

PROVIDER = "verda"
_GOING = frozenset({"deleting", "deleted", "discontinued"})  # a delete was accepted


def with_host_firewall(script: str, ports: tuple[int, int], client_cidr: str) -> str:
    """The script with a first step that drops the node ports' traffic (agent and workers) from anyone but
    the client: Verda's public API has no cloud firewall, so the node makes its own (the
    agent also accepts only the pool's CURVE key; this keeps everyone else off the port)."""
    shebang, _, rest = script.partition("\n")
    if not shebang.startswith("#!"):
        raise ProvisioningError("the bootstrap script has no #! line")
    block = (
        "# skyward-verda: admit the agent port from the client only (Verda has no cloud firewall API)\n"
        'if [ "$(id -u)" = 0 ] && command -v iptables >/dev/null 2>&1; then\n'
        f"  iptables -C INPUT -p tcp --dport {ports[0]}:{ports[1]} ! -s {client_cidr} -j DROP 2>/dev/null \\\n"
        f"    || iptables -I INPUT -p tcp --dport {ports[0]}:{ports[1]} ! -s {client_cidr} -j DROP\n"
        "fi\n"
    )
    return f"{shebang}\n{block}{rest}"


def is_capacity_refusal(exc: VerdaAPIError) -> bool:
    message = exc.api_message.lower()
    return exc.status == 503 or "not enough resources" in message or "capacity" in message


def pick_image(images: Sequence[dict[str, Any]]) -> str:
    """The API's default OS image (an Ubuntu one, else the first)."""
    usable = [i for i in images if isinstance(i.get("image_type"), str) and not i.get("is_cluster")]
    for candidates in (
        [i for i in usable if i.get("is_default")],
        [i for i in usable if str(i["image_type"]).startswith("ubuntu")],
        usable,
    ):
        if candidates:
            return str(candidates[0]["image_type"])
    raise ProvisioningError("Verda's API lists no OS image to deploy; pass one with Verda(image=...)")


@dataclass
class _Node:
    plan: NodePlan
    name: str
    script_id: str
    instance_id: str | None = None
    market: Market | None = None


class VerdaDriver:
    name = PROVIDER

    def __init__(
        self,
        config: Verda,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._clock = clock
        self._sleep = sleep
        self._api: VerdaAPI | None = None
        self._type: VerdaType | None = None
        self._location = ""
        self._image = ""
        self._plans: list[NodePlan] = []
        self._client_cidr = ""
        self._expires = 0
        self._pool_id = ""
        self._key_id: str | None = None  # the throwaway key, when this driver made one
        self._key_ids: list[str] = []
        self._scripts: list[str] = []
        self._instances: dict[str, str] = {}  # id -> hostname, everything deployed
        self._deleted: set[str] = set()
        self._deploying = False  # a deploy was sent: teardown must sweep for lost answers
        self.reaped: Any = None

    # -- construction-time checks -------------------------------------------------------

    def validate(self, spec: Any) -> None:
        credentials_from_env()  # volumes: the pool's common rule refuses them (no VolumeMounts)

    def default_spot(self) -> SpotStrategy:
        """Verda sells spot instances; a pool that does not ask for them runs on-demand."""
        return SpotNever()

    @property
    def api(self) -> VerdaAPI:
        if self._api is None:
            client_id, secret = credentials_from_env()
            self._api = VerdaAPI(
                self.config.api_url,
                client_id,
                secret,
                timeout=self.config.api_timeout,
                backoff=Backoff(attempts=self.config.api_retries, base=self.config.api_backoff),
                sleep=self._sleep,
                clock=self._clock,
            )
        return self._api

    # -- prepare ------------------------------------------------------------------------

    def prepare(self, spec: Any, emit: EventSink) -> str:
        from skyward.events import Notice
        from skyward.providers.settings import NODE_TTL_MARGIN

        config = self.config
        self._pool_id = spec.pool_id
        if config.reap:
            from skyward_verda.reaper import reap_with

            try:
                self.reaped = reap_with(self.api, now=self._clock(), own_pool=spec.pool_id)
            except VerdaAPIError as exc:  # a safety net, not a precondition of this pool
                emit(Notice(message=f"could not look for instances earlier pools left behind: {exc}"))
                self.reaped = None
        if self.reaped is not None:
            for instance_id, name, reason in self.reaped.instances:
                emit(Notice(message=f"deleted Verda instance {name} ({instance_id}) left by an earlier pool: {reason}"))
            for failure in self.reaped.failures:
                emit(Notice(message=f"could not delete a leftover of an earlier pool: {failure}"))
        self._plans = plan_markets(spec.spot, spec.nodes)
        markets = markets_needed(self._plans)
        self._type, self._location = self.choose(spec, markets, emit)
        self._image = config.image or pick_image(self.api.images())
        address = client_address(config.client_address, config.address_url, config.api_timeout, "Verda")
        self._client_cidr = firewall_source(address)
        self._expires = expiry(self._clock(), spec.timeout, config.bootstrap_timeout, NODE_TTL_MARGIN)
        if config.ssh_key_ids:
            self._key_ids = list(config.ssh_key_ids)
        else:
            from skyward_verda.sshkey import throwaway_public_key

            name = resource_name(spec.pool_id, self._expires)
            self._key_id = self.api.create_ssh_key(name, throwaway_public_key(name))
            self._key_ids = [self._key_id]
        return self._location

    def choose(self, spec: Any, markets: Markets, emit: EventSink) -> tuple[VerdaType, str]:
        """The smallest type that fits the request, and a location that can deploy it now.

        The type is chosen from everything Verda offers, then a location for it: when the
        smallest fitting type has no capacity, the pool fails and says what is available,
        rather than quietly renting a bigger (dearer) one."""
        from skyward.events import Notice
        from skyward.instances import NoMatchingInstanceError, select_instance

        types = parse_instance_types(self.api.instance_types())
        by_name = {t.name: t for t in types}
        locations = [str(loc["code"]) for loc in self.api.locations() if loc.get("code")]
        if self.config.region is not None and self.config.region not in locations:
            raise ConfigurationError(
                f"Verda(region={self.config.region!r}) is not a Verda location; use one of: {', '.join(locations)}, "
                "or region=None to pick one with capacity"
            )
        candidates = [self.config.region] if self.config.region is not None else locations
        request = node_request(spec)
        chosen = select_instance([t.instance for t in types], **request)
        on_demand = parse_availability(self.api.availability(spot=False))
        spot = parse_availability(self.api.availability(spot=True))
        location = choose_location(chosen.name, candidates, markets, on_demand, spot)
        if location is None:
            try:
                other = select_instance(offered(types, candidates, markets, on_demand, spot), **request)
            except NoMatchingInstanceError:
                other = None
            raise ProvisioningError(self._no_capacity(chosen.name, markets, on_demand, spot, other))
        if markets.spot_optional and chosen.name not in spot.get(location, frozenset()):
            self._plans = [replace(p, market=Market.ON_DEMAND, fallback=False) for p in self._plans]
            emit(Notice(message=f"spot='if-available': no spot capacity for {chosen.name} in {location}; on-demand"))
        return by_name[chosen.name], location

    def _no_capacity(
        self, type_name: str, markets: Markets, on_demand: Availability, spot: Availability, other: Any
    ) -> str:
        where = f"in {self.config.region}" if self.config.region else "in any location"
        if markets.spot_optional:
            wanted = "spot or on-demand"
        elif markets.spot and markets.on_demand:
            wanted = "spot and on-demand (in one location)"
        else:
            wanted = "spot" if markets.spot else "on-demand"
        tips = []
        if self.config.region is not None:
            tips.append("Verda(region=None) to use any location with capacity")
        if markets.spot and not markets.spot_optional:
            tips.append("spot='if-available' (or 'never')")
        elif not markets.spot:
            tips.append("spot='if-available'")
        if other is not None:
            tips.append(
                f"machine={other.name!r} (a bigger type, ${other.on_demand_price:g}/h on-demand, available now)"
            )
        tips += ["another accelerator or size", "again later"]
        return (
            f"Verda has no {wanted} capacity for {type_name} {where} right now (it is available: "
            f"{where_available(type_name, on_demand, spot)}). Try {', '.join(tips)}"
        )

    # -- launch -------------------------------------------------------------------------

    def launch(self, spec: Any, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        from skyward.events import InstanceLaunching

        kind = self._type
        assert kind is not None, "prepare() first"
        emit(InstanceLaunching(count=spec.nodes, instance_type=kind.name, provider=PROVIDER))
        context = cloud_bootstrap_context()
        bind = f"tcp://0.0.0.0:{self.config.agent_port}"
        nodes: list[_Node] = []
        try:
            for plan in self._plans:
                name = hostname(spec.pool_id, plan.node)
                script = user_data(plan.node, bind, context, run_dir=run_dir(spec.pool_id), instance_id=name)
                ports = node_ports(self.config.agent_port, spec.workers_per_node)
                script = with_host_firewall(script, ports, self._client_cidr)
                script_id = self.api.create_script(resource_name(spec.pool_id, self._expires, plan.node), script)
                self._scripts.append(script_id)
                nodes.append(_Node(plan, name, script_id))
            for node in nodes:
                self._deploy(spec, node, emit)
            return self._wait_running(nodes, emit)
        except BaseException:
            self._delete_created()
            raise

    def _deploy(self, spec: Any, node: _Node, emit: EventSink) -> None:
        from skyward.events import Notice

        kind = self._type
        assert kind is not None
        market, tries = node.plan.market, 0
        while True:
            body = {
                "instance_type": kind.name,
                "image": self._image,
                "ssh_key_ids": list(self._key_ids),
                "startup_script_id": node.script_id,
                "hostname": node.name,
                "description": description(spec.pool_id, self._expires),
                "location_code": self._location,
                "is_spot": market is Market.SPOT,
            }
            self._deploying = True
            try:
                instance_id = self.api.deploy(body)
            except VerdaAPIError as exc:
                if not is_capacity_refusal(exc):
                    raise
                if market is Market.SPOT and node.plan.fallback:
                    emit(Notice(message=f"node {node.plan.node}: no spot capacity for {kind.name} ({exc.api_message}); "
                                "running it on-demand"))  # fmt: skip
                    market = Market.ON_DEMAND
                    continue
                if tries < node.plan.retries:
                    tries += 1
                    self._sleep(node.plan.interval)
                    continue
                made = len(self._instances)
                undone = f" ({made} instance(s) had been deployed; they were deleted)" if made else ""
                tips = ["Verda(region=None) to use any location with capacity"] if self.config.region else []
                tips += ["spot='if-available'"] if market is Market.SPOT else ["spot='if-available' or 'always'"]
                tips += ["another accelerator or size", "fewer nodes", "again later"]
                raise ProvisioningError(
                    f"Verda has no {market.value} capacity for {kind.name} in {self._location}: {exc.api_message}"
                    f"{undone}. Try {', '.join(tips)}"
                ) from exc
            self._instances[instance_id] = node.name
            node.instance_id, node.market = instance_id, market
            return

    def _wait_running(self, nodes: Sequence[_Node], emit: EventSink) -> list[NodeHandle]:
        from skyward.events import BootstrapStarting, InstanceProvisioned

        kind = self._type
        assert kind is not None
        handles: dict[int, NodeHandle] = {}
        deadline = self._clock() + self.config.provision_timeout
        while len(handles) < len(nodes):
            listed = {str(i.get("id")): i for i in self.api.instances()}
            for node in nodes:
                if node.plan.node in handles:
                    continue
                assert node.instance_id is not None
                instance = listed.get(node.instance_id) or self.api.instance(node.instance_id)
                if instance is None:
                    raise ProvisioningError(
                        f"instance {node.name} ({node.instance_id}) disappeared while it was starting"
                        + (" (a spot instance can be reclaimed at any time)" if node.market is Market.SPOT else "")
                    )
                status = str(instance.get("status", ""))
                if status in DEAD:
                    raise ProvisioningError(
                        f"instance {node.name} ({node.instance_id}) is {status!r} instead of starting"
                    )
                ip = instance.get("ip")
                if status != "running" or not ip:
                    continue
                spot = node.market is Market.SPOT
                handles[node.plan.node] = NodeHandle(
                    node=node.plan.node,
                    instance_id=node.instance_id,
                    endpoint=f"tcp://{ip}:{self.config.agent_port}",
                    instance_type=kind.name,
                    spot=spot,
                    ip=str(ip),
                    private_ip=str(ip),
                    price_on_demand=kind.instance.on_demand_price,
                    price_spot=kind.instance.spot_price,
                    extra=(("name", node.name), ("location", self._location)),
                )
                emit(
                    InstanceProvisioned(
                        instance_id=node.instance_id, node=node.plan.node, spot=spot, provider=PROVIDER, ip=str(ip),
                        instance_type=kind.name, price_on_demand=kind.instance.on_demand_price,
                        price_spot=kind.instance.spot_price,
                    )
                )  # fmt: skip
                emit(BootstrapStarting(instance_id=node.instance_id))
            if len(handles) == len(nodes):
                break
            if self._clock() > deadline:
                waiting = [n.name for n in nodes if n.plan.node not in handles]
                raise ProvisioningError(
                    f"instances {', '.join(waiting)} were not running within provision_timeout="
                    f"{self.config.provision_timeout:g} s; raise Verda(provision_timeout=...) or try another location"
                )
            self._sleep(self.config.poll_interval)
        return [handles[n] for n in sorted(handles)]

    # -- the end ------------------------------------------------------------------------

    def _delete_created(self) -> list[str]:
        """Delete every instance this driver deployed, with its OS volume."""
        pending = [i for i in self._instances if i not in self._deleted]
        if not pending:
            return []
        failures: list[str] = []
        volumes: list[str] = []
        live: list[str] = []
        for instance_id in pending:
            try:
                instance = self.api.instance(instance_id)
            except VerdaAPIError as exc:
                failures.append(f"{self._instances[instance_id]} ({instance_id}): {exc}")
                continue
            if instance is None:
                self._deleted.add(instance_id)
                continue
            live.append(instance_id)
            if instance.get("os_volume_id"):
                volumes.append(str(instance["os_volume_id"]))
        if live:
            try:
                self.api.delete_instances(live, volumes)
                self._deleted.update(live)
            except VerdaAPIError as exc:
                failures.append(f"{', '.join(self._instances[i] for i in live)}: {exc}")
        return failures

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete (not shut down) every instance of the pool, and its OS volume."""
        if self._api is None:
            return
        for node in nodes:
            self._instances.setdefault(node.instance_id, node.instance_id)
        failures = self._delete_created()
        if failures:
            raise ProvisioningError(
                "could not delete these Verda instances, which bill until deleted: " + "; ".join(failures)
            )

    def teardown(self) -> None:
        """Sweep the pool's instances by description (a deploy whose answer was lost may
        have made one), then delete its startup scripts and its throwaway key."""
        if self._api is None:
            return
        failures: list[str] = []
        if self._deploying:
            try:
                for instance in self.api.instances():
                    mark = parse_description(str(instance.get("description", "")))
                    if mark is None or mark.pool_id != self._pool_id:
                        continue
                    instance_id = str(instance["id"])
                    self._instances.setdefault(instance_id, str(instance.get("hostname", instance_id)))
                    if str(instance.get("status")) not in _GOING:
                        self._deleted.discard(instance_id)  # still there: delete it (again)
                failures += self._delete_created()
            except VerdaAPIError as exc:
                failures.append(f"listing instances: {exc}")
        for script_id in list(self._scripts):
            try:
                self.api.delete_script(script_id)
                self._scripts.remove(script_id)
            except VerdaAPIError as exc:
                failures.append(f"startup script {script_id}: {exc}")
        if self._key_id is not None:
            try:
                self.api.delete_ssh_key(self._key_id)
                self._key_id = None
            except VerdaAPIError as exc:
                failures.append(f"SSH key {self._key_id}: {exc}")
        if failures:
            raise ProvisioningError("Verda teardown left things behind: " + "; ".join(failures))
