"""The fake Compute Engine API v1: instances, firewalls and their operations. Mixed into
:class:`fakes.gcp.FakeGCP`, whose docstring lists the rules enforced and their sources."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fakes.gcp_catalog import ACCELERATOR_TYPES, MACHINE_TYPES, ZONES, gcp_error, last_segment, not_found
from fakes.gcp_rules import attached_gpus, firewall_problem, instance_problem, labels_problem, metadata_value
from fakes.gcp_rules import open_to_everyone as _open
from fakes.http import Request, Response

COMPUTE = "https://www.googleapis.com/compute/v1"


def stamp(t: float | None = None) -> str:
    """RFC 3339 with the offset, as Compute writes its timestamps."""
    return datetime.fromtimestamp(time.time() if t is None else t, UTC).isoformat(timespec="milliseconds")


def fingerprint(value: Any) -> str:
    return base64.b64encode(hashlib.md5(json.dumps(value, sort_keys=True).encode()).digest()[:8]).decode()


@dataclass
class ComputeOperation:
    """A zone or global ``compute#operation`` (/compute/docs/reference/rest/v1/zoneOperations)."""

    id: int
    zone: str | None  # None: a global operation
    operation_type: str
    target_link: str
    target_id: str
    status: str = "RUNNING"  # PENDING -> RUNNING -> DONE
    inserted: float = field(default_factory=time.time)
    ended: float | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    http_status: int | None = None
    http_message: str | None = None

    @property
    def name(self) -> str:
        return f"operation-{int(self.inserted * 1000)}-{self.id:013x}-{self.id * 7919 % 0xFFFFFFFF:08x}"

    def finish(self, error: tuple[str, str, int, str] | None = None) -> None:
        """DONE; ``error``: (code, message, HTTP status, HTTP message)."""
        if error is not None:
            code, message, self.http_status, self.http_message = error
            self.errors = [{"code": code, "message": message}]
        self.status, self.ended = "DONE", time.time()

    def to_json(self, project: str) -> dict[str, Any]:
        scope = f"zones/{self.zone}" if self.zone else "global"
        body: dict[str, Any] = {
            "kind": "compute#operation", "id": str(self.id), "name": self.name, "operationType": self.operation_type,
            "targetLink": self.target_link, "targetId": self.target_id, "status": self.status,
            "user": "skyward@skyward-test.iam.gserviceaccount.com", "progress": 100 if self.status == "DONE" else 0,
            "insertTime": stamp(self.inserted), "startTime": stamp(self.inserted),
            "selfLink": f"{COMPUTE}/projects/{project}/{scope}/operations/{self.name}",
        }  # fmt: skip
        if self.zone:
            body["zone"] = f"{COMPUTE}/projects/{project}/zones/{self.zone}"
        if self.ended is not None:
            body["endTime"] = stamp(self.ended)
        if self.errors:
            body["error"] = {"errors": self.errors}
            body["httpErrorStatusCode"], body["httpErrorMessage"] = self.http_status, self.http_message
        return body


@dataclass
class FakeInstance:
    id: int
    name: str
    zone: str
    body: dict[str, Any]  # as inserted
    status: str = "PROVISIONING"  # -> STAGING -> RUNNING -> STOPPING -> TERMINATED
    nat_ip: str | None = None
    internal_ip: str | None = None
    created: float = field(default_factory=time.time)
    deleted: bool = False
    history: list[str] = field(default_factory=lambda: ["PROVISIONING"])

    @property
    def machine_type(self) -> str:
        return last_segment(self.body["machineType"])

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.body.setdefault("labels", {})
        return labels

    @property
    def spot(self) -> bool:
        scheduling = self.body.get("scheduling") or {}
        return scheduling.get("provisioningModel") == "SPOT" or scheduling.get("preemptible") is True

    @property
    def startup_script(self) -> str:
        return metadata_value(self.body.get("metadata"), "startup-script")

    def set_status(self, status: str) -> None:
        self.status = status
        self.history.append(status)

    def to_json(self, project: str) -> dict[str, Any]:
        base = f"{COMPUTE}/projects/{project}"
        nics = []
        for i, nic in enumerate(self.body["networkInterfaces"]):
            accesses = [
                {"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT", "name": a.get("name", "External NAT"),
                 "networkTier": a.get("networkTier", "PREMIUM"), **({"natIP": self.nat_ip} if self.nat_ip else {})}
                for a in nic.get("accessConfigs") or []
            ]  # fmt: skip
            nics.append({
                "kind": "compute#networkInterface", "name": f"nic{i}", "network": f"{base}/global/networks/default",
                "subnetwork": f"{base}/regions/{ZONES[self.zone].region}/subnetworks/default",
                **({"networkIP": self.internal_ip} if self.internal_ip else {}), "accessConfigs": accesses,
            })  # fmt: skip
        gpus = [
            {"acceleratorType": f"{base}/zones/{self.zone}/acceleratorTypes/{kind}", "acceleratorCount": count}
            for kind, count in attached_gpus(self.body, self.machine_type)
        ]
        metadata = dict(self.body.get("metadata") or {})
        boot = next(d for d in self.body["disks"] if d.get("boot"))
        return {
            "kind": "compute#instance", "id": str(self.id), "creationTimestamp": stamp(self.created),
            "name": self.name, "description": self.body.get("description", ""),
            "machineType": f"{base}/zones/{self.zone}/machineTypes/{self.machine_type}", "status": self.status,
            "zone": f"{base}/zones/{self.zone}", "networkInterfaces": nics,
            "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE", "boot": True,
                       "autoDelete": boot.get("autoDelete", True), "deviceName": "persistent-disk-0", "index": 0,
                       "source": f"{base}/zones/{self.zone}/disks/{self.name}"}],
            "metadata": {"kind": "compute#metadata", "fingerprint": fingerprint(metadata.get("items")),
                         "items": list(metadata.get("items") or [])},
            "tags": {"items": list((self.body.get("tags") or {}).get("items") or []),
                     "fingerprint": fingerprint(self.body.get("tags"))},
            "labels": dict(self.labels), "labelFingerprint": fingerprint(self.labels),
            "scheduling": {"onHostMaintenance": "MIGRATE", "automaticRestart": not self.spot,
                           "provisioningModel": "STANDARD", **(self.body.get("scheduling") or {})},
            "guestAccelerators": gpus, "serviceAccounts": list(self.body.get("serviceAccounts") or []),
            "cpuPlatform": "Intel Broadwell", "selfLink": f"{base}/zones/{self.zone}/instances/{self.name}",
        }  # fmt: skip


class ComputeHandlers:
    """``/compute/v1/projects/{project}/...``: instances, firewalls, operations."""

    lock: threading.RLock
    project: str
    operation_delay: float
    boot_delay: float
    instances: dict[int, FakeInstance]
    firewalls: dict[str, dict[str, Any]]
    operations: dict[str, ComputeOperation]
    stock_outs: dict[tuple[str, str], bool]
    quotas: dict[tuple[str, str], float]
    _ids: itertools.count[int]

    if TYPE_CHECKING:  # FakeGCP and FakeCloud provide these

        def violation(self, why: str) -> None: ...

        def later(self, delay: float, fn: Callable[..., None], *args: Any) -> None: ...

        def _reject(self, code: int, why: str, reason: str | None = None) -> Response: ...

        def _address(self, instance_id: str) -> str: ...

        def _machine_up(self, instance_id: str, script: str, ip: str) -> None: ...

        def _machine_gone(self, instance_id: str) -> None: ...

        def quota_usage(self, region: str) -> dict[str, float]: ...

    # -- lookups ------------------------------------------------------------------------

    def find_instance(self, zone: str, name: str) -> FakeInstance | None:
        return next((i for i in self.instances.values() if i.zone == zone and i.name == name and not i.deleted), None)

    def _link(self, *parts: str) -> str:
        return "/".join((f"{COMPUTE}/projects/{self.project}", *parts))

    def _operation(self, zone: str | None, kind: str, target: str, target_id: str) -> ComputeOperation:
        op = ComputeOperation(next(self._ids), zone, kind, target, target_id)
        self.operations[op.name] = op
        return op

    def _op_response(self, op: ComputeOperation) -> Response:
        return Response(200, op.to_json(self.project))

    # -- instances ----------------------------------------------------------------------

    def insert_instance(self, zone: str, request: Request) -> Response:
        body = request.json()
        refused = instance_problem(body, zone)
        if refused is not None:
            return self._reject(*refused)
        name = body["name"]
        link = self._link("zones", zone, "instances", name)
        if self.find_instance(zone, name) is not None or any(
            o.target_link == link and o.operation_type == "insert" and o.status != "DONE"
            for o in self.operations.values()
        ):
            return gcp_error(
                409, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' already exists"
            )
        instance_id = next(self._ids) * 1_000_003
        op = self._operation(zone, "insert", link, str(instance_id))
        self.later(self.operation_delay, self._finish_insert, op, FakeInstance(instance_id, name, zone, body))
        return self._op_response(op)

    def _refusal(self, instance: FakeInstance) -> tuple[str, str, int, str] | None:
        """Why the zone cannot place ``instance`` now: a stock-out or a regional quota."""
        gpus = attached_gpus(instance.body, instance.machine_type)
        for what in (instance.machine_type, *(kind for kind, _ in gpus)):
            if (instance.zone, what) in self.stock_outs:
                zone = f"The zone 'projects/{self.project}/zones/{instance.zone}' does not have enough resources"
                if self.stock_outs[(instance.zone, what)]:
                    message = f"{zone} available to fulfill the request.  '(resource type:compute)'."
                    return "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", message, 503, "SERVICE UNAVAILABLE"
                message = f"{zone} available to fulfill the request.  Try a different zone, or try again later."
                return "ZONE_RESOURCE_POOL_EXHAUSTED", message, 503, "SERVICE UNAVAILABLE"
        region = ZONES[instance.zone].region
        prefix = "PREEMPTIBLE_" if instance.spot else ""
        needs = {f"{prefix}CPUS": float(MACHINE_TYPES[instance.machine_type].cpus), "INSTANCES": 1.0}
        for kind, count in gpus:
            needs[prefix + ACCELERATOR_TYPES[kind].quota] = float(count)
        usage = self.quota_usage(region)
        for metric, amount in needs.items():
            limit = self.quotas.get((region, metric))
            if limit is not None and usage.get(metric, 0.0) + amount > limit:
                message = f"Quota '{metric}' exceeded.  Limit: {limit} in region {region}."
                return "QUOTA_EXCEEDED", message, 403, "FORBIDDEN"
        limit, all_gpus = self.quotas.get(("global", "GPUS_ALL_REGIONS")), sum(n for _, n in gpus)
        in_use = self.quota_usage("global").get("GPUS_ALL_REGIONS", 0.0)
        if all_gpus and limit is not None and in_use + all_gpus > limit:
            return "QUOTA_EXCEEDED", f"Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: {limit} globally.", 403, "FORBIDDEN"
        return None

    def _finish_insert(self, op: ComputeOperation, instance: FakeInstance) -> None:
        with self.lock:
            refusal = self._refusal(instance)
            op.finish(refusal)
            if refusal is not None:
                return
            self.instances[instance.id] = instance
        self.later(self.boot_delay / 2, self._advance, instance, "PROVISIONING", "STAGING")

    def _advance(self, instance: FakeInstance, before: str, after: str) -> None:
        with self.lock:
            if instance.deleted or instance.status != before:
                return
            if after == "RUNNING":
                instance.internal_ip = self._address(instance.name)
                if any(n.get("accessConfigs") for n in instance.body["networkInterfaces"]):
                    instance.nat_ip = instance.internal_ip
            instance.set_status(after)
            ip = instance.internal_ip or ""
        if after == "STAGING":  # chained, not timed apart: two timers may fire out of order on a loaded machine
            self.later(self.boot_delay / 2, self._advance, instance, "STAGING", "RUNNING")
        if after == "RUNNING":
            self._machine_up(instance.name, instance.startup_script, ip)

    def delete_instance(self, zone: str, name: str) -> Response:
        instance = self.find_instance(zone, name)
        if instance is None:
            return not_found(f"projects/{self.project}/zones/{zone}/instances/{name}")
        op = self._operation(zone, "delete", self._link("zones", zone, "instances", name), str(instance.id))
        instance.set_status("STOPPING")
        self._machine_gone(instance.name)
        self.later(self.operation_delay, self._finish_delete, op, instance)
        return self._op_response(op)

    def _finish_delete(self, op: ComputeOperation, instance: FakeInstance) -> None:
        with self.lock:
            instance.set_status("TERMINATED")
            instance.deleted = True
            instance.history.append("DELETED")
            op.finish()

    def stop_instance(self, zone: str, name: str) -> Response:
        instance = self.find_instance(zone, name)
        if instance is None:
            return not_found(f"projects/{self.project}/zones/{zone}/instances/{name}")
        op = self._operation(zone, "stop", self._link("zones", zone, "instances", name), str(instance.id))
        if instance.status != "TERMINATED":
            instance.set_status("STOPPING")
            self._machine_gone(instance.name)
        self.later(self.operation_delay, self._finish_stop, op, instance)
        return self._op_response(op)

    def _finish_stop(self, op: ComputeOperation, instance: FakeInstance) -> None:
        with self.lock:
            if instance.status == "STOPPING":
                instance.set_status("TERMINATED")
            op.finish()

    def set_labels(self, zone: str, name: str, request: Request) -> Response:
        instance = self.find_instance(zone, name)
        if instance is None:
            return not_found(f"projects/{self.project}/zones/{zone}/instances/{name}")
        body = request.json() or {}
        labels = body.get("labels") or {}
        problem = labels_problem(labels, "labels")
        if problem:
            return self._reject(400, problem)
        if body.get("labelFingerprint") != fingerprint(instance.labels):
            # "you must provide the current fingerprint ... or the request fails with 412"
            return self._reject(412, "Labels fingerprint either invalid or resource labels have changed")
        op = self._operation(zone, "setLabels", self._link("zones", zone, "instances", name), str(instance.id))
        instance.body["labels"] = dict(labels)
        self.later(self.operation_delay, op.finish)
        return self._op_response(op)

    # -- firewalls ----------------------------------------------------------------------

    def insert_firewall(self, request: Request) -> Response:
        body = request.json()
        problem = firewall_problem(body)
        if problem:
            return self._reject(400, problem)
        name = body["name"]
        if name in self.firewalls:
            return gcp_error(409, f"The resource 'projects/{self.project}/global/firewalls/{name}' already exists")
        if _open(body):
            self.violation(f"firewall {name} lets the whole internet in: {body.get('sourceRanges') or 'no source'}")
        firewall_id = next(self._ids) * 1_000_033
        link = self._link("global", "firewalls", name)
        firewall = {
            "kind": "compute#firewall", "id": str(firewall_id), "creationTimestamp": stamp(), "name": name,
            "description": body.get("description", ""), "network": self._link("global", "networks", "default"),
            "priority": body.get("priority", 1000), "direction": body.get("direction", "INGRESS"),
            **{k: body[k] for k in ("sourceRanges", "sourceTags", "targetTags", "allowed", "denied") if k in body},
            "disabled": body.get("disabled", False), "selfLink": link,
        }  # fmt: skip
        op = self._operation(None, "insert", link, str(firewall_id))
        self.later(self.operation_delay, self._finish_firewall, op, firewall)
        return self._op_response(op)

    def _finish_firewall(self, op: ComputeOperation, firewall: dict[str, Any] | None, name: str = "") -> None:
        with self.lock:
            if firewall is not None:
                self.firewalls[firewall["name"]] = firewall
            else:
                self.firewalls.pop(name, None)
            op.finish()

    def delete_firewall(self, name: str) -> Response:
        firewall = self.firewalls.get(name)
        if firewall is None:
            return not_found(f"projects/{self.project}/global/firewalls/{name}")
        op = self._operation(None, "delete", firewall["selfLink"], firewall["id"])
        self.later(self.operation_delay, self._finish_firewall, op, None, name)
        return self._op_response(op)

    # -- operations ---------------------------------------------------------------------

    def preempted(self, instance: FakeInstance) -> None:
        """Record GCE's ``compute.instances.preempted`` system operation
        (/compute/docs/instances/spot#detect-preemption)."""
        link = self._link("zones", instance.zone, "instances", instance.name)
        op = self._operation(instance.zone, "compute.instances.preempted", link, str(instance.id))
        op.finish()
