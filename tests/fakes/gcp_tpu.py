"""The fake Cloud TPU API v2: nodes (one emulated machine per host of the slice), accelerator
types, runtime versions and long-running operations. Mixed into :class:`fakes.gcp.FakeGCP`,
whose docstring lists the rules enforced and their sources."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fakes.gcp_catalog import TPU_RUNTIMES, ZONES, TpuType, gcp_error, rfc1035_problem
from fakes.gcp_compute import stamp
from fakes.gcp_rules import labels_problem
from fakes.http import Request, Response

NODE_FIELDS = {
    "description", "acceleratorType", "runtimeVersion", "networkConfig", "networkConfigs", "cidrBlock",
    "serviceAccount", "schedulingConfig", "labels", "metadata", "tags", "dataDisks", "shieldedInstanceConfig",
    "acceleratorConfig",
}  # fmt: skip
_CONFIG_TYPES = {"v4": "V4", "v5p": "V5P", "v5litepod": "V5LITE_POD", "v6e": "V6E"}  # AcceleratorConfig.Type
TPU = "type.googleapis.com/google.cloud.tpu.v2"
RESOURCE_EXHAUSTED, ABORTED = 8, 10  # google.rpc.Code


@dataclass
class TpuOperation:
    """A ``google.longrunning.Operation`` (/tpu/docs/reference/rest/v2/projects.locations.operations)."""

    name: str
    verb: str
    target: str
    created: float = field(default_factory=time.time)
    done: bool = False
    error: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    ended: float | None = None

    def finish(self, *, response: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> None:
        self.done, self.ended = True, time.time()
        self.response, self.error = response, error

    def to_json(self) -> dict[str, Any]:
        metadata = {
            "@type": f"{TPU}.OperationMetadata", "createTime": stamp(self.created), "target": self.target,
            "verb": self.verb, "cancelRequested": False, "apiVersion": "v2",
            **({"endTime": stamp(self.ended)} if self.ended else {}),
        }  # fmt: skip
        body: dict[str, Any] = {"name": self.name, "metadata": metadata, "done": self.done}
        if self.error is not None:
            body["error"] = self.error
        elif self.response is not None:
            body["response"] = self.response
        return body


@dataclass
class FakeNode:
    node_id: str
    zone: str
    body: dict[str, Any]
    state: str = "CREATING"  # -> READY -> DELETING; PREEMPTED when preempted
    endpoints: list[str] = field(default_factory=list)  # each host's address
    created: float = field(default_factory=time.time)
    numeric_id: int = 0
    deleted: bool = False
    history: list[str] = field(default_factory=lambda: ["CREATING"])

    @property
    def type(self) -> TpuType:
        return TpuType(self.body["acceleratorType"])

    @property
    def hosts(self) -> list[str]:
        """The emulated machines' ids, ``{node}-w-{i}``, i the host's index."""
        return [f"{self.node_id}-w-{i}" for i in range(self.type.hosts)]

    @property
    def spot(self) -> bool:
        config = self.body.get("schedulingConfig") or {}
        return bool(config.get("spot") or config.get("preemptible"))

    def set_state(self, state: str) -> None:
        self.state = state
        self.history.append(state)

    def to_json(self, project: str) -> dict[str, Any]:
        external = (self.body.get("networkConfig") or {}).get("enableExternalIps", False)
        endpoints = [
            {"ipAddress": ip, "port": 8470, **({"accessConfig": {"externalIp": ip}} if external else {})}
            for ip in self.endpoints
        ]
        kind = self.type
        return {
            "name": f"projects/{project}/locations/{self.zone}/nodes/{self.node_id}",
            "acceleratorType": kind.name, "state": self.state, "runtimeVersion": self.body["runtimeVersion"],
            "networkConfig": {"network": f"projects/{project}/global/networks/default",
                              "subnetwork": f"projects/{project}/regions/{ZONES[self.zone].region}/subnetworks/default",
                              "enableExternalIps": bool(external)},
            "cidrBlock": "10.128.0.0/20", "createTime": stamp(self.created),
            "schedulingConfig": dict(self.body.get("schedulingConfig") or {}), "networkEndpoints": endpoints,
            "health": "HEALTHY" if self.state == "READY" else "HEALTH_UNSPECIFIED",
            "labels": dict(self.body.get("labels") or {}), "metadata": dict(self.body.get("metadata") or {}),
            "tags": list(self.body.get("tags") or []), "id": str(self.numeric_id), "apiVersion": "V2",
            "acceleratorConfig": {"type": _CONFIG_TYPES[kind.generation], "topology": kind.topology},
        }  # fmt: skip


class TpuHandlers:
    """``/v2/projects/{project}/locations/{zone}/...``."""

    lock: threading.RLock
    project: str
    operation_delay: float
    boot_delay: float
    nodes: dict[tuple[str, str], FakeNode]  # (zone, node id) -> node, deleted ones included until reused
    tpu_operations: dict[str, TpuOperation]
    stock_outs: dict[tuple[str, str], bool]
    _ids: itertools.count[int]

    if TYPE_CHECKING:  # FakeGCP and FakeCloud provide these

        def later(self, delay: float, fn: Callable[..., None], *args: Any) -> None: ...

        def _reject(self, code: int, why: str, reason: str | None = None) -> Response: ...

        def _address(self, instance_id: str) -> str: ...

        def _machine_up(self, instance_id: str, script: str, ip: str) -> None: ...

        def _machine_gone(self, instance_id: str) -> None: ...

    def find_node(self, zone: str, node_id: str) -> FakeNode | None:
        node = self.nodes.get((zone, node_id))
        return None if node is None or node.deleted else node

    def _tpu_operation(self, zone: str, verb: str, target: str) -> TpuOperation:
        op_id = f"operation-{int(time.time() * 1000)}-{next(self._ids):x}"
        name = f"projects/{self.project}/locations/{zone}/operations/{op_id}"
        op = TpuOperation(name, verb, target)
        self.tpu_operations[name] = op
        return op

    def tpu_route(self, request: Request, zone: str, rest: list[str]) -> Response:
        method = request.method
        prefix = f"projects/{self.project}/locations/{zone}"
        match rest:
            case ["nodes"] if method == "POST":
                return self._create_node(request, zone)
            case ["nodes"] if method == "GET":
                nodes = [n.to_json(self.project) for n in self.nodes.values() if n.zone == zone and not n.deleted]
                return Response(200, {"nodes": nodes} if nodes else {})
            case ["nodes", node_id] if method in ("GET", "DELETE"):
                node = self.find_node(zone, node_id)
                if node is None:
                    return gcp_error(404, f"Resource '{prefix}/nodes/{node_id}' was not found")
                if method == "GET":
                    return Response(200, node.to_json(self.project))
                return self._delete_node(node)
            case ["acceleratorTypes"] if method == "GET":
                types = [self._accelerator_type(prefix, t) for t in ZONES[zone].tpus]
                return Response(200, {"acceleratorTypes": types})
            case ["acceleratorTypes", name] if method == "GET" and name in ZONES[zone].tpus:
                return Response(200, self._accelerator_type(prefix, name))
            case ["runtimeVersions"] if method == "GET":
                versions = sorted({v for t in ZONES[zone].tpus for v in TPU_RUNTIMES[TpuType(t).generation]})
                return Response(
                    200,
                    {"runtimeVersions": [{"name": f"{prefix}/runtimeVersions/{v}", "version": v} for v in versions]},
                )
            case ["operations", op_id] if method == "GET":
                op = self.tpu_operations.get(f"{prefix}/operations/{op_id}")
                if op is None:
                    return gcp_error(404, f"Resource '{prefix}/operations/{op_id}' was not found")
                return Response(200, op.to_json())
        return self._reject(404, f"{method} /v2/{prefix}/{'/'.join(rest)}: not a Cloud TPU v2 endpoint this fake has")

    @staticmethod
    def _accelerator_type(prefix: str, name: str) -> dict[str, Any]:
        kind = TpuType(name)
        config = {"type": _CONFIG_TYPES[kind.generation], "topology": kind.topology}
        return {"name": f"{prefix}/acceleratorTypes/{name}", "type": name, "acceleratorConfigs": [config]}

    def _create_node(self, request: Request, zone: str) -> Response:
        node_id, body = request.arg("nodeId"), request.json()
        problem = rfc1035_problem("node_id", node_id)
        if problem:
            return self._reject(400, problem)
        assert node_id is not None
        if not isinstance(body, dict):
            return self._reject(400, "Invalid JSON payload received: the node must be an object")
        unknown = set(body) - NODE_FIELDS
        if unknown:
            return self._reject(400, f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r} at 'node'")
        kind = body.get("acceleratorType")
        if kind not in ZONES[zone].tpus:
            return self._reject(400, f"Accelerator type '{kind}' is not available in zone '{zone}'.")
        runtime = body.get("runtimeVersion")
        if runtime not in TPU_RUNTIMES[TpuType(kind).generation]:
            return self._reject(400, f"Runtime version '{runtime}' does not support accelerator type '{kind}'.")
        problem = labels_problem(body.get("labels"), "node.labels")
        metadata = body.get("metadata") or {}
        if problem is None and (
            not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
        ):
            problem = "Invalid value for field 'node.metadata': a map of strings"
        scheduling = body.get("schedulingConfig") or {}
        if problem is None and (set(scheduling) - {"preemptible", "spot", "reserved"}):
            problem = f"Invalid JSON payload received. Unknown name in 'node.schedulingConfig': {sorted(scheduling)}"
        if problem is None and scheduling.get("spot") and scheduling.get("preemptible"):
            problem = "Invalid value for field 'node.schedulingConfig': spot and preemptible are exclusive"
        if problem:
            return self._reject(400, problem)
        if self.find_node(zone, node_id) is not None:
            return gcp_error(409, f"Resource 'projects/{self.project}/locations/{zone}/nodes/{node_id}' already exists")
        node = FakeNode(node_id, zone, body, numeric_id=next(self._ids) * 1_000_037)
        self.nodes[(zone, node_id)] = node
        op = self._tpu_operation(zone, "create", f"projects/{self.project}/locations/{zone}/nodes/{node_id}")
        self.later(self.operation_delay, self._provision, node, op)
        return Response(200, op.to_json())

    def _provision(self, node: FakeNode, op: TpuOperation) -> None:
        with self.lock:
            if node.deleted:
                return
            if (node.zone, node.type.name) in self.stock_outs:
                node.deleted = True
                node.history.append("FAILED")
                message = (
                    f'There is no more capacity in the zone "{node.zone}"; you can try in another zone where '
                    "Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x1f2e3d4c]"
                )
                op.finish(error={"code": RESOURCE_EXHAUSTED, "message": message})
                return
        self.later(self.boot_delay, self._ready, node, op)

    def _ready(self, node: FakeNode, op: TpuOperation) -> None:
        with self.lock:
            if node.deleted or node.state != "CREATING":
                return
            node.endpoints = [self._address(host) for host in node.hosts]
            node.set_state("READY")
            op.finish(response={"@type": f"{TPU}.Node", **node.to_json(self.project)})
            script = str((node.body.get("metadata") or {}).get("startup-script", ""))
            hosts = list(zip(node.hosts, node.endpoints, strict=True))
        for host, ip in hosts:
            self._machine_up(host, script, ip)

    def _delete_node(self, node: FakeNode) -> Response:
        op = self._tpu_operation(
            node.zone, "delete", f"projects/{self.project}/locations/{node.zone}/nodes/{node.node_id}"
        )
        node.set_state("DELETING")
        for host in node.hosts:
            self._machine_gone(host)
        self.later(self.operation_delay, self._finish_delete_node, node, op)
        return Response(200, op.to_json())

    def _finish_delete_node(self, node: FakeNode, op: TpuOperation) -> None:
        with self.lock:
            node.deleted = True
            node.history.append("DELETED")
            op.finish(response={"@type": "type.googleapis.com/google.protobuf.Empty"})
            for pending in self.tpu_operations.values():  # a create the delete overtook fails, as Google's does
                if pending.target == op.target and pending.verb == "create" and not pending.done:
                    message = f"Node {node.node_id} was deleted while it was being created."
                    pending.finish(error={"code": ABORTED, "message": message})
