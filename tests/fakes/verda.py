"""A stateful fake of Verda's public API v1 (formerly DataCrunch; the parts skyward-verda uses).

Shapes follow Verda's public API as its official Python SDK uses it (verda/*:
``/oauth2/token`` with a JSON client-credentials body, ``/instance-types``,
``/instance-availability?is_spot=&location_code=``, ``/locations``, ``/images``,
``/sshkeys``, ``/scripts``, ``/instances`` with create calls answering the new id as
plain text, ``PUT /instances`` actions) and its error body ``{"code", "message"}``.

It issues OAuth2 tokens that expire (``token_lifetime``), refuses expired or unknown
tokens with 401, validates request bodies, and keeps state: an instance is ``ordered``,
``provisioning``, then ``running`` with a loopback ``ip`` after ``boot_delay`` seconds,
``offline`` when its machine shuts itself down (kept, and billed), and ``deleted`` once
deleted (its OS volume too, when the delete names it; otherwise the volume stays).

Test controls: ``fail``/``slow`` (FakeHTTPServer), ``rate_limit``, ``capacity`` (per
instance type, location and market), ``revoke_tokens``, ``discontinue`` (Verda takes a
spot instance back), ``refuse_action`` (one instance of a ``PUT /instances`` fails:
a 207), ``spot_param`` (which spelling of the spot flag the availability endpoint
reads), and the harness hooks ``on_running(id, script, ip)`` / ``on_deleted(id)`` /
``address_for(id)``.

The rules it enforces, each with its source ("notes" is Verda's API change log,
docs.verda.com/welcome-to-verda/release-notes/verda-api-changes; "go" the official
verdacloud-sdk-go, pkg/verda; "py" the official Python SDK, verda-cloud/sdk-python):

* ``POST /instances`` needs ``location_code`` (notes 2026-03-23: 400 without it),
  ``instance_type``, ``image``, ``hostname``, ``description`` (go ``CreateInstanceRequest``
  validation), an image Verda offers for that instance type (``GET /images?instance_type=``,
  py ``images.get(instance_type=)``, go ``GetImagesByInstanceType``), existing SSH keys.
* ``GET /instance-availability``: the market flag is read under one spelling only
  (``spot_param``: ``is_spot`` as go and the API reference, or ``isSpot`` as py), the
  location under ``location_code`` (py #69: "according to docs ... not locationCode");
  a client that sends only the other spelling reads on-demand availability.
* ``PUT /instances``: ``action`` one of go's ``Action*`` constants, ``id`` a non-empty
  list; answers 202 with one result per instance, or 207 when some failed, each
  ``{action, instanceId, status, error?, statusCode?}`` (go ``InstanceActionResult``,
  ``TestInstanceService_Action_207_PartialFailure``). ``volume_ids`` named on a delete
  go to the trash (restorable 96 h, verda CLI) unless ``delete_permanently`` (py 1.20.0);
  omitted, the OS volume goes to the trash (go: "nil omits the field (API default: OS
  volume deleted...)"); ``[]`` keeps every volume, detached and billed.
* a discontinued spot instance keeps its OS volume detached (``on_spot_discontinue``
  default ``keep_detached``, py 1.20.0); ``PUT /volumes`` ``{id, action: delete,
  is_permanent}`` deletes detached volumes (py ``volumes.delete``), refusing attached ones
  (py: "if attached to any instances, they need to be shut-down").
* ``GET /scripts`` is paginated: ``page``, ``pageSize`` (default 10, at most 100), headers
  ``X-Page``, ``X-Page-Size``, ``X-Total-Count``; at most 100 scripts per project (notes
  2026-03-30).
* errors are ``{"code", "message"}`` (go ``APIError``); ``GET /balance`` is
  ``{"amount", "currency"}`` (go ``Balance``).
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from fakes.http import FakeCloud, LoopbackAddresses, Request, Response
from fakes.verda_lifecycle import FakeInstance, VerdaLifecycle
from fakes.verda_lifecycle import verda_error as _error

CLIENT_ID = "verda-fake-client-id"
CLIENT_SECRET = "verda-fake-client-secret-0123456789"
_HOSTNAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9]$|^[a-zA-Z0-9]$")
_DEPLOY_KEYS = {
    "instance_type", "image", "ssh_key_ids", "startup_script_id", "hostname", "description", "location_code",
    "os_volume", "volumes", "existing_volumes", "is_spot", "coupon", "contract", "pricing",
}  # fmt: skip
SCRIPTS_QUOTA = 100  # startup scripts per project (notes 2026-03-30)

LOCATIONS = [
    {"code": "FIN-01", "name": "Finland 1", "country_code": "FI"},
    {"code": "FIN-02", "name": "Finland 2", "country_code": "FI"},
    {"code": "FIN-03", "name": "Finland 3", "country_code": "FI"},
    {"code": "ICE-01", "name": "Iceland 1", "country_code": "IS"},
]


def _type(
    name: str, gpus: int, gpu: str, cores: int, ram: int, price: str, spot: str, gpu_memory: int = 0, model: str = ""
) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        "instance_type": name,
        "model": model,
        "name": gpu or "CPU Node",
        "description": f"{gpus}x {gpu}" if gpus else f"{cores} CPU",
        "price_per_hour": price,
        "spot_price": spot,
        "currency": "usd",
        "cpu": {"description": f"{cores} CPU", "number_of_cores": cores},
        "gpu": {"description": f"{gpus}x {gpu}" if gpus else "", "number_of_gpus": gpus},
        "memory": {"description": f"{ram}GB RAM", "size_in_gigabytes": ram},
        "gpu_memory": {"description": f"{gpu_memory}GB" if gpu_memory else "", "size_in_gigabytes": gpu_memory},
        "storage": {"description": "dynamic"},
    }


INSTANCE_TYPES = [
    _type("CPU.4V.16G", 0, "", 4, 16, "0.0350", "0.0140"),
    _type("CPU.8V.32G", 0, "", 8, 32, "0.0700", "0.0280"),
    _type("1V100.6V", 1, "Tesla V100 16GB", 6, 23, "0.3900", "0.1300", 16, "V100"),
    _type("1A6000.10V", 1, "RTX A6000 48GB", 10, 60, "0.4900", "0.1500", 48, "A6000"),
    _type("1L40S.20V", 1, "L40S 48GB", 20, 60, "0.9100", "0.3100", 48, "L40S"),
    _type("1A100.22V", 1, "A100 SXM4 80GB", 22, 120, "1.2900", "0.4500", 80, "A100"),
    _type("1H100.80S.30V", 1, "H100 SXM5 80GB", 30, 120, "2.1900", "0.7500", 80, "H100"),
    _type("8H100.80S.176V", 8, "H100 SXM5 80GB", 176, 960, "17.5200", "6.0000", 640, "H100"),
]

IMAGES = [
    {  # the account default is a CUDA image: offered for GPU types only (IMAGE_FOR)
        "id": "img-2404",
        "image_type": "ubuntu-24.04-cuda-12.8-open-docker",
        "name": "Ubuntu 24.04 + CUDA 12.8 Open + Docker",
        "details": ["Ubuntu 24.04", "CUDA 12.8"],
        "is_default": True,
        "is_cluster": False,
        "category": "ubuntu",
    },
    {
        "id": "img-2204",
        "image_type": "ubuntu-22.04-cuda-12.4-docker",
        "name": "Ubuntu 22.04 + CUDA 12.4 + Docker",
        "details": ["Ubuntu 22.04", "CUDA 12.4"],
        "is_default": False,
        "is_cluster": False,
        "category": "ubuntu",
    },
    {
        "id": "img-2404-cpu",
        "image_type": "ubuntu-24.04",
        "name": "Ubuntu 24.04",
        "details": ["Ubuntu 24.04"],
        "is_default": False,
        "is_cluster": False,
        "category": "ubuntu",
    },
]
IMAGE_FOR = {  # image_type -> the instance types it is offered for ("gpu" or "cpu")
    "ubuntu-24.04-cuda-12.8-open-docker": "gpu",
    "ubuntu-22.04-cuda-12.4-docker": "gpu",
    "ubuntu-24.04": "cpu",
}


def images_for(instance_type: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind = "gpu" if instance_type["gpu"]["number_of_gpus"] else "cpu"
    return [i for i in IMAGES if IMAGE_FOR[i["image_type"]] == kind]


class FakeVerda(VerdaLifecycle, FakeCloud):
    def __init__(
        self,
        *,
        client_id: str = CLIENT_ID,
        client_secret: str = CLIENT_SECRET,
        instance_types: Sequence[Mapping[str, Any]] = INSTANCE_TYPES,
        locations: Sequence[Mapping[str, Any]] = LOCATIONS,
        token_lifetime: float = 3600.0,
        boot_delay: float = 0.05,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        self.client_id = client_id
        self.client_secret = client_secret
        self.instance_types = [dict(t) for t in instance_types]
        self.locations = [dict(loc) for loc in locations]
        self.token_lifetime = token_lifetime
        self.boot_delay = boot_delay
        self.addresses = LoopbackAddresses(seed)
        self.tokens: dict[str, float] = {}  # access token -> expiry
        self.refresh_tokens: set[str] = set()
        self.grants: list[str] = []
        self.instances: dict[str, FakeInstance] = {}
        self.volumes: dict[str, str] = {}  # volume id -> status (attached/detached/deleted)
        self.scripts: dict[str, dict[str, str]] = {}
        self.ssh_keys: dict[str, dict[str, str]] = {}
        # (instance type, location, is_spot) -> how many more can be deployed; absent: any
        self.capacity: dict[tuple[str, str, bool], int] = {}
        self.balance = 100.0  # GET /balance's amount (USD)
        self.spot_param = "is_spot"  # the one spelling of the availability endpoint's spot flag it reads
        self.refusals: dict[str, list[tuple[int, str]]] = {}  # instance id -> (statusCode, error) of its next actions
        self._ids = itertools.count(1)

    # -- test controls ------------------------------------------------------------------

    def rate_limit(
        self, method: str | None, path: str | None, *, times: int | None = 1, retry_after: float | None = None
    ) -> None:
        headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        self.fail(method, path, 429, {"code": "too_many_requests", "message": "Too many requests"}, times=times,
                  headers=headers)  # fmt: skip

    def revoke_tokens(self) -> None:
        """Every issued access token stops working (refresh tokens still do)."""
        with self.lock:
            self.tokens.clear()

    def no_capacity(self, instance_type: str, location: str | None = None, spot: bool | None = None) -> None:
        with self.lock:
            for loc in [location] if location else [loc["code"] for loc in self.locations]:
                for market in [spot] if spot is not None else [False, True]:
                    self.capacity[(instance_type, loc, market)] = 0

    def shut_down(self, instance_id: str) -> None:
        """The instance's machine powered itself off: Verda keeps it, ``offline``."""
        with self.lock:
            instance = self.instances.get(instance_id)
            if instance is not None and instance.status == "running":
                instance.status = "offline"
                instance.history.append("offline")

    def add_instance(self, *, hostname: str, description: str, status: str = "running") -> str:
        """An instance made outside this test (an earlier pool's leftover, or not skyward's)."""
        with self.lock:
            instance_id = str(uuid.uuid4())
            volume_id = str(uuid.uuid4())
            self.volumes[volume_id] = "attached"
            public, _ = self.addresses.allocate()
            self.instances[instance_id] = FakeInstance(
                instance_id, self.instance_types[0], IMAGES[0]["image_type"], hostname, description, "FIN-01", [],
                None, False, volume_id, time.time(), status, public, [status],
            )  # fmt: skip
            return instance_id

    def live(self) -> dict[str, list[str]]:
        """What still exists (and bills, for instances and volumes)."""
        with self.lock:
            return {
                "instances": [  # a discontinued spot instance bills nothing (its kept volume does)
                    f"{i.hostname} ({i.status})"
                    for i in self.instances.values()
                    if i.status not in ("deleted", "discontinued")
                ],
                "volumes": [v for v, status in self.volumes.items() if status != "deleted"],
                "scripts": [s["name"] for s in self.scripts.values()],
                "ssh_keys": [k["name"] for k in self.ssh_keys.values()],
            }

    # -- routing --------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        if request.path == "/whoami":
            return Response(200, f"{request.client}\n")
        if not request.path.startswith("/v1/"):
            return _error(404, "not_found", "Not found")
        parts = [unquote(p) for p in request.path.rstrip("/").split("/")[2:]]
        if request.body:
            try:
                request.json()
            except ValueError:
                self.violation(f"{request.method} {request.path}: body is not JSON")
                return _error(400, "invalid_request", "Malformed JSON body")
        with self.lock:
            if parts == ["oauth2", "token"] and request.method == "POST":
                return self._token(request)
            header = request.headers.get("authorization", "")
            token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else None
            expires = self.tokens.get(token or "")
            if expires is None:
                return _error(401, "unauthorized_request", "Invalid access token")
            if time.time() >= expires:
                return _error(401, "unauthorized_request", "Access token expired")
            return self._route(request, parts)

    def _token(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict):
            return self._reject("token request body must be an object", 400, "invalid_request")
        grant = body.get("grant_type")
        if grant == "client_credentials":
            if set(body) - {"grant_type", "client_id", "client_secret"}:
                self.violation(f"unexpected token request fields {sorted(set(body) - {'grant_type'})}")
            if body.get("client_id") != self.client_id or body.get("client_secret") != self.client_secret:
                return _error(401, "unauthorized_request", "Invalid client credentials")
        elif grant == "refresh_token":
            refresh = body.get("refresh_token")
            if refresh not in self.refresh_tokens:
                return _error(401, "unauthorized_request", "Invalid refresh token")
            self.refresh_tokens.discard(refresh)
        else:
            return self._reject(f"grant_type {grant!r}: client_credentials or refresh_token", 400, "invalid_request")
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.tokens[access] = time.time() + self.token_lifetime
        self.refresh_tokens.add(refresh)
        self.grants.append(grant)
        return Response(
            200,
            {
                "access_token": access,
                "refresh_token": refresh,
                "expires_in": self.token_lifetime,
                "scope": "cloud-api-v1",
                "token_type": "Bearer",
            },
        )

    def _reject(self, why: str, status: int = 400, code: str = "invalid_request") -> Response:
        self.violation(why)
        return _error(status, code, why)

    def _route(self, request: Request, parts: list[str]) -> Response:
        method = request.method
        match parts:
            case ["instance-types"] if method == "GET":
                return Response(200, self.instance_types)
            case ["locations"] if method == "GET":
                return Response(200, self.locations)
            case ["images"] if method == "GET":
                wanted = request.arg("instance_type")
                if wanted is None:
                    return Response(200, IMAGES)
                kind = next((t for t in self.instance_types if t["instance_type"] == wanted), None)
                if kind is None:
                    return self._reject(f"instance_type {wanted!r} does not exist")
                return Response(200, images_for(kind))
            case ["balance"] if method == "GET":
                return Response(200, {"amount": self.balance, "currency": "usd"})
            case ["volumes"] if method == "PUT":
                return self._volume_action(request)
            case ["instance-availability"] if method == "GET":
                return self._availability(request)
            case ["instance-availability", name] if method == "GET":
                spot = request.arg(self.spot_param) == "true"
                location = request.arg("location_code")
                return Response(200, any(self._can_deploy(name, loc, spot) for loc in self._codes(location)))
            case ["sshkeys"] if method == "GET":
                return Response(200, [{**k} for k in self.ssh_keys.values()])
            case ["sshkeys"] if method == "POST":
                return self._add_key(request)
            case ["sshkeys", key_id] if method == "DELETE":
                if self.ssh_keys.pop(key_id, None) is None:
                    return _error(404, "not_found", "SSH key not found")
                return Response(200)
            case ["scripts"] if method == "GET":
                return self._list_scripts(request)
            case ["scripts"] if method == "POST":
                return self._add_script(request)
            case ["scripts", script_id] if method == "DELETE":
                if self.scripts.pop(script_id, None) is None:
                    return _error(404, "not_found", "Script not found")
                return Response(200)
            case ["instances"] if method == "GET":
                status = request.arg("status")
                live = [i for i in self.instances.values() if i.status != "deleted"]
                return Response(200, [i.to_json() for i in live if status in (None, "", i.status)])
            case ["instances"] if method == "POST":
                return self._deploy(request)
            case ["instances"] if method == "PUT":
                return self._action(request)
            case ["instances", instance_id] if method == "GET":
                instance = self.instances.get(instance_id)
                if instance is None or instance.status == "deleted":
                    return _error(404, "not_found", "Instance not found")
                return Response(200, instance.to_json())
        self.violation(f"{method} {request.path}: not an endpoint this fake (or Verda) has")
        return _error(404, "not_found", "Not found")

    # -- handlers -------------------------------------------------------------------------

    def _codes(self, location: str | None) -> list[str]:
        codes = [loc["code"] for loc in self.locations]
        return [location] if location in codes else ([] if location else codes)

    def _can_deploy(self, type_name: str, location: str, spot: bool) -> bool:
        if not any(t["instance_type"] == type_name for t in self.instance_types):
            return False
        return self.capacity.get((type_name, location, spot), 1) > 0

    def _availability(self, request: Request) -> Response:
        raw = request.arg(self.spot_param)
        if raw not in (None, "true", "false"):
            return self._reject(f"{self.spot_param}={raw!r}: true or false")
        spot = raw == "true"
        location = request.arg("location_code")
        out = []
        for code in self._codes(location):
            names = [
                t["instance_type"] for t in self.instance_types if self._can_deploy(t["instance_type"], code, spot)
            ]
            out.append({"location_code": code, "availabilities": names})
        return Response(200, out)

    def _add_key(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict) or set(body) != {"name", "key"}:
            return self._reject("an SSH key is {name, key}")
        key = str(body["key"]).split()
        if len(key) < 2 or key[0] not in ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256"):
            return self._reject("key is not an OpenSSH public key")
        key_id = str(uuid.uuid4())
        self.ssh_keys[key_id] = {"id": key_id, "name": str(body["name"]), "key": str(body["key"])}
        return Response(201, key_id)

    def _add_script(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict) or set(body) != {"name", "script"}:
            return self._reject("a startup script is {name, script}")
        if not str(body["script"]).startswith("#!"):
            return self._reject("a startup script must start with #!")
        if len(self.scripts) >= SCRIPTS_QUOTA:
            return self._reject(f"startup script quota of {SCRIPTS_QUOTA} reached", 400, "quota_exceeded")
        script_id = str(uuid.uuid4())
        self.scripts[script_id] = {"id": script_id, "name": str(body["name"]), "script": str(body["script"])}

        return Response(201, script_id)

    def _deploy(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict):
            return self._reject("deploy body must be an object")
        unknown = set(body) - _DEPLOY_KEYS
        if unknown:
            return self._reject(f"unknown deploy fields {sorted(unknown)}")
        for required in ("instance_type", "image", "ssh_key_ids", "hostname", "description", "location_code"):
            if required not in body:
                return self._reject(f"{required} is required")
        kind = next((t for t in self.instance_types if t["instance_type"] == body["instance_type"]), None)
        if kind is None:
            return self._reject(f"instance type {body['instance_type']!r} does not exist")
        if body["image"] not in {i["image_type"] for i in IMAGES} | {i["id"] for i in IMAGES}:
            return self._reject(f"image {body['image']!r} does not exist")
        if body["image"] not in {x for i in images_for(kind) for x in (i["image_type"], i["id"])}:
            return self._reject(f"image {body['image']} is not available for instance type {kind['instance_type']}")
        keys = body["ssh_key_ids"]
        if not isinstance(keys, list) or not keys or any(k not in self.ssh_keys for k in keys):
            return self._reject(f"ssh_key_ids {keys!r}: at least one, all existing")
        script_id = body.get("startup_script_id")
        if script_id is not None and script_id not in self.scripts:
            return self._reject(f"startup script {script_id!r} does not exist")
        hostname = body.get("hostname")
        if not isinstance(hostname, str) or not _HOSTNAME.match(hostname):
            return self._reject(f"hostname {hostname!r} is not a valid hostname")
        location = body["location_code"]
        if location not in {loc["code"] for loc in self.locations}:
            return self._reject(f"location_code {location!r} does not exist")
        spot = body.get("is_spot", False)
        if not isinstance(spot, bool):
            return self._reject("is_spot must be a boolean")
        key = (kind["instance_type"], location, spot)
        left = self.capacity.get(key)
        if left is not None:
            if left <= 0:
                gpus = kind["gpu"]["number_of_gpus"]
                what = f"{gpus} GPU instance type" if gpus else "CPU instance type"
                message = f"Not enough resources to deploy a {what} {kind['instance_type']} in {location}"
                return _error(503, "service_unavailable", message)
            self.capacity[key] = left - 1
        instance_id = str(uuid.uuid4())
        volume_id = str(uuid.uuid4())
        self.volumes[volume_id] = "attached"
        instance = FakeInstance(
            id=instance_id, instance_type=kind, image=body["image"], hostname=hostname,
            description=str(body.get("description") or ""), location=location, ssh_key_ids=list(keys),
            startup_script_id=script_id, is_spot=spot, os_volume_id=volume_id, created_at=time.time(),
        )  # fmt: skip
        self.instances[instance_id] = instance
        for step, delay in (("provisioning", self.boot_delay / 2), ("running", self.boot_delay)):
            self.later(delay, self._advance, instance_id, step)
        return Response(202, instance_id)

    def _advance(self, instance_id: str, step: str) -> None:
        hook, script = None, ""
        with self.lock:
            instance = self.instances.get(instance_id)
            if instance is None or instance.status in ("deleted", "offline", "running"):
                return
            if step == "running":
                if self.address_for is not None:
                    instance.ip = self.address_for(instance_id)
                else:
                    instance.ip, _ = self.addresses.allocate()
                script = self.scripts.get(instance.startup_script_id or "", {}).get("script", "")
                hook = self.on_running
            instance.status = step
            instance.history.append(step)
            ip = instance.ip
        if hook is not None and ip is not None:
            try:
                hook(instance_id, script, ip)
            except Exception as exc:
                self.violation(f"on_running({instance_id}) failed: {exc!r}")
