"""The DigitalOcean provider driver: DigitalOcean's verbs on the core's cloud template.

The template (``skyward.providers.cloud.CloudProvider``) does the orchestration; this
supplies: reaping earlier pools' droplets, the smallest size that fits (``choose_offer``),
the pool's shared pieces (its tag, a cloud firewall admitting the node ports from the
client's address only and everything between the pool's own droplets, a throwaway SSH
key), creating one droplet, describing droplets by the pool's tag, deleting them (a
powered-off droplet still bills), and for ``Image(bake=True)`` a droplet snapshot to
start later pools from (skyward_digitalocean.baking, the flow skyward.providers.baking.Bakery).
DigitalOcean has no spot market and mounts no volumes: the pool's common rules handle
``spot=`` and ``volume=``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from skyward.errors import CapacityError, ConfigurationError, NoOfferError, ProvisioningError, QuotaError
from skyward.providers import (
    BakedImage,
    Bakery,
    BootstrapContext,
    EventSink,
    Market,
    NodeHandle,
    NodePlan,
    NoMatchingInstanceError,
    PoolSpec,
)
from skyward.providers.cloud import (
    ChosenOffer,
    CloudProvider,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
    cloud_bootstrap_context,
)
from skyward.providers.cloud.removal import sweep_messages, sweep_with_notices
from skyward.providers.cloud.retry import Backoff
from skyward.providers.cloud.sizing import node_request
from skyward.providers.cloud.sshkey import throwaway_public_key
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError, make_client
from skyward_digitalocean.baking import DropletSnapshots
from skyward_digitalocean.config import DigitalOcean, token_from_env
from skyward_digitalocean.firewall import firewall_body, firewall_problems
from skyward_digitalocean.naming import (
    COMMON_TAG,
    droplet_name,
    pool_tag,
    resource_name,
    run_dir,
)
from skyward_digitalocean.offers import DropletSize, capacity_hint, image_for, parse_sizes
from skyward_digitalocean.reaper import reap_with

PROVIDER = "digitalocean"
USER_DATA_LIMIT = 64 * 1024  # bytes; DigitalOcean refuses larger user-data
_CAPACITY_WORDS = ("capacity", "unavailable", "not available", "sold out", "out of stock")


def explain_create_error(
    exc: DigitalOceanAPIError, size: DropletSize, region: str, created: int, total: int
) -> Exception:
    """A create refusal in words that say what to try."""
    message = exc.api_message.lower()
    undone = f" ({created} of {total} droplets had been created; they were deleted)" if created else ""
    if exc.status == 422 and "limit" in message:
        return QuotaError(
            f"DigitalOcean refused droplet {size.slug}: {exc.api_message}{undone}. Your account's droplet "
            "(or GPU) limit is reached: delete droplets you no longer need, ask DigitalOcean to raise the limit, "
            "or use fewer nodes"
        )
    if exc.status in (422, 503) and any(word in message for word in _CAPACITY_WORDS):
        # Where else to try comes from the size's own ``regions`` (GET /v2/sizes): DO's
        # documented error body (OpenAPI shared/models/error.yml) is id, message and
        # request_id only, with no list of regions that have capacity.
        hint = capacity_hint(size, region, size.regions)
        return CapacityError(
            f"DigitalOcean has no capacity for {size.slug} in {region} right now: {exc.api_message}{undone}; {hint}"
        )
    if undone:
        return ProvisioningError(f"{exc}{undone}")
    return exc


class DigitalOceanDriver(CloudProvider[DigitalOcean]):
    name = PROVIDER
    instance_noun = "droplet"
    running_word = "active"

    def fuse_unavailable(self, spec: PoolSpec) -> str | None:
        return None  # FuseMounts: a virtual machine, root, and /dev/fuse (the bootstrap installs rclone)

    def __init__(
        self,
        config: DigitalOcean,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, clock=clock, sleep=sleep)
        self._api: DigitalOceanAPI | None = None
        self._size: DropletSize | None = None
        self._tag: str | None = None
        self._firewall_id: str | None = None
        self._key_id: int | None = None
        self.reaped: Any = None
        self._bakery = Bakery()  # Image(bake=True): the snapshot this pool starts from, the one it bakes
        self._snapshots: DropletSnapshots | None = None

    def validate(self, spec: PoolSpec) -> None:
        token_from_env()

    @property
    def api(self) -> DigitalOceanAPI:
        if self._api is None:
            self._api = DigitalOceanAPI(
                make_client(self.config, token_from_env()),
                Backoff(attempts=self.config.api_retries, base=self.config.api_backoff),
                sleep=self._sleep,
            )
        return self._api

    # -- prepare ------------------------------------------------------------------------

    def reap(self, spec: PoolSpec, emit: EventSink) -> None:
        def sweep() -> list[str]:
            self.reaped = None
            self.reaped = reaped = reap_with(self.api, now=self._clock(), own_pool=spec.pool_id)
            return sweep_messages(reaped.droplets, reaped.failures, "droplet")

        sweep_with_notices(sweep, emit, DigitalOceanAPIError, "droplets")

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        self._size = size = self.choose_size(spec)
        if spec.image.bake:
            self._snapshots = DropletSnapshots(
                self.api, self.config.region, size.disk_gb, emit,
                poll_interval=self.config.poll_interval, clock=self._clock, sleep=self._sleep,
            )  # fmt: skip
            base = image_for(size, self.config.image)
            self._bakery.choose(self._snapshots, spec.image, cloud_bootstrap_context(), base, emit)
        return ChosenOffer(
            instance_type=size.slug, region=self.config.region, price_on_demand=size.instance.on_demand_price
        )

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: EventSink) -> None:
        self._tag = pool_tag(spec.pool_id, labels.expires)
        name = resource_name(spec.pool_id, labels.expires)
        self.api.create_tag(self._tag)  # the firewall names it; "skyward" itself comes with the first droplet
        firewall = self.api.create_firewall(self.firewall_body(name, self._tag, labels.client_cidr, labels.ports))
        self._firewall_id = str(firewall["id"])
        key = self.api.create_ssh_key(name, throwaway_public_key(name))
        self._key_id = int(key["id"])

    def firewall_body(self, name: str, tag: str, client_cidr: str, ports: tuple[int, int]) -> dict[str, Any]:
        """The pool's firewall (skyward_digitalocean.firewall), checked against DO's
        documented rules before it is sent: a body the API would refuse fails here, saying why."""
        body = firewall_body(name, tag, client_cidr, ports)
        problems = firewall_problems(body)
        if problems:
            raise ProvisioningError(f"the firewall {name} breaks DigitalOcean's rules: {'; '.join(problems)}")
        return body

    def choose_size(self, spec: PoolSpec) -> DropletSize:
        """The smallest size that fits the request, if the configured region offers it.

        The size is chosen from everything DigitalOcean sells, then checked against the
        region: when the region lacks the smallest fitting size, the pool fails and says
        where it is offered, rather than quietly renting a bigger (dearer) one."""
        request = node_request(spec)
        sizes = parse_sizes(self.api.sizes(), self.config.region)
        offered = sorted({r for s in sizes for r in s.regions})
        if offered and self.config.region not in offered:
            raise ConfigurationError(
                f"DigitalOcean(region={self.config.region!r}): DigitalOcean offers no droplet size there; "
                f"its sizes are offered in: {', '.join(offered)}"
            )
        by_slug = {s.slug: s for s in sizes}
        anywhere = [replace(s.instance, available=bool(s.regions)) for s in sizes]
        chosen = by_slug[request.select(anywhere).name]
        if chosen.instance.available:
            return chosen
        try:
            here = by_slug[request.select([s.instance for s in sizes]).name]
        except NoMatchingInstanceError:
            here = None
        regions = list(chosen.regions)
        bigger = (
            f"; {self.config.region} has {here.slug} (${here.instance.on_demand_price:g}/h): "
            f"ask for it with machine={here.slug!r}"
            if here is not None
            else ""
        )
        raise NoOfferError(
            f"{chosen.slug}, the smallest size that fits, is not offered in {self.config.region}; it is offered in: "
            f"{', '.join(regions)}. Use DigitalOcean(region=...){bigger}"
        )

    # -- the verbs ------------------------------------------------------------------------

    def instance_name(self, spec: PoolSpec, node: int) -> str:
        return droplet_name(spec.pool_id, node)

    def run_dir(self, spec: PoolSpec, node: int) -> str:
        return run_dir(spec.pool_id)

    def bootstrap_context(self, spec: PoolSpec, market: Market, run_dir: str, node: int) -> BootstrapContext:
        context = super().bootstrap_context(spec, market, run_dir, node)
        return replace(context, baked=self._bakery.starts_baked)

    def bake(self, spec: PoolSpec, handle: NodeHandle, emit: EventSink) -> BakedImage | None:
        """The Bakes ability: a snapshot of ``handle``'s droplet (skyward.providers.baking.Bakery)."""
        if self._snapshots is None:
            return None
        return self._bakery.bake(self._snapshots, spec, handle, emit)

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """The template's, once a snapshot being taken of a node is done (DigitalOcean
        refuses to delete a droplet with a pending event)."""
        if self._snapshots is not None:
            self._snapshots.wait()
        super().terminate(nodes)

    def finish_script(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        size = len(request.script.encode())
        if size > USER_DATA_LIMIT:
            raise ProvisioningError(
                f"node {request.node}'s bootstrap script is {size} bytes; DigitalOcean accepts at most "
                f"{USER_DATA_LIMIT} bytes of user-data (fewer Image(pip=/apt=/env=) entries make it shorter)"
            )
        return request.script

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        assert self._size is not None and self._tag is not None, "prepare() first"
        droplet = self.api.create_droplet(self.droplet_body(request.name, self._size, self._tag, request.script))
        return str(droplet["id"])

    def explain_create_failure(self, error: Exception, market: Market, created: int, total: int) -> Exception:
        if isinstance(error, DigitalOceanAPIError) and self._size is not None:
            return explain_create_error(error, self._size, self.config.region, created, total)
        return super().explain_create_failure(error, market, created, total)

    def droplet_body(self, name: str, size: DropletSize, tag: str, script: str) -> dict[str, Any]:
        """The create body; ``image`` is the baked snapshot's id (an integer) when the
        pool starts from one, else the stock image's slug."""
        chosen = self._bakery.chosen
        return {
            "name": name,
            "region": self.config.region,
            "size": size.slug,
            "image": int(chosen.id)
            if (chosen := self._bakery.chosen) is not None
            else image_for(size, self.config.image),
            "ssh_keys": [self._key_id] if self._key_id is not None else [],
            "tags": [COMMON_TAG, tag],
            "user_data": script,
            "ipv6": False,
            "monitoring": False,
            "backups": False,
        }

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        """One listing by the pool's tag; a droplet not (yet) in it is asked for by id."""
        listed = {str(d["id"]): d for d in self.api.droplets_tagged(self._tag)} if self._tag else {}
        found: dict[str, Instance] = {}
        for droplet_id in instance_ids:
            droplet = listed.get(droplet_id) or self.api.droplet(int(droplet_id))
            if droplet is None:
                continue
            status = str(droplet.get("status"))
            public, private = _addresses(droplet)
            state = _STATES.get(status, InstanceState.PENDING)
            found[droplet_id] = Instance(droplet_id, state, ip=public, private_ip=private, status=status)
        return found

    def delete(self, instance_ids: Sequence[str]) -> None:
        failures = []
        for droplet_id in instance_ids:
            try:
                self.api.delete_droplet(int(droplet_id))
            except DigitalOceanAPIError as exc:
                failures.append(f"{droplet_id}: {exc}")
        if failures:
            raise ProvisioningError("; ".join(failures))

    def listed(self) -> list[str]:
        return [str(d["id"]) for d in self.api.droplets_tagged(self._tag)] if self._tag else []

    def cleanup_hint(self, instance_ids: Sequence[str]) -> str:
        return f"Delete them with: doctl compute droplet delete --tag-name {self._tag}"

    def delete_infrastructure(self) -> list[str]:
        """The firewall, the SSH key and the tag."""
        if self._api is None:
            return []
        failures: list[str] = []
        steps: list[tuple[str, Callable[[], None]]] = []
        if self._firewall_id is not None:
            firewall_id = self._firewall_id
            steps.append((f"firewall {firewall_id}", lambda: self.api.delete_firewall(firewall_id)))
        if self._key_id is not None:
            key_id = self._key_id
            steps.append((f"SSH key {key_id}", lambda: self.api.delete_ssh_key(key_id)))
        if self._tag is not None:
            tag = self._tag
            steps.append((f"tag {tag}", lambda: self.api.delete_tag(tag)))
        for what, step in steps:
            try:
                step()
            except DigitalOceanAPIError as exc:
                failures.append(f"{what}: {exc}")
        self._firewall_id = self._key_id = None
        return failures


_STATES = {
    "new": InstanceState.PENDING,
    "active": InstanceState.RUNNING,
    "off": InstanceState.STOPPED,
    "archive": InstanceState.STOPPED,
}


def _addresses(droplet: dict[str, Any]) -> tuple[str | None, str | None]:
    public = private = None
    for network in (droplet.get("networks") or {}).get("v4") or ():
        kind, address = network.get("type"), network.get("ip_address")
        if kind == "public" and public is None:
            public = str(address)
        elif kind == "private" and private is None:
            private = str(address)
    return public, private
