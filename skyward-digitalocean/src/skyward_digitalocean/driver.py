"""The DigitalOcean provider driver: droplets in, droplets out.

``prepare`` reaps what earlier pools left behind, picks the smallest size that fits,
finds the client's address and makes the pool's shared pieces: its tag, a cloud firewall
(agent port from the client's address only, everything between the pool's own droplets,
all outbound) and a throwaway SSH key. ``launch`` creates one droplet per node with that
node's user-data and tags, and waits until each is active with a public address.
``terminate`` deletes the droplets (a powered-off droplet still bills) and ``teardown``
sweeps by tag and removes the firewall, key and tag.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from skyward.agent.config import node_ports
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.addresses import client_address, firewall_source
from skyward.providers.cloud.bootstrap import cloud_bootstrap_context
from skyward.providers.cloud.naming import expiry
from skyward.providers.cloud.retry import Backoff
from skyward.providers.cloud.sizing import node_request
from skyward.providers.protocol import EventSink, NodeHandle, UserDataFactory
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError, make_client
from skyward_digitalocean.config import REGIONS, DigitalOcean, token_from_env
from skyward_digitalocean.naming import (
    COMMON_TAG,
    droplet_name,
    pool_tag,
    resource_name,
    run_dir,
)
from skyward_digitalocean.offers import DropletSize, capacity_hint, image_for, parse_sizes
from skyward_digitalocean.sshkey import throwaway_public_key

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
        return ProvisioningError(
            f"DigitalOcean refused droplet {size.slug}: {exc.api_message}{undone}. Your account's droplet "
            "(or GPU) limit is reached: delete droplets you no longer need, ask DigitalOcean to raise the limit, "
            "or use fewer nodes"
        )
    if exc.status in (422, 503) and any(word in message for word in _CAPACITY_WORDS):
        attributes = exc.body.get("error_attributes") or {}
        offered = (attributes.get("available_regions") or []) if isinstance(attributes, dict) else []
        known = [r for r in offered if r in REGIONS and r != region]
        hint = (
            f"try DigitalOcean(region=...) one of {', '.join(known)}, another size or accelerator, fewer nodes, "
            "or again later"
            if known
            else capacity_hint(size, region, REGIONS)
        )
        return ProvisioningError(
            f"DigitalOcean has no capacity for {size.slug} in {region} right now: {exc.api_message}{undone}; {hint}"
        )
    if undone:
        return ProvisioningError(f"{exc}{undone}")
    return exc


class DigitalOceanDriver:
    name = PROVIDER

    def __init__(
        self,
        config: DigitalOcean,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._clock = clock
        self._sleep = sleep
        self._api: DigitalOceanAPI | None = None
        self._size: DropletSize | None = None
        self._tag: str | None = None
        self._firewall_id: str | None = None
        self._key_id: int | None = None
        self._droplets: dict[int, str] = {}  # id -> name, everything this driver created
        self._deleted: set[int] = set()
        self._creating = False  # a create was sent: teardown must sweep for lost answers
        self.reaped: Any = None

    # -- construction-time checks -------------------------------------------------------

    def validate(self, spec: Any) -> None:
        # no spot market, no volumes: the pool's common rules (skyward.providers.rules)
        token_from_env()

    # -- prepare ------------------------------------------------------------------------

    @property
    def api(self) -> DigitalOceanAPI:
        if self._api is None:
            self._api = DigitalOceanAPI(
                make_client(self.config, token_from_env()),
                Backoff(attempts=self.config.api_retries, base=self.config.api_backoff),
                sleep=self._sleep,
            )
        return self._api

    def prepare(self, spec: Any, emit: EventSink) -> str:
        from skyward.events import Notice
        from skyward.providers.settings import NODE_TTL_MARGIN

        config = self.config
        if config.reap:
            from skyward_digitalocean.reaper import reap_with

            try:
                self.reaped = reap_with(self.api, now=self._clock(), own_pool=spec.pool_id)
            except DigitalOceanAPIError as exc:  # a safety net, not a precondition of this pool
                emit(Notice(message=f"could not look for droplets earlier pools left behind: {exc}"))
                self.reaped = None
        if self.reaped is not None:
            for droplet_id, name, reason in self.reaped.droplets:
                emit(Notice(message=f"deleted droplet {name} ({droplet_id}) left by an earlier pool: {reason}"))
            for failure in self.reaped.failures:
                emit(Notice(message=f"could not delete a leftover of an earlier pool: {failure}"))
        self._size = self.choose_size(spec)
        address = client_address(config.client_address, config.address_url, config.api_timeout, "DigitalOcean")
        expires = expiry(self._clock(), spec.timeout, config.bootstrap_timeout, NODE_TTL_MARGIN)
        self._tag = pool_tag(spec.pool_id, expires)
        name = resource_name(spec.pool_id, expires)
        self.api.create_tag(self._tag)  # the firewall names it; "skyward" itself comes with the first droplet
        ports = node_ports(config.agent_port, spec.workers_per_node)
        firewall = self.api.create_firewall(self.firewall_body(name, self._tag, firewall_source(address), ports))
        self._firewall_id = str(firewall["id"])
        key = self.api.create_ssh_key(name, throwaway_public_key(name))
        self._key_id = int(key["id"])
        return config.region

    def firewall_body(self, name: str, tag: str, client_cidr: str, ports: tuple[int, int]) -> dict[str, Any]:
        """Inbound: the node's ports (agent, then one per worker) from the client only, and anything between the pool's
        own droplets (distributed training picks its ports at run time). Outbound: all
        (apt, pip, uv); DO drops outbound traffic a firewall does not allow."""
        everywhere = {"addresses": ["0.0.0.0/0", "::/0"]}
        return {
            "name": name,
            "inbound_rules": [
                {"protocol": "tcp", "ports": "{}-{}".format(*ports), "sources": {"addresses": [client_cidr]}},
                {"protocol": "tcp", "ports": "0", "sources": {"tags": [tag]}},
                {"protocol": "udp", "ports": "0", "sources": {"tags": [tag]}},
                {"protocol": "icmp", "sources": {"tags": [tag]}},
            ],
            "outbound_rules": [
                {"protocol": "tcp", "ports": "0", "destinations": everywhere},
                {"protocol": "udp", "ports": "0", "destinations": everywhere},
                {"protocol": "icmp", "destinations": everywhere},
            ],
            "tags": [tag],
        }

    def choose_size(self, spec: Any) -> DropletSize:
        """The smallest size that fits the request, if the configured region offers it.

        The size is chosen from everything DigitalOcean sells, then checked against the
        region: when the region lacks the smallest fitting size, the pool fails and says
        where it is offered, rather than quietly renting a bigger (dearer) one."""
        from dataclasses import replace

        from skyward.instances import NoMatchingInstanceError, select_instance

        request = node_request(spec)
        sizes = parse_sizes(self.api.sizes(), self.config.region)
        by_slug = {s.slug: s for s in sizes}
        anywhere = [replace(s.instance, available=bool(s.regions)) for s in sizes]
        chosen = by_slug[select_instance(anywhere, **request).name]
        if chosen.instance.available:
            return chosen
        try:
            here = by_slug[select_instance([s.instance for s in sizes], **request).name]
        except NoMatchingInstanceError:
            here = None
        regions = [r for r in chosen.regions if r in REGIONS] or list(chosen.regions)
        bigger = (
            f"; {self.config.region} has {here.slug} (${here.instance.on_demand_price:g}/h): "
            f"ask for it with machine={here.slug!r}"
            if here is not None
            else ""
        )
        raise ConfigurationError(
            f"{chosen.slug}, the smallest size that fits, is not offered in {self.config.region}; it is offered in: "
            f"{', '.join(regions)}. Use DigitalOcean(region=...){bigger}"
        )

    # -- launch -------------------------------------------------------------------------

    def launch(self, spec: Any, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        from skyward.events import InstanceLaunching

        size, tag = self._size, self._tag
        assert size is not None and tag is not None, "prepare() first"
        emit(InstanceLaunching(count=spec.nodes, instance_type=size.slug, provider=PROVIDER))
        context = cloud_bootstrap_context()
        bind = f"tcp://0.0.0.0:{self.config.agent_port}"
        scripts: list[tuple[str, str]] = []
        for node in range(spec.nodes):
            name = droplet_name(spec.pool_id, node)
            script = user_data(node, bind, context, run_dir=run_dir(spec.pool_id), instance_id=name)
            if len(script.encode()) > USER_DATA_LIMIT:
                raise ProvisioningError(
                    f"node {node}'s bootstrap script is {len(script.encode())} bytes; DigitalOcean accepts at most "
                    f"{USER_DATA_LIMIT} bytes of user-data (fewer Image(pip=/apt=/env=) entries make it shorter)"
                )
            scripts.append((name, script))
        try:
            for name, script in scripts:
                self._creating = True
                try:
                    droplet = self.api.create_droplet(self.droplet_body(name, size, tag, script))
                except DigitalOceanAPIError as exc:
                    raise explain_create_error(exc, size, self.config.region, len(self._droplets), spec.nodes) from exc
                self._droplets[int(droplet["id"])] = name
            return self._wait_active(spec, size, emit)
        except BaseException:
            self._delete_created()
            raise

    def droplet_body(self, name: str, size: DropletSize, tag: str, script: str) -> dict[str, Any]:
        return {
            "name": name,
            "region": self.config.region,
            "size": size.slug,
            "image": image_for(size, self.config.image),
            "ssh_keys": [self._key_id] if self._key_id is not None else [],
            "tags": [COMMON_TAG, tag],
            "user_data": script,
            "ipv6": False,
            "monitoring": False,
            "backups": False,
        }

    def _wait_active(self, spec: Any, size: DropletSize, emit: EventSink) -> list[NodeHandle]:
        from skyward.events import BootstrapStarting, InstanceProvisioned

        ids = list(self._droplets)
        node_of = {droplet_id: index for index, droplet_id in enumerate(ids)}
        handles: dict[int, NodeHandle] = {}
        deadline = self._clock() + self.config.provision_timeout
        assert self._tag is not None
        while len(handles) < len(ids):
            listed = {int(d["id"]): d for d in self.api.droplets_tagged(self._tag)}
            for droplet_id in ids:
                if droplet_id in handles:
                    continue
                droplet = listed.get(droplet_id) or self.api.droplet(droplet_id)
                name = self._droplets[droplet_id]
                if droplet is None:
                    raise ProvisioningError(f"droplet {name} ({droplet_id}) disappeared while it was starting")
                status = str(droplet.get("status"))
                if status in ("off", "archive"):
                    raise ProvisioningError(f"droplet {name} ({droplet_id}) is {status!r} instead of starting")
                public, private = _addresses(droplet)
                if status != "active" or public is None:
                    continue
                node = node_of[droplet_id]
                handles[droplet_id] = NodeHandle(
                    node=node,
                    instance_id=str(droplet_id),
                    endpoint=f"tcp://{public}:{self.config.agent_port}",
                    instance_type=size.slug,
                    spot=False,
                    ip=public,
                    private_ip=private or public,
                    price_on_demand=size.instance.on_demand_price,
                    price_spot=None,
                    extra=(("name", name), ("region", self.config.region)),
                )
                emit(
                    InstanceProvisioned(
                        instance_id=str(droplet_id), node=node, spot=False, provider=PROVIDER, ip=public,
                        instance_type=size.slug, price_on_demand=size.instance.on_demand_price, price_spot=None,
                    )
                )  # fmt: skip
                emit(BootstrapStarting(instance_id=str(droplet_id)))
            if len(handles) == len(ids):
                break
            if self._clock() > deadline:
                waiting = [self._droplets[i] for i in ids if i not in handles]
                raise ProvisioningError(
                    f"droplets {', '.join(waiting)} were not active within provision_timeout="
                    f"{self.config.provision_timeout:g} s; raise DigitalOcean(provision_timeout=...) or try another "
                    "region"
                )
            self._sleep(self.config.poll_interval)
        return sorted(handles.values(), key=lambda h: h.node)

    # -- the end ------------------------------------------------------------------------

    def _delete_created(self) -> list[str]:
        """Delete every droplet this driver created; returns what could not be deleted."""
        failures = []
        for droplet_id, name in list(self._droplets.items()):
            if droplet_id in self._deleted:
                continue
            try:
                self.api.delete_droplet(droplet_id)
            except DigitalOceanAPIError as exc:
                failures.append(f"{name} ({droplet_id}): {exc}")
                continue
            self._deleted.add(droplet_id)
        return failures

    def terminate(self, nodes: Sequence[NodeHandle]) -> None:
        """Delete (not power off) every droplet of the pool."""
        if self._api is None:
            return
        for node in nodes:
            if node.instance_id.isdigit():
                self._droplets.setdefault(int(node.instance_id), node.instance_id)
        failures = self._delete_created()
        if failures:
            raise ProvisioningError(
                "could not delete these droplets, which bill until deleted: "
                + "; ".join(failures)
                + f". Delete them with: doctl compute droplet delete --tag-name {self._tag}"
            )

    def teardown(self) -> None:
        """Sweep droplets by the pool's tag (a create whose response was lost may have
        made one), then remove the firewall, the SSH key and the tag."""
        if self._api is None:
            return
        failures: list[str] = []
        if self._tag is not None and self._creating:
            try:
                for droplet in self.api.droplets_tagged(self._tag):
                    droplet_id = int(droplet["id"])
                    self._droplets.setdefault(droplet_id, str(droplet.get("name", droplet_id)))
                    self._deleted.discard(droplet_id)  # still listed: delete it (again)
                failures += self._delete_created()
            except DigitalOceanAPIError as exc:
                failures.append(f"listing droplets tagged {self._tag}: {exc}")
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
        if failures:
            raise ProvisioningError("DigitalOcean teardown left things behind: " + "; ".join(failures))


def _addresses(droplet: dict[str, Any]) -> tuple[str | None, str | None]:
    public = private = None
    for network in (droplet.get("networks") or {}).get("v4") or ():
        kind, address = network.get("type"), network.get("ip_address")
        if kind == "public" and public is None:
            public = str(address)
        elif kind == "private" and private is None:
            private = str(address)
    return public, private
