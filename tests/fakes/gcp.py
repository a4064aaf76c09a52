"""A stateful fake of Google Cloud: Compute Engine REST v1, Cloud TPU REST v2 and the OAuth
token endpoint, on one loopback server, in the shapes google-cloud-compute's and
google-cloud-tpu's REST transports send and parse (``ClientOptions(api_endpoint=fake.url)``).

Paths: ``POST /token``; ``/compute/v1/projects/{project}/...`` (zones, regions with quotas,
machineTypes, acceleratorTypes, instances insert/get/list/aggregatedList/delete/setLabels/stop,
global firewalls, zone and global operations with ``wait``); ``/v2/projects/{project}/
locations/{zone}/...`` (TPU nodes create/get/list/delete, acceleratorTypes, runtimeVersions,
operations); ``GET /whoami`` (the caller's address). Selflinks are Google's
(``https://www.googleapis.com/compute/v1/...``), whatever endpoint the client used.

A client note the fake makes visible: google-cloud-compute's ``ExtendedOperation.result()``
(what ``InstancesClient.insert(...)`` returns) polls compute.googleapis.com whatever
``api_endpoint`` says (the transport builds its ZoneOperationsClient without the client
options), so a client on another endpoint waits through its own ``ZoneOperationsClient``
(``wait``/``get``) with the operation's ``name``. google-cloud-tpu's operations do use the endpoint.

State: a VM's insert operation is RUNNING for ``operation_delay`` seconds, then DONE (or
DONE with an error); the VM is then PROVISIONING, STAGING at ``boot_delay / 2``, RUNNING at
``boot_delay`` with its addresses and its ``startup-script`` run (hook ``on_running(name,
script, ip)``); delete makes it STOPPING (hook ``on_deleted(name)``) and then gone. A TPU
node is CREATING, then READY after ``operation_delay + boot_delay`` (its create operation done
then), when each host ``{node}-w-{i}`` runs the node's ``startup-script``. Test controls:
``stock_out``, ``set_quota``, ``preempt``, ``power_off``, ``revoke_tokens``, ``live``, and
``fail``/``slow`` from FakeHTTPServer; a refused request that a correct client would not send
is also recorded in ``violations``.

The rules enforced, each with its source (cloud.google.com paths):

* auth (see :mod:`fakes.gcp_auth`): every API call carries ``Authorization: Bearer`` with a
  token ``/token`` issued or a self-signed JWT of the service account; else 401
  UNAUTHENTICATED (/docs/authentication/rest, google.aip.dev/auth/4111).
* errors: ``{"error": {"code", "message", "status", "errors": [{"reason", ...}]}}``
  (/apis/design/errors#http_mapping); an insert refused while it runs ends its operation with
  ``error.errors[0].code`` and ``httpErrorStatusCode`` (/compute/docs/reference/rest/v1/zoneOperations).
* names: RFC 1035, ``[a-z]([-a-z0-9]{0,61}[a-z0-9])?`` (/compute/docs/naming-resources), for
  instances, firewalls, network tags and TPU node ids; a name in use answers 409.
* labels: at most 64; keys start with a lowercase letter; keys and values of ``[a-z0-9_-]``,
  at most 63 characters (/compute/docs/labeling-resources#requirements); ``setLabels`` needs
  the current ``labelFingerprint``, else 412 (/compute/docs/reference/rest/v1/instances/setLabels).
* metadata: keys ``[a-zA-Z0-9_-]{1,128}``, a value at most 256 KB, 512 KB in all
  (/compute/docs/metadata/setting-custom-metadata#limitations).
* instances.insert (/compute/docs/reference/rest/v1/instances/insert): known fields only; a
  machine type offered in the zone; one boot disk from a public image family; a network
  interface on ``default``; GPUs need ``scheduling.onHostMaintenance: TERMINATE``
  (/compute/docs/gpus/create-vm-with-gpus); A2/A3/G2 carry their GPUs and refuse
  ``guestAccelerators``; N1 takes T4/V100/P100 in the documented counts (/compute/docs/gpus);
  the accelerator must be offered in the zone; SPOT needs ``instanceTerminationAction`` (the
  contract with skyward-gcp: an explicit choice, /compute/docs/instances/create-use-spot),
  no ``automaticRestart`` and ``onHostMaintenance: TERMINATE``.
* stock-outs end the insert with ``ZONE_RESOURCE_POOL_EXHAUSTED`` or, with ``detailed``,
  ``ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`` (HTTP 503 "SERVICE UNAVAILABLE"), quotas with
  ``QUOTA_EXCEEDED`` (403) (/compute/docs/troubleshooting/troubleshooting-resource-availability,
  /compute/resource-usage); spot VMs count against ``PREEMPTIBLE_*`` quotas; TERMINATED VMs
  hold no CPU or GPU quota; ``GPUS_ALL_REGIONS`` (``projects.get``'s project-wide quota) counts
  every GPU. The instance never appears (GET answers 404 while the insert runs).
* ``requestId`` on a mutation: a UUID, not the zero UUID; a repeated one answers the
  operation it started and does nothing again (instances/insert's ``requestId`` parameter).
* public images: ``images.get`` and ``images.getFromFamily`` of the families in
  :data:`fakes.gcp_catalog.IMAGE_FAMILIES`; a boot disk from any other image is 404.
* preemption: a spot VM becomes TERMINATED (then deleted if its termination action is DELETE)
  with a ``compute.instances.preempted`` operation (/compute/docs/instances/spot#detect-preemption).
* firewalls (/compute/docs/reference/rest/v1/firewalls): one of ``allowed``/``denied``;
  ``IPProtocol`` a name or number, ``ports`` only for tcp/udp/sctp; CIDR source ranges; an
  INGRESS rule open to 0.0.0.0/0 (or with no source, which means that,
  /vpc/docs/firewalls#sources-for-rules) is answered but recorded as a violation.
* list filters: a subset of the documented syntax (``field = value``, ``!=``, ``:``, ``eq``/``ne``
  regular expressions, ``AND``, parenthesized terms); anything else is refused as unsupported
  and recorded. ``maxResults`` 0-500, ``pageToken`` (/compute/docs/reference/rest/v1/instances/list).
* TPU nodes (/tpu/docs/reference/rest/v2/projects.locations.nodes): ``nodeId`` RFC 1035;
  an accelerator type offered in the zone (/tpu/docs/regions-zones); the runtime version of its
  generation (/tpu/docs/runtimes); labels as above; metadata a map of strings; ``spot`` and
  ``preemptible`` exclusive; hosts per slice as :class:`fakes.gcp_catalog.TpuType` cites; a
  stock-out fails the create operation with ``RESOURCE_EXHAUSTED`` (8) "There is no more
  capacity in the zone" (/tpu/docs/troubleshooting/trouble-vm); a preempted spot node is
  PREEMPTED (/tpu/docs/spot).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import uuid
from typing import Any
from urllib.parse import unquote

from fakes.gcp_auth import EXPIRED, ServiceAccount, Tokens
from fakes.gcp_catalog import (
    ACCELERATOR_TYPES,
    DEFAULT_QUOTAS,
    GLOBAL_QUOTAS,
    IMAGE_FAMILIES,
    MACHINE_TYPES,
    REGIONS,
    ZONES,
    gcp_error,
    not_found,
)
from fakes.gcp_compute import COMPUTE, ComputeHandlers, ComputeOperation, FakeInstance
from fakes.gcp_listing import ListingHandlers
from fakes.gcp_rules import attached_gpus
from fakes.gcp_tpu import FakeNode, TpuHandlers, TpuOperation
from fakes.http import FakeCloud, LoopbackAddresses, Request, Response


class FakeGCP(ComputeHandlers, ListingHandlers, TpuHandlers, FakeCloud):
    def __init__(
        self,
        project: str = "skyward-test",
        *,
        operation_delay: float = 0.05,
        boot_delay: float = 0.1,
        wait_limit: float = 120.0,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        self.project = project
        self.operation_delay = operation_delay
        self.boot_delay = boot_delay
        self.wait_limit = wait_limit  # operations.wait answers within "approximately 2 minutes" (zoneOperations/wait)
        self.account = ServiceAccount(project, f"skyward@{project}.iam.gserviceaccount.com")
        self.tokens = Tokens(self.account)
        self.addresses = LoopbackAddresses(seed)
        self.instances: dict[int, FakeInstance] = {}
        self.firewalls: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, ComputeOperation] = {}
        self.nodes: dict[tuple[str, str], FakeNode] = {}
        self.tpu_operations: dict[str, TpuOperation] = {}
        self.stock_outs: dict[tuple[str, str], bool] = {}  # (zone, what) -> with details
        self.quotas: dict[tuple[str, str], float] = {}
        self.request_ids: dict[str, str] = {}  # requestId -> the operation it started
        self.stopped_hosts: set[str] = set()  # TPU hosts whose machine shut itself down
        self._ids = itertools.count(4_100_000)

    # -- test controls ------------------------------------------------------------------

    def service_account_info(self) -> dict[str, str]:
        """A service-account key file's JSON whose ``token_uri`` is this fake's ``/token``."""
        return self.account.info(f"{self.url}/token")

    def revoke_tokens(self) -> None:
        """Access tokens issued so far stop working (as after an expiry)."""
        self.tokens.revoke_all()

    def stock_out(self, zone: str, what: str, out: bool = True, *, detailed: bool = False) -> None:
        """``zone`` has no more ``what`` (a machine type, GPU or TPU accelerator type); ``detailed``:
        a VM insert fails with ``ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS``, the variant Compute
        Engine sends more often now (it names the resource that ran out)."""
        known = what in MACHINE_TYPES or what in ACCELERATOR_TYPES or what in ZONES[zone].tpus
        if not known:
            raise ValueError(f"stock_out: {what!r} is not a machine, GPU or TPU type of {zone}")
        with self.lock:
            if out:
                self.stock_outs[(zone, what)] = detailed
            else:
                self.stock_outs.pop((zone, what), None)

    def set_quota(self, region: str, metric: str, limit: float) -> None:
        """The project's ``metric`` quota in ``region`` (e.g. CPUS, NVIDIA_T4_GPUS, PREEMPTIBLE_NVIDIA_T4_GPUS),
        or, with ``region="global"``, a project-wide one (GPUS_ALL_REGIONS, FIREWALLS)."""
        metrics = GLOBAL_QUOTAS if region == "global" else DEFAULT_QUOTAS
        if (region not in REGIONS and region != "global") or metric not in metrics:
            raise ValueError(f"set_quota: region one of {REGIONS} or 'global', metric one of {sorted(metrics)}")
        with self.lock:
            self.quotas[(region, metric)] = limit

    def quota_usage(self, region: str) -> dict[str, float]:
        """What the live VMs use of ``region``'s quotas, or (``"global"``) of the project's."""
        usage: dict[str, float] = {"FIREWALLS": float(len(self.firewalls))} if region == "global" else {}
        for instance in self.instances.values():
            if instance.deleted or instance.status == "TERMINATED":
                continue
            gpus = attached_gpus(instance.body, instance.machine_type)
            if region == "global":
                usage["GPUS_ALL_REGIONS"] = usage.get("GPUS_ALL_REGIONS", 0.0) + sum(n for _, n in gpus)
                continue
            if ZONES[instance.zone].region != region:
                continue
            prefix = "PREEMPTIBLE_" if instance.spot else ""
            for metric, amount in [
                (f"{prefix}CPUS", MACHINE_TYPES[instance.machine_type].cpus), ("INSTANCES", 1),
                *((prefix + ACCELERATOR_TYPES[k].quota, n) for k, n in gpus),
            ]:  # fmt: skip
                usage[metric] = usage.get(metric, 0.0) + amount
        return usage

    def instance(self, name: str) -> FakeInstance:
        """The live (or last) VM named ``name``, in any zone."""
        found = [i for i in self.instances.values() if i.name == name]
        live = [i for i in found if not i.deleted]
        if not found:
            raise KeyError(f"no instance {name!r}")
        return (live or found)[-1]

    def node(self, node_id: str) -> FakeNode:
        """The live (or last) TPU node ``node_id``, in any zone."""
        found = [n for (_, nid), n in self.nodes.items() if nid == node_id]
        if not found:
            raise KeyError(f"no TPU node {node_id!r}")
        return ([n for n in found if not n.deleted] or found)[-1]

    def preempt(self, name: str) -> None:
        """Google reclaims the spot VM or spot/preemptible TPU node ``name``."""
        with self.lock:
            nodes = [n for (_, nid), n in self.nodes.items() if nid == name and not n.deleted]
            if nodes:
                node = nodes[0]
                if not node.spot:
                    raise ValueError(f"TPU node {name} is not spot or preemptible; Google does not preempt it")
                node.set_state("PREEMPTED")
                hosts = node.hosts
            else:
                instance = self.instance(name)
                if not instance.spot or instance.deleted:
                    raise ValueError(f"instance {name} is not a live spot VM; Google does not preempt it")
                instance.set_status("STOPPING")
                instance.set_status("TERMINATED")
                self.preempted(instance)
                if (instance.body.get("scheduling") or {}).get("instanceTerminationAction") == "DELETE":
                    self.later(self.operation_delay, self._preempt_delete, instance)
                hosts = [instance.name]
        for host in hosts:
            self._machine_gone(host)

    def _preempt_delete(self, instance: FakeInstance) -> None:
        with self.lock:
            instance.deleted = True
            instance.history.append("DELETED")

    def power_off(self, machine: str) -> None:
        """The machine shut itself down: a VM is TERMINATED (kept, its disk billed); a TPU host
        is noted in ``stopped_hosts`` and its node stays (and bills) until deleted."""
        with self.lock:
            if re.search(r"-w-\d+$", machine) and any(machine in n.hosts for n in self.nodes.values()):
                self.stopped_hosts.add(machine)
                return
            instance = self.instance(machine)
            if not instance.deleted and instance.status not in ("STOPPING", "TERMINATED"):
                instance.set_status("TERMINATED")

    def live(self) -> dict[str, list[str]]:
        """What still exists: VMs (TERMINATED ones too: their disks bill), TPU nodes, firewalls."""
        with self.lock:
            return {
                "instances": [f"{i.zone}/{i.name} ({i.status})" for i in self.instances.values() if not i.deleted],
                "tpu_nodes": [f"{n.zone}/{n.node_id} ({n.state})" for n in self.nodes.values() if not n.deleted],
                "firewalls": sorted(self.firewalls),
            }

    # -- machines -----------------------------------------------------------------------

    def _address(self, instance_id: str) -> str:
        return self.address_for(instance_id) if self.address_for is not None else self.addresses.allocate()[0]

    def _machine_up(self, instance_id: str, script: str, ip: str) -> None:
        hook = self.on_running
        if hook is not None and script:  # no startup-script: the machine runs nothing of ours
            try:
                hook(instance_id, script, ip)
            except Exception as exc:  # the test sees it
                self.violation(f"on_running({instance_id}) failed: {exc!r}")

    def _machine_gone(self, instance_id: str) -> None:
        if self.on_deleted is not None:
            threading.Thread(target=self.on_deleted, args=(instance_id,), daemon=True).start()

    def _reject(self, code: int, why: str, reason: str | None = None) -> Response:
        self.violation(why)
        return gcp_error(code, why, reason)

    # -- routing ------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        if request.path == "/whoami":
            return Response(200, f"{request.client}\n")
        if request.path == "/token" and request.method == "POST":
            return self.tokens.grant(request, f"{self.url}/token")
        problem = self.tokens.problem(request)
        if problem is not None:
            if problem != EXPIRED:  # a client refreshes an expired token; any other refusal is its bug
                self.violation(f"{request.method} {request.path}: {problem}")
            return gcp_error(401, problem, "required" if "missing" in problem else "authError")
        if request.method in ("POST", "PATCH", "PUT") and request.body:
            try:
                request.json()
            except ValueError:
                return self._reject(400, "Invalid JSON payload received.")
        parts = [unquote(p) for p in request.path.strip("/").split("/")]
        match parts:
            case ["compute", "v1", "projects", project, "global", "images", *image] if request.method == "GET" and (
                project in IMAGE_FAMILIES
            ):
                found = self.image(project, image[-1], image[:1] == ["family"]) if len(image) in (1, 2) else None
                return (
                    Response(200, found) if found else not_found(f"projects/{project}/global/images/{'/'.join(image)}")
                )
            case ["compute", "v1", "projects", project, *rest] if project == self.project:
                if request.method == "POST" and len(rest) >= 4 and rest[-1] == "wait" and rest[-3] == "operations":
                    return self._wait(rest[-2])
                with self.lock:
                    return self._idempotent(request, rest)
            case ["v2", "projects", project, "locations", zone, *rest] if project == self.project and zone in ZONES:
                with self.lock:
                    return self.tpu_route(request, zone, rest)
            case ["compute", "v1", "projects", project, *_] | ["v2", "projects", project, *_]:
                return self._reject(403, f"Permission denied on project '{project}' (this fake holds {self.project})")
        return self._reject(404, f"{request.method} {request.path}: not a Google Cloud endpoint this fake has")

    def _idempotent(self, request: Request, rest: list[str]) -> Response:
        """A mutation with a ``requestId`` it already carried out answers that operation again
        ("the server will know to ignore the request if it has already been completed"; a UUID,
        not the zero UUID: the ``requestId`` parameter of /compute/docs/reference/rest/v1/instances/insert)."""
        request_id = request.arg("requestId")
        if request_id is None or request.method == "GET":
            return self._compute(request, rest)
        try:
            valid = uuid.UUID(request_id).int != 0
        except ValueError:
            valid = False
        if not valid:
            return self._reject(400, f"Invalid value for field 'requestId': '{request_id}'. Must be a non-zero UUID.")
        done = self.request_ids.get(request_id)
        if done is not None:
            return Response(200, self.operations[done].to_json(self.project))
        response = self._compute(request, rest)
        if (
            response.status == 200
            and isinstance(response.body, dict)
            and response.body.get("kind") == "compute#operation"
        ):
            self.request_ids[request_id] = response.body["name"]
        return response

    def _wait(self, name: str) -> Response:
        deadline = time.monotonic() + self.wait_limit
        while True:
            with self.lock:
                op = self.operations.get(name)
                if op is None:
                    return not_found(f"projects/{self.project}/operations/{name}")
                if op.status == "DONE" or time.monotonic() >= deadline:
                    return Response(200, op.to_json(self.project))
            time.sleep(min(0.01, self.operation_delay))

    def _compute(self, request: Request, rest: list[str]) -> Response:
        method, base = request.method, f"{COMPUTE}/projects/{self.project}"
        match rest:
            case [] if method == "GET":  # projects.get: the project-wide quotas
                return Response(200, self.project_json())
            case ["zones"] if method == "GET":
                return self._list(request, "compute#zoneList", [self._zone(z) for z in ZONES])
            case ["zones", zone] if method == "GET" and zone in ZONES:
                return Response(200, self._zone(zone))
            case ["regions"] if method == "GET":
                return self._list(request, "compute#regionList", [self._region(r) for r in REGIONS])
            case ["regions", region] if method == "GET" and region in REGIONS:
                return Response(200, self._region(region))
            case ["zones", zone, *_] if zone not in ZONES:
                return not_found(f"projects/{self.project}/zones/{zone}")
            case ["zones", zone, "machineTypes"] if method == "GET":
                items = [self._machine_type(zone, m) for m in ZONES[zone].machine_types]
                return self._list(request, "compute#machineTypeList", items)
            case ["zones", zone, "machineTypes", name] if method == "GET":
                if name not in ZONES[zone].machine_types:
                    return not_found(f"projects/{self.project}/zones/{zone}/machineTypes/{name}")
                return Response(200, self._machine_type(zone, name))
            case ["zones", zone, "acceleratorTypes"] if method == "GET":
                items = [self._accelerator(zone, a) for a in ZONES[zone].accelerators]
                return self._list(request, "compute#acceleratorTypeList", items)
            case ["zones", zone, "acceleratorTypes", name] if method == "GET":
                if name not in ZONES[zone].accelerators:
                    return not_found(f"projects/{self.project}/zones/{zone}/acceleratorTypes/{name}")
                return Response(200, self._accelerator(zone, name))
            case ["aggregated", "machineTypes"] if method == "GET":
                return self._aggregated(
                    request, "machineTypes", lambda z: [self._machine_type(z, m) for m in ZONES[z].machine_types]
                )
            case ["aggregated", "acceleratorTypes"] if method == "GET":
                return self._aggregated(
                    request, "acceleratorTypes", lambda z: [self._accelerator(z, a) for a in ZONES[z].accelerators]
                )
            case ["aggregated", "instances"] if method == "GET":
                return self._aggregated(request, "instances", self._instances_in)
            case ["zones", zone, "instances"] if method == "GET":
                return self._list(request, "compute#instanceList", self._instances_in(zone))
            case ["zones", zone, "instances"] if method == "POST":
                return self.insert_instance(zone, request)
            case ["zones", zone, "instances", name] if method == "GET":
                instance = self.find_instance(zone, name)
                if instance is None:
                    return not_found(f"projects/{self.project}/zones/{zone}/instances/{name}")
                return Response(200, instance.to_json(self.project))
            case ["zones", zone, "instances", name] if method == "DELETE":
                return self.delete_instance(zone, name)
            case ["zones", zone, "instances", name, "setLabels"] if method == "POST":
                return self.set_labels(zone, name, request)
            case ["zones", zone, "instances", name, "stop"] if method == "POST":
                return self.stop_instance(zone, name)
            case ["zones", zone, "operations"] if method == "GET":
                ops = [o.to_json(self.project) for o in self.operations.values() if o.zone == zone]
                return self._list(request, "compute#operationList", ops)
            case ["zones", _, "operations", name] | ["global", "operations", name] if method == "GET":
                op = self.operations.get(name)
                if op is None or op.zone != (rest[1] if rest[0] == "zones" else None):
                    return not_found(f"projects/{self.project}/{'/'.join(rest)}")
                return Response(200, op.to_json(self.project))
            case ["global", "operations"] if method == "GET":
                ops = [o.to_json(self.project) for o in self.operations.values() if o.zone is None]
                return self._list(request, "compute#operationList", ops)
            case ["global", "firewalls"] if method == "GET":
                return self._list(request, "compute#firewallList", list(self.firewalls.values()))
            case ["global", "firewalls"] if method == "POST":
                return self.insert_firewall(request)
            case ["global", "firewalls", name] if method == "GET":
                firewall = self.firewalls.get(name)
                return (
                    Response(200, firewall)
                    if firewall
                    else not_found(f"projects/{self.project}/global/firewalls/{name}")
                )
            case ["global", "firewalls", name] if method == "DELETE":
                return self.delete_firewall(name)
        return self._reject(404, f"{method} {base}/{'/'.join(rest)}: not a Compute Engine endpoint this fake has")
