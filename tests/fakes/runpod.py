"""A stateful fake of RunPod's GraphQL API (the parts skyward-runpod uses), as strict as
its documented rules.

Sources, read 2026-11-25 (each rule below names its own): SDK: the official Python SDK,
github.com/runpod/runpod-python (commit 07fc6e2, 2026-08-10): ``runpod/api/graphql.py``
(``Authorization: Bearer``), ``runpod/api/mutations/pods.py``
(``generate_pod_deployment_mutation``: the required ``name``, ``imageName`` and
``cloudType``; ``cloudType`` one of ALL, COMMUNITY, SECURE; ``ports`` as
``"8080/tcp,22/tcp"`` without spaces; ``env`` as a list of ``{key, value}``;
``podTerminate(input: {podId})``); DOCS: docs.runpod.io/sdks/graphql/manage-pods (the
create-pod example, ``dockerArgs`` a string). No length limit for ``dockerArgs`` is
documented in either: this fake imposes none, and skyward does not rely on one (its
start command is a small loader, well under VastAI's 4,096 characters).

One endpoint (``POST /graphql``) taking ``{"query", "variables"}``; the operation is told
by the field the query selects: ``gpuTypes``, ``myself { pods }``,
``podFindAndDeployOnDemand`` / ``podRentInterruptable`` (``variables.input``: cloudType,
gpuTypeId, gpuCount, name, imageName, dockerArgs, ports ``"N/tcp,..."``, disk and size
fields; ``bidPerGpu`` for spot) and ``podTerminate``. Errors come back as GraphQL does:
HTTP 200 with ``{"errors": [{"message"}]}``, and 401 for a missing or wrong key.

Every call must carry ``Authorization: Bearer <key>`` (a key in the URL is also a
violation). A deployed pod is ``RUNNING`` without a ``runtime`` for ``boot_delay``
seconds; then its start command (``dockerArgs``, run as ``exec <dockerArgs>``: the line
re-split with shell rules) runs on the emulated-instance harness and each
published port gets a different public port (tests/fakes/portmap). Test controls:
``fail``/``slow`` (FakeHTTPServer), ``rate_limit``, ``no_capacity``, ``preempt``.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fakes.http import Request, Response
from fakes.portmap import HOST, FakeContainerCloud

API_KEY = "rpa_FAKE0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
NO_CAPACITY = (
    "There are no longer any instances available with the requested specifications. Please refresh and try again."
)
_PORTS = re.compile(r"^\d{1,5}/(tcp|http)(,\d{1,5}/(tcp|http))*$")  # SDK: "8080/tcp,22/tcp", spaces removed
# SDK generate_pod_deployment_mutation's input fields, plus bidPerGpu (podRentInterruptable)
_INPUT = {
    "cloudType", "gpuTypeId", "gpuCount", "name", "imageName", "dockerArgs", "ports", "containerDiskInGb",
    "volumeInGb", "minVcpuCount", "minMemoryInGb", "supportPublicIp", "startSsh", "bidPerGpu", "env",
    "dataCenterId", "countryCode", "volumeMountPath", "templateId", "networkVolumeId", "allowedCudaVersions",
    "minDownload", "minUpload",
}  # fmt: skip
_CLOUD_TYPES = ("ALL", "COMMUNITY", "SECURE")  # SDK: "Cloud type (ALL, COMMUNITY, or SECURE)"
_COUNTS = ("gpuCount", "containerDiskInGb", "volumeInGb", "minVcpuCount", "minMemoryInGb")  # SDK: ints


def gpu(
    ident: str, name: str, memory: int, secure: float, community: float, spot: float, most: int = 8
) -> dict[str, Any]:
    return {
        "id": ident, "displayName": name, "memoryInGb": memory, "maxGpuCount": most, "secureCloud": True,
        "communityCloud": True, "securePrice": secure, "communityPrice": community, "secureSpotPrice": spot,
        "communitySpotPrice": round(spot * 0.8, 3),
    }  # fmt: skip


GPU_TYPES = [
    gpu("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34, 0.29),
    gpu("NVIDIA RTX A6000", "RTX A6000", 48, 0.76, 0.49, 0.25),
    gpu("NVIDIA A100 80GB PCIe", "A100 PCIe", 80, 1.64, 1.19, 0.82),
    gpu("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.89, 1.39, 0.95),
    gpu("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 2.69, 1.75),
    gpu("NVIDIA H100 PCIe", "H100 PCIe", 80, 2.39, 1.99, 1.25),
]


@dataclass
class FakePod:
    id: str
    input: dict[str, Any]
    script: str  # what the harness runs: the start command, as ``exec <dockerArgs>``
    spot: bool
    desired_status: str = "RUNNING"
    mapped: dict[int, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.input["name"])

    def to_json(self) -> dict[str, Any]:
        runtime = None
        if self.mapped:
            ports = [{"ip": HOST, "isIpPublic": True, "privatePort": c, "publicPort": h, "type": "tcp"}
                     for c, h in self.mapped.items()]  # fmt: skip
            runtime = {"ports": ports}
        return {"id": self.id, "name": self.name, "desiredStatus": self.desired_status, "costPerHr": 1.0,
                "imageName": self.input["imageName"], "runtime": runtime}  # fmt: skip


def _errors(message: str) -> Response:
    return Response(200, {"errors": [{"message": message}], "data": None})


class FakeRunPod(FakeContainerCloud):
    def __init__(self, *, gpu_types: Sequence[Mapping[str, Any]] = GPU_TYPES, boot_delay: float = 0.05,
                 seed: int | None = None) -> None:  # fmt: skip
        super().__init__(API_KEY, boot_delay, seed)
        self.gpu_types = [dict(g) for g in gpu_types]
        self.pods: dict[str, FakePod] = {}
        self.terminated: list[str] = []
        self.capacity: dict[bool, int] = {}  # spot? -> pods that may still be deployed; absent: any
        self.refusal: tuple[int, str] | None = None  # deploys let through, then this error for the rest
        self.deploys = 0
        self._ids = itertools.count(1)

    # -- test controls ------------------------------------------------------------------

    def rate_limit(self, *, times: int = 1, after: int = 0) -> None:
        self.fail("POST", "/graphql", 429, {"errors": [{"message": "rate limited"}]}, times=times, after=after,
                  headers={"Retry-After": "0"})  # fmt: skip

    def no_capacity(self, spot: bool, left: int = 0) -> None:
        with self.lock:
            self.capacity[spot] = left

    def refuse_deploys(self, *, after: int, message: str) -> None:
        """Deploy calls after the first ``after`` answer a GraphQL error (one endpoint
        serves every call: ``fail`` would hit the reads too)."""
        with self.lock:
            self.refusal, self.deploys = (after, message), 0

    def preempt(self, pod_id: str) -> None:
        """RunPod needs the GPU of a spot pod: the pod exits (kept, with its disk)."""
        self._exit(pod_id)

    def shut_down(self, pod_id: str) -> None:
        self._exit(pod_id)

    def _exit(self, pod_id: str) -> None:
        with self.lock:
            pod = self.pods.get(pod_id)
            if pod is None:
                return
            pod.desired_status, pod.mapped = "EXITED", {}
        self.ports.close(pod_id)
        if self.on_deleted is not None:
            self.on_deleted(pod_id)

    def add_pod(self, name: str, *, status: str = "RUNNING") -> str:
        """A pod made outside this test (an earlier pool's leftover, or not skyward's)."""
        with self.lock:
            ident = f"otherpod{next(self._ids):04d}"
            pod_input = {"name": name, "imageName": "img", "ports": "22/tcp"}
            self.pods[ident] = FakePod(ident, pod_input, "#!/bin/sh\n", False, status)
            return ident

    def live(self) -> dict[str, list[str]]:
        with self.lock:
            return {"pods": [f"{p.name} ({p.desired_status})" for p in self.pods.values()]}

    # -- routing --------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        if (refused := self.admit(request, Response(401, {"errors": [{"message": "Unauthorized"}]}))) is not None:
            return refused
        if request.method != "POST" or request.path != "/graphql":
            return Response(404, {"errors": [{"message": f"{request.method} {request.path}"}]})
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return self._reject("a GraphQL request is {query, variables}")
        query, variables = body["query"], body.get("variables") or {}
        if "podFindAndDeployOnDemand" in query or "podRentInterruptable" in query:
            return self._deploy(variables.get("input"), spot="podRentInterruptable" in query)
        if "podTerminate" in query:
            return self._terminate(variables.get("input"))
        if "gpuTypes" in query:
            return Response(200, {"data": {"gpuTypes": self.gpu_types}})
        if "myself" in query and "pods" in query:
            with self.lock:
                return Response(200, {"data": {"myself": {"pods": [p.to_json() for p in self.pods.values()]}}})
        return self._reject(f"unknown operation: {query[:80]!r}")

    def _reject(self, why: str) -> Response:
        self.violation(why)
        return _errors(why)

    def deploy_problem(self, pod: object, spot: bool) -> str:
        """Why RunPod refuses this pod input ("" when it accepts it), rule by rule."""
        if not isinstance(pod, dict):
            return "a deploy takes variables.input, an object"
        if unknown := sorted(set(pod) - _INPUT):
            return f"unknown pod input fields: {unknown}"
        for name in ("name", "imageName"):  # SDK "Required Fields"
            if not isinstance(pod.get(name), str) or not pod[name]:
                return f"{name} is required: a string"
        if pod.get("cloudType") not in _CLOUD_TYPES:  # SDK "Required Fields"; an enum
            return f"cloudType {pod.get('cloudType')!r} is not one of {list(_CLOUD_TYPES)}"
        if not any(g["id"] == pod.get("gpuTypeId") for g in self.gpu_types):
            return f"unknown gpuTypeId {pod.get('gpuTypeId')!r}"
        for name in _COUNTS:
            value = pod.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                return f"{name} is a whole number: {value!r}"
        if not isinstance(pod.get("gpuCount"), int) or pod["gpuCount"] < 1:
            return "gpuCount is required for a GPU pod: at least 1"
        if pod.get("ports") is not None and not _PORTS.match(str(pod["ports"])):
            return f"ports {pod.get('ports')!r} is not 'N/tcp,...' (no spaces)"
        if pod.get("dockerArgs") is not None and not isinstance(pod["dockerArgs"], str):
            return "dockerArgs is a string"
        env = pod.get("env")
        if env is not None and not (
            isinstance(env, list) and all(isinstance(e, dict) and set(e) == {"key", "value"} for e in env)
        ):
            return f"env is a list of {{key, value}} (SDK): {env!r}"
        if spot != ("bidPerGpu" in pod) or (spot and not isinstance(pod["bidPerGpu"], int | float)):
            return "bidPerGpu goes with podRentInterruptable, and only there"
        return ""

    def _deploy(self, pod: Any, spot: bool) -> Response:
        problem = self.deploy_problem(pod, spot)
        if problem:
            return self._reject(problem)
        args = str(pod.get("dockerArgs") or "")
        try:
            shlex.split(args)
        except ValueError:
            return self._reject(f"dockerArgs is not one shell line: {args[:80]!r}")
        if not args or not pod.get("ports"):
            return self._reject("skyward deploys with a start command and published ports")
        script = f"#!/bin/bash\nexec {args}\n"
        with self.lock:
            self.deploys += 1
            if self.refusal is not None and self.deploys > self.refusal[0]:
                return _errors(self.refusal[1])
            left = self.capacity.get(spot)
            if left is not None and left <= 0:
                return _errors(NO_CAPACITY)
            if left is not None:
                self.capacity[spot] = left - 1
            ident = f"fakepod{next(self._ids):04d}"
            self.pods[ident] = FakePod(ident, dict(pod), script, spot)
        self.later(self.boot_delay, self._boot, ident)
        field_name = "podRentInterruptable" if spot else "podFindAndDeployOnDemand"
        return Response(200, {"data": {field_name: {"id": ident, "desiredStatus": "RUNNING"}}})

    def _boot(self, ident: str) -> None:
        with self.lock:
            pod = self.pods.get(ident)
            if pod is None or pod.desired_status != "RUNNING":
                return
            address = self.address_for(ident) if self.address_for is not None else self.addresses.allocate()[0]
            hook = self.on_running
        if hook is not None:
            try:
                hook(ident, pod.script, address)
            except Exception as exc:
                self.violation(f"on_running({ident}) failed: {exc!r}")
        ports = [int(p.split("/")[0]) for p in str(pod.input["ports"]).split(",")]
        mapped = self.ports.open(ident, address, ports)
        with self.lock:
            if self.pods.get(ident) is pod and pod.desired_status == "RUNNING":
                pod.mapped = mapped
            else:
                self.ports.close(ident)

    def _terminate(self, given: Any) -> Response:
        if not isinstance(given, dict) or not isinstance(given.get("podId"), str):
            return self._reject("podTerminate takes {podId}")
        with self.lock:
            pod = self.pods.pop(given["podId"], None)
            if pod is None:
                return _errors("pod not found")
            self.terminated.append(pod.id)
        self.ports.close(pod.id)
        if self.on_deleted is not None:
            self.on_deleted(pod.id)
        return Response(200, {"data": {"podTerminate": None}})
