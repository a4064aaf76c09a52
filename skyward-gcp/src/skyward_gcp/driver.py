"""The Google Cloud provider driver: Compute Engine's and Cloud TPU's verbs on the core's
cloud template.

The template (``skyward.providers.cloud.SpotCloudProvider``) does the orchestration; this
supplies: reaping earlier pools' nodes, the smallest VM shape (or TPU slice) that fits
from the shipped catalog (``choose_offer``), the zones of the region that offer it (asked
of the API), the pool's two firewall rules (``create_infrastructure``), creating one VM
with its startup script, describing and deleting them. Instance ids are
``<zone>/<name>``: every Compute Engine call names the zone.

Zones: with ``GCP(zone=None)`` the pool tries the region's zones that offer the machine,
in turn; a stockout (``ZONE_RESOURCE_POOL_EXHAUSTED``) in one moves the whole pool to the
next (its nodes stay in one zone: traffic between zones is slower and billed). A quota
refusal does not move it: GPU quotas are per region.

TPU slices go through :mod:`skyward_gcp.tpu` (one TPU node per pool, its hosts the pool's nodes).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from skyward.errors import CapacityError, NoOfferError, ProvisioningError, QuotaError
from skyward.providers import (
    EventSink,
    Market,
    NodeHandle,
    NodePlan,
    NoMatchingInstanceError,
    Notice,
    PoolSpec,
    UserDataFactory,
)
from skyward.providers.cloud import (
    ChosenOffer,
    Instance,
    InstanceState,
    Labels,
    NodeRequest,
    SpotCloudProvider,
)
from skyward.providers.cloud.removal import sweep_messages, sweep_with_notices
from skyward.providers.cloud.sizing import node_request
from skyward_gcp.api import GcpAPI, GcpAPIError, unavailable
from skyward_gcp.catalog import TPU_PREFIX, Machine, TpuSlice, catalog, choose_slice
from skyward_gcp.config import GCP
from skyward_gcp.firewall import firewall_bodies, firewall_problems
from skyward_gcp.images import disk_for, image_for
from skyward_gcp.naming import (
    POOL_LABEL,
    firewall_name,
    instance_name,
    label_problems,
    network_tag,
    pool_filter,
    pool_labels,
    run_dir,
    tpu_name,
)
from skyward_gcp.reaper import reap_with
from skyward_gcp.tpu import host_id, host_instances, node_body, parse_host_id, slice_script

PROVIDER = "gcp"
STARTUP_SCRIPT_LIMIT = 256 * 1024  # bytes; Compute Engine's limit on one metadata value

STATES = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPED,  # preempted or shutting down: never back on its own
    "SUSPENDING": InstanceState.STOPPED,
    "SUSPENDED": InstanceState.STOPPED,
    "TERMINATED": InstanceState.STOPPED,
}
"""Compute Engine's instance statuses as the template cares. A spot VM that Google
preempts goes STOPPING -> TERMINATED (action STOP) or away (action DELETE); either way
the pool sees it stopped or gone and takes the interruption path."""


def split_id(instance_id: str) -> tuple[str, str]:
    zone, _, name = instance_id.partition("/")
    return zone, name


def vm_body(
    *,
    name: str,
    zone: str,
    machine: Machine,
    network: str,
    tag: str,
    labels: Mapping[str, str],
    script: str,
    image: str,
    spot: bool,
    termination_action: str,
) -> dict[str, Any]:
    """The insert body (Compute Engine REST ``instances.insert``). GPUs need
    ``onHostMaintenance: TERMINATE`` (a GPU VM cannot live-migrate); a SPOT VM needs
    ``instanceTerminationAction`` and no automatic restart."""
    has_gpu = machine.accelerator is not None
    scheduling: dict[str, Any] = {"on_host_maintenance": "TERMINATE" if has_gpu or spot else "MIGRATE"}
    if spot:
        scheduling |= {
            "provisioning_model": "SPOT",
            "instance_termination_action": termination_action,
            "automatic_restart": False,
        }
    else:
        scheduling |= {"provisioning_model": "STANDARD", "automatic_restart": True}
    body: dict[str, Any] = {
        "name": name,
        "machine_type": f"zones/{zone}/machineTypes/{machine.machine_type}",
        "labels": dict(labels),
        "tags": {"items": [tag]},
        "metadata": {"items": [{"key": "startup-script", "value": script}]},
        "disks": [
            {
                "boot": True,
                "auto_delete": True,
                "initialize_params": {"source_image": image, "disk_size_gb": disk_for(has_gpu)},
            }
        ],
        "network_interfaces": [
            {
                "network": f"global/networks/{network}",
                "access_configs": [{"name": "External NAT", "type_": "ONE_TO_ONE_NAT"}],
            }
        ],
        "scheduling": scheduling,
    }
    if machine.attached and machine.accelerator_type:
        body["guest_accelerators"] = [
            {
                "accelerator_type": f"zones/{zone}/acceleratorTypes/{machine.accelerator_type}",
                "accelerator_count": machine.accelerator_count,
            }
        ]
    return body


def _offers(offered: frozenset[str], machine: Machine) -> bool:
    """Whether a zone offering ``offered`` (machine and GPU type names) can start ``machine``."""
    if machine.machine_type not in offered:
        return False
    return not machine.attached or machine.accelerator_type is None or machine.accelerator_type in offered


def instance_of(zone: str, vm: Any) -> Instance:
    status = str(vm.status or "")
    public = private = None
    for interface in vm.network_interfaces or ():
        private = private or (str(interface.network_i_p) if interface.network_i_p else None)
        for access in interface.access_configs or ():
            if access.nat_i_p:
                public = public or str(access.nat_i_p)
    state = STATES.get(status, InstanceState.PENDING)
    return Instance(f"{zone}/{vm.name}", state, ip=public, private_ip=private, status=status)


class GCPDriver(SpotCloudProvider[GCP]):
    name = PROVIDER
    instance_noun = "VM"
    running_word = "RUNNING"

    def __init__(
        self,
        config: GCP,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, clock=clock, sleep=sleep)
        self._api: GcpAPI | None = None
        self._machine: Machine | None = None
        self._zones: list[str] = []
        self._zone_index = 0
        self._firewalls: list[str] = []
        self._tag: str | None = None
        self.reaped: Any = None
        self._slice: TpuSlice | None = None  # a TPU pool's slice; None: a VM pool
        self._host_scripts: dict[int, str] = {}  # a TPU pool's bootstraps, by host, until its node is created

    def fuse_unavailable(self, spec: PoolSpec) -> str | None:
        return None  # a VM, root, /dev/fuse: the bootstrap installs rclone

    @property
    def api(self) -> GcpAPI:
        if self._api is None:
            self._api = GcpAPI(self.config, sleep=self._sleep, clock=self._clock)
        return self._api

    @property
    def zone(self) -> str:
        """The zone the pool's nodes are created in now."""
        if not self._zones:
            raise ProvisioningError("prepare() first: no zone chosen yet")
        return self._zones[self._zone_index]

    def validate(self, spec: PoolSpec) -> None:
        """A TPU pool's size against its slice's hosts, then credentials and project found
        (a ConfigurationError saying how to provide them)."""
        self.tpu_slice(spec)
        self.api  # noqa: B018  # finds the credentials and the project, or says how to give them

    def tpu_slice(self, spec: PoolSpec) -> TpuSlice | None:
        """The TPU slice a TPU pool gets (its hosts are the pool's nodes), or None for a VM pool."""
        accelerator = spec.accelerator
        if accelerator is None or not accelerator.name.startswith(TPU_PREFIX):
            return None
        version = accelerator.name.removeprefix(TPU_PREFIX)
        return choose_slice(catalog().tpus, version, accelerator.count, spec.nodes, self.config.the_region)

    # -- prepare ------------------------------------------------------------------------

    def reap(self, spec: PoolSpec, emit: EventSink) -> None:
        def sweep() -> list[str]:
            self.reaped = None
            self.reaped = reaped = reap_with(self.api, self.config, now=self._clock(), own_pool=spec.pool_id)
            return sweep_messages(reaped.nodes, reaped.failures, "VM")

        sweep_with_notices(sweep, emit, GcpAPIError, "VMs")

    def choose_offer(self, spec: PoolSpec, plans: Sequence[NodePlan], emit: EventSink) -> ChosenOffer:
        self._slice = tpu = self.tpu_slice(spec)
        if tpu is not None:
            return self.choose_tpu_offer(tpu)
        machine, self._zones = self.choose_machine(spec)
        self._machine = machine
        self._zone_index = 0
        return ChosenOffer(
            instance_type=machine.name,
            region=self.config.the_region,
            price_on_demand=machine.on_demand,
            price_spot=machine.spot,
            spot_available=machine.spot is not None,
        )

    def choose_tpu_offer(self, tpu: TpuSlice) -> ChosenOffer:
        """The zones (``GCP(zone=...)``, or the region's) whose TPU API offers the slice; prices per host."""
        region = self.config.the_region
        zones = [self.config.zone] if self.config.zone is not None else self.api.zones(region)
        self._zones = [zone for zone in zones if tpu.name in self.api.tpu_types(zone)]
        self._zone_index = 0
        if not self._zones:
            where = f"zone {self.config.zone}" if self.config.zone else f"any zone of {region} ({', '.join(zones)})"
            raise NoOfferError(
                f"the Cloud TPU API offers {tpu.name} in no {where}; it is sold in: {', '.join(tpu.regions)}. "
                "Use GCP(region=...) or GCP(zone=...) there"
            )
        return ChosenOffer(
            instance_type=tpu.name,
            region=region,
            price_on_demand=tpu.on_demand / tpu.hosts,
            price_spot=None if tpu.spot is None else tpu.spot / tpu.hosts,
            spot_available=tpu.spot is not None,
        )

    def choose_machine(self, spec: PoolSpec) -> tuple[Machine, list[str]]:
        """The smallest VM shape of the catalog that fits and that the region's zones (or
        ``GCP(zone=...)``) offer, and the zones that offer it, in name order.

        What a zone offers is asked of the API (its machine types and GPU types: two list
        calls a zone), since the catalog cannot know it: A3 machines, for one, are in few
        zones of a region. A request nothing here fits fails naming the smallest shape
        that fits anywhere and the regions that offer it."""
        region = self.config.the_region
        request = node_request(spec)
        shapes = catalog().machines
        zones = [self.config.zone] if self.config.zone is not None else self.api.zones(region)
        offered = {zone: self.api.offered_in(zone) for zone in zones}
        here = [replace(m.instance(region), available=any(_offers(o, m) for o in offered.values())) for m in shapes]
        try:
            name = request.select(here).name
        except NoMatchingInstanceError as exc:
            where = f"zone {self.config.zone}" if self.config.zone else f"the zones of {region} ({', '.join(zones)})"
            anywhere = [replace(m.instance(region), available=True) for m in shapes]
            try:
                smallest = next(m for m in shapes if m.name == request.select(anywhere).name)
            except NoMatchingInstanceError:
                raise exc from None
            raise NoOfferError(
                f"Google Cloud offers no machine that fits ({request.describe()}) in {where}: the smallest that "
                f"fits, {smallest.name}, is offered in: {', '.join(smallest.regions)}. Use GCP(region=...) or "
                "GCP(zone=...) elsewhere"
            ) from None
        chosen = next(m for m in shapes if m.name == name)
        return chosen, [zone for zone in zones if _offers(offered[zone], chosen)]

    def create_infrastructure(self, spec: PoolSpec, offer: ChosenOffer, labels: Labels, emit: EventSink) -> None:
        self._tag = tag = network_tag(spec.pool_id)
        client, pool = (firewall_name(spec.pool_id, labels.expires, p) for p in ("client", "pool"))
        for body in firewall_bodies(client, pool, self.config.network, tag, labels.client_cidr, labels.ports):
            problems = firewall_problems(body)
            if problems:
                raise ProvisioningError(f"the firewall rule {body['name']} breaks Compute Engine's rules: {problems}")
            self.api.insert_firewall(body)
            self._firewalls.append(str(body["name"]))

    # -- the verbs ------------------------------------------------------------------------

    def instance_name(self, spec: PoolSpec, node: int) -> str:
        return instance_name(spec.pool_id, node, secrets.token_hex(2))

    def run_dir(self, spec: PoolSpec, node: int) -> str:
        return run_dir(spec.pool_id)

    def finish_script(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        size = len(request.script.encode())
        if size > STARTUP_SCRIPT_LIMIT:
            raise ProvisioningError(
                f"node {request.node}'s bootstrap script is {size} bytes; Compute Engine accepts at most "
                f"{STARTUP_SCRIPT_LIMIT} bytes in one metadata value "
                "(fewer Image(pip=/apt=/env=) entries make it shorter)"
            )
        return request.script

    def create(self, spec: PoolSpec, request: NodeRequest, labels: Labels) -> str:
        if self._slice is not None:
            return self.create_host(spec, request, labels, self._slice)
        machine, tag = self._machine, self._tag
        assert machine is not None and tag is not None, "prepare() first"
        zone = self.zone
        node_labels = pool_labels(labels.pool_id, labels.expires, request.node)
        problems = label_problems(node_labels)
        if problems:
            raise ProvisioningError(f"labels of {request.name} break Google's label rules: {'; '.join(problems)}")
        body = vm_body(
            name=request.name, zone=zone, machine=machine, network=self.config.network, tag=tag,
            labels=node_labels, script=request.script,
            image=image_for(machine.accelerator is not None, self.config.image),
            spot=request.market is Market.SPOT, termination_action=self.config.spot_termination,
        )  # fmt: skip
        try:
            self.api.insert_instance(zone, body)
        except GcpAPIError as exc:
            where = f"zone {zone}" + (" (spot)" if request.market is Market.SPOT else "")
            mapped = unavailable(exc, machine.name, where)
            if mapped is not None:
                raise mapped from exc
            raise
        return f"{zone}/{request.name}"

    def create_host(self, spec: PoolSpec, request: NodeRequest, labels: Labels, tpu: TpuSlice) -> str:
        """One host of the slice: its bootstrap is kept until every host's is there, and
        the call that completes the set creates the TPU node (one API call for the whole
        slice; the other calls return at once, and their hosts start with the node)."""
        zone, node_id, tag = self.zone, tpu_name(spec.pool_id), self._tag
        assert tag is not None, "prepare() first"
        with self._lock:
            self._host_scripts[request.node] = request.script
            complete = len(self._host_scripts) == tpu.hosts
            scripts = [self._host_scripts[i] for i in sorted(self._host_scripts)]
        if complete:
            script = slice_script(scripts)
            if len(script.encode()) > STARTUP_SCRIPT_LIMIT:
                raise ProvisioningError(
                    f"the startup script of TPU {tpu.name} ({tpu.hosts} hosts' bootstraps) is {len(script.encode())} "
                    f"bytes; the TPU API takes at most {STARTUP_SCRIPT_LIMIT} (fewer Image(pip=/apt=/env=) entries)"
                )
            body = node_body(
                accelerator_type=tpu.name, runtime=self.config.tpu_runtime or tpu.runtime, network=self.config.network,
                tag=tag, labels=pool_labels(labels.pool_id, labels.expires), script=script,
                spot=request.market is Market.SPOT,
            )  # fmt: skip
            try:
                self.api.create_tpu(zone, node_id, body)
            except GcpAPIError as exc:
                mapped = unavailable(exc, f"TPU {tpu.name}", f"zone {zone}")
                if mapped is not None:
                    raise mapped from exc
                raise
        return host_id(zone, node_id, request.node)

    def add_nodes(
        self, spec: PoolSpec, indices: Sequence[int], user_data: UserDataFactory, emit: EventSink
    ) -> list[NodeHandle]:
        """VM pools: the template's. A TPU slice cannot gain or replace one host: its hosts
        are made, and taken back, together."""
        if self._slice is not None:
            raise ProvisioningError(
                f"a TPU {self._slice.name} slice's hosts come and go together: a host cannot be added or replaced "
                "alone; start a new pool for a new slice"
            )
        return super().add_nodes(spec, indices, user_data, emit)

    def replaces_interrupted(self, spec: PoolSpec) -> bool:
        """Spot.Always replaces a preempted VM; never a TPU host (see add_nodes)."""
        return self._slice is None and super().replaces_interrupted(spec)

    def is_capacity_refusal(self, error: Exception) -> bool:
        return isinstance(error, CapacityError)

    def launch(self, spec: PoolSpec, user_data: UserDataFactory, emit: EventSink) -> list[NodeHandle]:
        """The template's launch in the current zone; on a stockout, the whole pool again in
        the next candidate zone (what the failed try created is deleted by then)."""
        while True:
            with self._lock:
                self._host_scripts = {}
            try:
                return super().launch(spec, user_data, emit)
            except CapacityError as exc:
                if self._zone_index + 1 >= len(self._zones):
                    raise
                failed = self.zone
                self._zone_index += 1
                emit(Notice(message=f"{failed}: {exc}; trying {self.zone}"))

    def describe(self, instance_ids: Sequence[str]) -> Mapping[str, Instance]:
        """One listing (by the pool's label) per zone involved; an instance not (yet) in it is
        asked for by name. A TPU pool: one read of each TPU node, for all its hosts."""
        if self._slice is not None:
            return self.describe_hosts(instance_ids, self._slice)
        by_zone: dict[str, list[str]] = {}
        for instance_id in instance_ids:
            zone, name = split_id(instance_id)
            by_zone.setdefault(zone, []).append(name)
        found: dict[str, Instance] = {}
        label = self.labels
        for zone, names in by_zone.items():
            listed = {str(vm.name): vm for vm in self.api.instances(zone, pool_filter(label.pool_id))} if label else {}
            for name in names:
                vm = listed.get(name) or self.api.instance(zone, name)
                if vm is not None:
                    found[f"{zone}/{name}"] = instance_of(zone, vm)
        return found

    def describe_hosts(self, instance_ids: Sequence[str], tpu: TpuSlice) -> Mapping[str, Instance]:
        found: dict[str, Instance] = {}
        for zone, node_id in sorted({parse_host_id(i)[:2] for i in instance_ids}):
            node = self.api.tpu(zone, node_id)
            if node is not None:
                found.update(host_instances(zone, node, tpu.hosts))
        return {i: found[i] for i in instance_ids if i in found and found[i].state is not InstanceState.GONE}

    def delete(self, instance_ids: Sequence[str]) -> None:
        if self._slice is not None:
            for zone, node_id in sorted({parse_host_id(i)[:2] for i in instance_ids}):
                self.api.delete_tpu(zone, node_id)
            return
        failures = self.api.delete_instances([split_id(i) for i in instance_ids])
        if failures:
            raise ProvisioningError("; ".join(failures))

    def listed(self) -> list[str]:
        label = self.labels
        if label is None:
            return []
        if self._slice is not None:
            hosts = self._slice.hosts
            return [
                host_id(zone, str(node.name).rsplit("/", 1)[-1], host)
                for zone in self._zones[: self._zone_index + 1]
                for node in self.api.tpus(zone)
                if dict(node.labels or {}).get(POOL_LABEL) == label.pool_id
                for host in range(hosts)
            ]
        return [
            f"{zone}/{vm.name}" for zone in self._zones[: self._zone_index + 1]
            for vm in self.api.instances(zone, pool_filter(label.pool_id))
        ]  # fmt: skip

    def cleanup_hint(self, instance_ids: Sequence[str]) -> str:
        names = " ".join(split_id(i)[1] for i in instance_ids)
        zone = split_id(instance_ids[0])[0] if instance_ids else self.config.zone or "ZONE"
        return f"Delete them with: gcloud compute instances delete --zone {zone} {names}"

    def delete_infrastructure(self) -> list[str]:
        """The pool's firewall rules."""
        if self._api is None:
            return []
        failures = []
        for name in list(self._firewalls):
            try:
                self.api.delete_firewall(name)
                self._firewalls.remove(name)
            except GcpAPIError as exc:
                failures.append(f"firewall rule {name}: {exc}")
        return failures


__all__ = ["PROVIDER", "GCPDriver", "QuotaError", "vm_body"]
