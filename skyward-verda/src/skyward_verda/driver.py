"""The Verda provider driver: Verda's verbs on the core's cloud template.

The template (``skyward.providers.cloud.SpotCloudProvider``) does the orchestration,
the spot plan (fall back to on-demand or retry on a capacity refusal), and noticing a spot
instance Verda took away without warning (Verda gives none: the pool polls
``reclaimed``). This supplies: reaping earlier pools' instances; the smallest type that
fits and a location with capacity for it (``Verda(region=None)``) or a check of the given
one; the SSH key the deploy call requires; one startup script per node (its user-data,
behind a host firewall that admits the node ports from the client only); deploying,
describing, and deleting instances with their OS volumes (a shut-down instance and a
left-over disk still bill).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from skyward.errors import CapacityError, ConfigurationError, ProvisioningError
from skyward.providers import (
    EventSink,
    Market,
    NodePlan,
    NoMatchingInstanceError,
    PoolSpec,
    SpotNever,
    SpotStrategy,
)
from skyward.providers.cloud import ChosenOffer, Instance, InstanceState, Labels, NodeRequest, SpotCloudProvider
from skyward.providers.cloud.removal import sweep_messages, sweep_with_notices
from skyward.providers.cloud.retry import Backoff
from skyward.providers.cloud.sizing import node_request
from skyward.providers.cloud.sshkey import throwaway_public_key
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
from skyward_verda.reaper import reap_with
from skyward_verda.teardown import Doomed, delete_instances

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


def pick_image(images: Sequence[dict[str, Any]], instance_type: str, wanted: str | None = None) -> str:
    """The OS image to deploy ``instance_type`` with, from the images Verda offers for
    that type (``GET /images?instance_type=``): ``wanted`` when it is one of them, else
    the default among them (an Ubuntu one, else the first). An image taken from the
    unfiltered list may not be offered for a GPU type, and the deploy would be refused."""
    usable = [i for i in images if isinstance(i.get("image_type"), str) and not i.get("is_cluster")]
    if wanted is not None:
        if any(wanted in (i.get("image_type"), i.get("id")) for i in usable):
            return wanted
        offered = ", ".join(str(i["image_type"]) for i in usable) or "none"
        raise ConfigurationError(
            f"Verda(image={wanted!r}) is not offered for {instance_type}; Verda offers it with: {offered}"
        )
    for candidates in (
        [i for i in usable if i.get("is_default")],
        [i for i in usable if str(i["image_type"]).startswith("ubuntu")],
        usable,
    ):
        if candidates:
            return str(candidates[0]["image_type"])
    raise ProvisioningError(f"Verda's API lists no OS image for {instance_type}; pass one with Verda(image=...)")


class VerdaDriver(SpotCloudProvider[Verda]):
    name = PROVIDER

    def fuse_unavailable(self, spec: PoolSpec) -> str | None:
        return None  # FuseMounts: a virtual machine, root, and /dev/fuse (the bootstrap installs rclone)

    def __init__(
        self,
        config: Verda,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, clock=clock, sleep=sleep)
        self._api: VerdaAPI | None = None
        self._type: VerdaType | None = None
        self._location = ""
        self._image = ""
        self._pool_id = ""
        self._key_id: str | None = None  # the throwaway key, when this driver made one
        self._key_ids: list[str] = []
        self._scripts: dict[tuple[int, str], str] = {}  # (node, script text) -> startup script id
        self.reaped: Any = None

    def validate(self, spec: PoolSpec) -> None:
        credentials_from_env()  # volumes: the pool's common rule refuses them (no VolumeMounts)

    def default_spot(self) -> SpotStrategy:
        """Verda's spot instances can be reclaimed with their disk at any moment: a pool
        that does not ask for them runs on-demand."""
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

    def reap(self, spec: PoolSpec, emit: EventSink) -> None:
        def sweep() -> list[str]:
            self.reaped = None
            self.reaped = reaped = reap_with(self.api, now=self._clock(), own_pool=spec.pool_id)
            return sweep_messages(reaped.instances, reaped.failures, "Verda instance")

        sweep_with_notices(sweep, emit, VerdaAPIError, "instances")

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        """The smallest type that fits the request, and a location that can deploy it now.

        The type is chosen from everything Verda offers, then a location for it: when the
        smallest fitting type has no capacity, the pool fails and says what is available,
        rather than quietly renting a bigger (dearer) one."""
        self._pool_id = spec.pool_id
        markets = markets_needed(list(plans))
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
        chosen = request.select([t.instance for t in types])
        on_demand = parse_availability(self.api.availability(spot=False))
        spot = parse_availability(self.api.availability(spot=True))
        location = choose_location(chosen.name, candidates, markets, on_demand, spot)
        if location is None:
            try:
                other = request.select(offered(types, candidates, markets, on_demand, spot))
            except NoMatchingInstanceError:
                other = None
            raise CapacityError(self._no_capacity(chosen.name, markets, on_demand, spot, other))
        self._type, self._location = by_name[chosen.name], location
        self._image = pick_image(self.api.images(chosen.name), chosen.name, self.config.image)
        return ChosenOffer(
            instance_type=chosen.name,
            region=location,
            price_on_demand=chosen.on_demand_price,
            price_spot=chosen.spot_price,
            spot_available=chosen.name in spot.get(location, frozenset()),
        )

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

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: EventSink) -> None:
        """The SSH key the deploy call requires: the user's own, or a throwaway one."""
        if self.config.ssh_key_ids:
            self._key_ids = list(self.config.ssh_key_ids)
            return
        name = resource_name(spec.pool_id, labels.expires)
        self._key_id = self.api.create_ssh_key(name, throwaway_public_key(name))
        self._key_ids = [self._key_id]

    # -- the verbs ------------------------------------------------------------------------

    def instance_name(self, spec: PoolSpec, node: int) -> str:
        return hostname(spec.pool_id, node)

    def run_dir(self, spec: PoolSpec, node: int) -> str:
        return run_dir(spec.pool_id)

    def finish_script(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        return with_host_firewall(request.script, labels.ports, labels.client_cidr)

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        """A startup script for the node, then the instance that runs it."""
        kind = self._type
        assert kind is not None, "prepare() first"
        with self._lock:
            script_id = self._scripts.get((request.node, request.script))  # a retry reuses its script
        if script_id is None:
            name = resource_name(spec.pool_id, labels.expires, request.node)
            script_id = self.api.create_script(name, request.script)
            with self._lock:
                self._scripts[(request.node, request.script)] = script_id
        body = {
            "instance_type": kind.name,
            "image": self._image,
            "ssh_key_ids": list(self._key_ids),
            "startup_script_id": script_id,
            "hostname": request.name,
            "description": description(spec.pool_id, labels.expires),
            "location_code": self._location,
            "is_spot": request.market is Market.SPOT,
        }
        return self.api.deploy(body)

    def is_capacity_refusal(self, error: Exception) -> bool:
        return isinstance(error, VerdaAPIError) and is_capacity_refusal(error)

    def explain_create_failure(self, error: Exception, market: Market, created: int, total: int) -> Exception:
        if not (isinstance(error, VerdaAPIError) and is_capacity_refusal(error)) or self._type is None:
            return super().explain_create_failure(error, market, created, total)
        undone = f" ({created} instance(s) had been deployed; they were deleted)" if created else ""
        tips = ["Verda(region=None) to use any location with capacity"] if self.config.region else []
        tips += ["spot='if-available'"] if market is Market.SPOT else ["spot='if-available' or 'always'"]
        tips += ["another accelerator or size", "fewer nodes", "again later"]
        return CapacityError(
            f"Verda has no {market.value} capacity for {self._type.name} in {self._location}: {error.api_message}"
            f"{undone}. Try {', '.join(tips)}"
        )

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        """One listing; an instance not (yet) in it is asked for by id."""
        listed = {str(i.get("id")): i for i in self.api.instances()}
        found: dict[str, Instance] = {}
        for instance_id in instance_ids:
            instance = listed.get(instance_id) or self.api.instance(instance_id)
            if instance is None:
                continue
            status = str(instance.get("status", ""))
            ip = instance.get("ip")
            found[instance_id] = Instance(
                instance_id, _state(status), ip=str(ip) if ip else None, private_ip=None, status=status
            )
        return found

    def delete(self, instance_ids: Sequence[str]) -> None:
        """Delete the instances with their OS volumes (in one call, the failures of a
        partial answer asked again), and the OS volumes of spot instances Verda
        discontinued (skyward_verda.teardown); what is still there is raised, by id."""
        found = [self.api.instance(i) for i in instance_ids]
        doomed = [Doomed.of(raw) for raw in found if raw is not None]
        failures = delete_instances(self.api, doomed, sleep=self._sleep, backoff=self.config.api_backoff)
        if failures:
            raise ProvisioningError("Verda did not delete everything: " + "; ".join(failures))

    def listed(self) -> list[str]:
        found = []
        for instance in self.api.instances():
            mark = parse_description(str(instance.get("description", "")))
            if mark is not None and mark.pool_id == self._pool_id and str(instance.get("status")) not in _GOING:
                found.append(str(instance["id"]))
        return found

    def delete_infrastructure(self) -> list[str]:
        """The startup scripts and the throwaway key."""
        if self._api is None:
            return []
        failures: list[str] = []
        for key, script_id in list(self._scripts.items()):
            try:
                self.api.delete_script(script_id)
                del self._scripts[key]
            except VerdaAPIError as exc:
                failures.append(f"startup script {script_id}: {exc}")
        if self._key_id is not None:
            try:
                self.api.delete_ssh_key(self._key_id)
                self._key_id = None
            except VerdaAPIError as exc:
                failures.append(f"SSH key {self._key_id}: {exc}")
        return failures


def _state(status: str) -> InstanceState:
    if status in _GOING:
        return InstanceState.GONE
    if status in DEAD:
        return InstanceState.STOPPED
    return InstanceState.RUNNING if status == "running" else InstanceState.PENDING
