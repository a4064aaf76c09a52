"""A stateful fake of VastAI's REST API (the parts skyward-vastai uses), as strict as its
published rules.

Sources, read 2026-11-25 (each rule below names its own):

* SPEC: VastAI's OpenAPI file ``api-reference/openapi.yaml`` in github.com/vast-ai/docs
  (commit c624622, 2026-08-07);
* CREATE: ``api-reference/openapi/yaml/create_instance.yaml`` in the same repository (the
  create-instance operation with its ``x-input-validation`` limits);
* CLI: the official CLI/SDK, github.com/vast-ai/vast-cli (commit 5567983, 2026-08-06):
  ``vastai/api/client.py`` (the ``Authorization: Bearer`` header), ``vastai/api/instances.py``
  (the rent body, the paginated listing), ``vastai/api/offers.py`` (the search body).

Endpoints: ``POST /api/v0/bundles/`` (search: ``{"field": {"op": value}}`` filters,
``order``, ``limit``, ``type``) answering ``{"offers": [...]}``; ``PUT /api/v0/asks/<offer
id>/`` (rent) answering ``{"success": true, "new_contract": <instance id>}``; ``GET
/api/v1/instances/`` (the listing, 25 a page with keyset pagination: ``next_token`` ->
``after_token``); ``DELETE /api/v0/instances/<id>/``. The v0 listing ``GET
/api/v0/instances/`` is refused (404 and a violation): it is no longer in SPEC and the
CLI lists through v1, so a driver that still used it would break when VastAI drops it.

Every call must carry ``Authorization: Bearer <key>`` (401 otherwise; a key in the URL is
also a violation). A refused request is answered in VastAI's error shape (``{"success":
false, "error": "invalid_args", "msg": ..., "ask_id": ...}``) and recorded as a violation.
A rented instance is ``loading`` for ``boot_delay`` seconds, then ``running``: its start
command (``args``, run as ``exec <args>``) runs on the emulated-instance harness, and
each requested container port is published on a different host port
(tests/fakes/portmap). Test controls: ``fail``/``slow`` (FakeHTTPServer),
``rate_limit``, ``outbid`` (the instance stops, as VastAI does to a bid that was
beaten), ``offers`` (the market), ``add_instance``.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fakes.http import Request, Response
from fakes.portmap import HOST, FakeContainerCloud

API_KEY = "vast-fake-key-6f1c0d5e9a8b7c6d5e4f3a2b1c0d9e8f"
PREFIX = "/api/v0"
V1 = "/api/v1"
_PORT_ENV = re.compile(r"^-p (\d{1,5}):(\d{1,5})$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# CREATE requestBody properties, plus client_id (CLI: create_instance sends "me") and extra
# (CLI). The real API may ignore a field it does not know; this fake refuses one, so a
# misspelt field cannot pass unnoticed.
_RENT_KEYS = {
    "client_id", "image", "template_hash_id", "label", "disk", "runtype", "target_state", "price", "env",
    "cancel_unavail", "vm", "onstart", "args", "args_str", "use_jupyter_lab", "jupyter_dir", "python_utf8",
    "lang_utf8", "force", "user", "image_login", "volume_info", "extra",
}  # fmt: skip
_RUNTYPES = {"ssh", "jupyter", "args", "ssh_proxy", "ssh_direct", "jupyter_proxy", "jupyter_direct"}  # CREATE enum
_TARGET_STATES = {"running", "stopped"}  # CREATE enum
ARGS_LIMIT = 4096  # CREATE x-input-validation args.max_length: "Combined length of args, args_str and onstart"
IMAGE_LIMIT = 1024  # CREATE x-input-validation image.max_length
LABEL_LIMIT = 256  # CREATE x-input-validation label.max_length
ENV_LIMIT, ENV_TOTAL_LIMIT = 256, 32768  # CREATE x-input-validation env.max_length, max_total_length
MIN_DISK = 8.0  # CREATE x-input-validation disk.min
MIN_PRICE, MAX_PRICE = 0.001, 128.0  # CREATE price minimum/maximum
# SPEC /api/v0/bundles: type enum [ondemand, bid, reserved]; the CLI sends "on-demand"
# (vastai/api/offers.py search_offers), so both spellings of on-demand are accepted
_SEARCH_TYPES = {"ondemand", "on-demand", "bid", "reserved"}
_SEARCH_KEYS = {"order", "limit", "type", "allocated_storage", "disable_bundling"}  # CLI search_offers
PAGE_LIMIT = 25  # SPEC /api/v1/instances limit: "Default 25, max 25. Values <= 0 are treated as 5."
_UNFILTERABLE = {"dph_total", "num_gpus"}  # SPEC select_filters: "Computed fields ... return 400"


def _limit_error(name: str, limit: int, length: int) -> str:
    return f"error 400: Invalid args: {name} is {length} characters; the limit is {limit}"


def offer(
    ident: int,
    gpu: str,
    gpus: int,
    price: float,
    *,
    gpu_ram: int = 24_576,
    cpus: int = 8,
    ram: int = 32_768,
    min_bid: float | None = None,
    reliability: float = 0.995,
    verified: bool = True,
) -> dict[str, Any]:
    return {
        "id": ident, "machine_id": 1000 + ident, "gpu_name": gpu, "num_gpus": gpus, "gpu_ram": gpu_ram,
        "cpu_cores_effective": float(cpus), "cpu_ram": ram, "dph_total": price,
        "min_bid": price / 3 if min_bid is None else min_bid, "reliability2": reliability, "verified": verified,
        "cuda_max_good": 12.6, "disk_space": 200.0, "inet_down": 800.0, "inet_up": 400.0, "rentable": True,
        "rented": False, "geolocation": "Sweden, SE",
    }  # fmt: skip


OFFERS = [
    offer(101, "RTX 4090", 1, 0.35),
    offer(102, "RTX 4090", 1, 0.38),
    offer(103, "RTX 4090", 1, 0.40),
    offer(104, "RTX 4090", 2, 0.70),
    offer(201, "A100 SXM4", 1, 1.10, gpu_ram=81_920, cpus=16, ram=131_072),
    offer(202, "A100 SXM4", 1, 1.20, gpu_ram=81_920, cpus=16, ram=131_072),
    offer(203, "A100 PCIE", 1, 0.80, gpu_ram=40_960, cpus=12, ram=65_536),
    offer(301, "H100 SXM", 1, 2.20, gpu_ram=81_920, cpus=24, ram=196_608),
    offer(302, "H100 SXM", 1, 2.40, gpu_ram=81_920, cpus=24, ram=196_608),
    offer(303, "H100 SXM", 8, 17.0, gpu_ram=81_920, cpus=128, ram=1_048_576),
    offer(401, "RTX 4090", 1, 0.20, reliability=0.80),  # cheap, unreliable: never chosen
    offer(402, "RTX 4090", 1, 0.21, verified=False),  # unverified host
]


@dataclass
class FakeInstance:
    id: int
    offer: dict[str, Any]
    label: str
    image: str
    script: str  # what the harness runs: the start command, as ``exec <args>``
    ports: list[int]
    bid: float | None
    args: list[str] = field(default_factory=list)  # the start command as rented
    actual_status: str = "loading"
    intended_status: str = "running"
    public_ipaddr: str | None = None
    mapped: dict[int, int] = field(default_factory=dict)
    start_date: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "machine_id": self.offer["machine_id"], "label": self.label, "image_uuid": self.image,
            "actual_status": self.actual_status, "intended_status": self.intended_status,
            "cur_state": "running" if self.intended_status == "running" else "stopped",
            "public_ipaddr": self.public_ipaddr, "gpu_name": self.offer["gpu_name"],
            "num_gpus": self.offer["num_gpus"], "dph_total": self.bid or self.offer["dph_total"],
            "is_bid": self.bid is not None, "geolocation": self.offer["geolocation"], "start_date": self.start_date,
            "extra_env": [],
            "ports": {f"{c}/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(h)}] for c, h in self.mapped.items()},
        }  # fmt: skip


_COMPARE = {
    "eq": lambda a, b: a == b,
    "neq": lambda a, b: a != b,
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}


def _passes(value: Any, condition: dict[str, Any]) -> bool:
    return value is not None and all(_COMPARE[op](value, want) for op, want in condition.items())


class FakeVastAI(FakeContainerCloud):
    def __init__(self, *, offers: Sequence[Mapping[str, Any]] = OFFERS, boot_delay: float = 0.05,
                 seed: int | None = None) -> None:  # fmt: skip
        super().__init__(API_KEY, boot_delay, seed)
        self.offers = {int(o["id"]): dict(o) for o in offers}
        self.instances: dict[int, FakeInstance] = {}
        self.destroyed: list[int] = []
        self.searches: list[dict[str, Any]] = []
        self._ids = itertools.count(7_000_001)

    # -- test controls ------------------------------------------------------------------

    def rate_limit(self, method: str | None, path: str | None, *, times: int = 1) -> None:
        # CREATE's 429 body
        self.fail(method, path, 429, {"detail": "API requests too frequent endpoint threshold=4.5"}, times=times,
                  headers={"Retry-After": "0"})  # fmt: skip

    def outbid(self, instance_id: str) -> None:
        """A higher bid took the host: VastAI stops the instance (it stays, with its disk)."""
        self._stop(int(instance_id))

    def shut_down(self, instance_id: str) -> None:
        """The container exited (its node's TTL): the instance stays, stopped."""
        self._stop(int(instance_id))

    def _stop(self, ident: int) -> None:
        with self.lock:
            instance = self.instances.get(ident)
            if instance is None:
                return
            instance.actual_status, instance.intended_status = "exited", "stopped"
            instance.mapped = {}
        self.ports.close(str(ident))
        if self.on_deleted is not None:
            self.on_deleted(str(ident))

    def add_instance(self, label: str, *, status: str = "running") -> int:
        """An instance made outside this test (an earlier pool's leftover, or not skyward's)."""
        with self.lock:
            ident = next(self._ids)
            instance = FakeInstance(ident, dict(OFFERS[0]), label, "img", "#!/bin/sh\n", [], None, status)
            if status != "running":
                instance.intended_status = "stopped"
            self.instances[ident] = instance
            return ident

    def live(self) -> dict[str, list[str]]:
        with self.lock:
            return {"instances": [f"{i.label} ({i.actual_status})" for i in self.instances.values()]}

    # -- routing --------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        # SPEC securitySchemes BearerAuth (http bearer); the 401 body is SPEC's example for
        # GET /api/v0/instances/{id}
        unauthorized = Response(401, {"success": False, "error": "auth_error", "msg": "Invalid user key"})
        if (refused := self.admit(request, unauthorized)) is not None:
            return refused
        if request.method == "GET" and request.path == f"{V1}/instances/":
            return self._list(request)
        path = request.path.removeprefix(PREFIX)
        if request.method == "POST" and path == "/bundles/":
            return self._search(request)
        if request.method == "GET" and path == "/instances/":
            self.violation("GET /api/v0/instances/ is not in VastAI's published API; the listing is /api/v1/instances/")
        if (match := re.fullmatch(r"/asks/(\d+)/", path)) and request.method == "PUT":
            return self._rent(int(match[1]), request)
        if (match := re.fullmatch(r"/instances/(\d+)/", path)) and request.method == "DELETE":
            return self._destroy(int(match[1]))
        return Response(404, {"success": False, "error": "not_found", "msg": f"{request.method} {request.path}"})

    def _reject(self, why: str, ask_id: int | None = None) -> Response:
        """CREATE's 400 body: ``{"success": false, "error": "invalid_args", "msg", "ask_id"}``."""
        self.violation(why)
        body: dict[str, Any] = {"success": False, "error": "invalid_args", "msg": why}
        if ask_id is not None:
            body["ask_id"] = ask_id
        return Response(400, body)

    def _search(self, request: Request) -> Response:
        query = request.json()
        if not isinstance(query, dict) or query.get("type") not in _SEARCH_TYPES:
            return self._reject(f"a search query is a JSON object with a type in {sorted(_SEARCH_TYPES)}: {query!r}")
        if "limit" in query and (isinstance(query["limit"], bool) or not isinstance(query["limit"], int)):
            return self._reject(f"limit is an integer (SPEC /bundles): {query['limit']!r}")
        order = query.get("order", [])
        if not isinstance(order, list) or not all(isinstance(o, list) and len(o) == 2 for o in order):
            return self._reject(f"order is a list of [field, direction] (CLI search_offers): {order!r}")
        filters = {k: v for k, v in query.items() if k not in _SEARCH_KEYS}
        for name, condition in filters.items():
            # SPEC /bundles: "Each filter parameter ... should be an object specifying the operator"
            if not isinstance(condition, dict) or not set(condition) <= set(_COMPARE):
                return self._reject(f"filter {name}: {condition!r} is not {{op: value}} with op in {sorted(_COMPARE)}")
        with self.lock:
            self.searches.append(query)
            found = [o for o in self.offers.values() if all(_passes(o.get(k), c) for k, c in filters.items())]
        found.sort(key=lambda o: o["dph_total"])
        return Response(200, {"offers": found[: int(query.get("limit") or 64)]})

    def rent_problem(self, body: object) -> str:
        """Why VastAI refuses this rent body ("" when it accepts it), rule by rule."""
        if not isinstance(body, dict):
            return "the request body is a JSON object (CREATE requestBody)"
        if unknown := sorted(set(body) - _RENT_KEYS):
            return f"unknown fields in a rent body: {unknown}"
        image = body.get("image")
        if not isinstance(image, str) or not image:  # CREATE required: [image]
            return "image is required: a Docker image name"
        if len(image) > IMAGE_LIMIT:
            return _limit_error("image", IMAGE_LIMIT, len(image))
        label = body.get("label")
        if label is not None and (not isinstance(label, str) or len(label) > LABEL_LIMIT):
            return _limit_error("label", LABEL_LIMIT, len(str(label)))
        disk = body.get("disk")
        if disk is not None and (isinstance(disk, bool) or not isinstance(disk, int | float) or disk < MIN_DISK):
            return f"disk is a number of GB, at least {MIN_DISK:g}: {disk!r}"
        if body.get("runtype") is not None and body["runtype"] not in _RUNTYPES:
            return f"runtype {body['runtype']!r} is not one of {sorted(_RUNTYPES)}"
        if body.get("target_state") is not None and body["target_state"] not in _TARGET_STATES:
            return f"target_state {body['target_state']!r} is not one of {sorted(_TARGET_STATES)}"
        price = body.get("price")
        if price is not None and (isinstance(price, bool) or not isinstance(price, int | float)
                                  or not MIN_PRICE <= price <= MAX_PRICE):  # fmt: skip
            return f"price is a bid in $/hour from {MIN_PRICE} to {MAX_PRICE}: {price!r}"
        args = body.get("args")
        if args is not None and (not isinstance(args, list) or not all(isinstance(a, str) for a in args)):
            return "args is an array of strings (CREATE)"
        for name in ("args_str", "onstart"):
            if body.get(name) is not None and not isinstance(body[name], str):
                return f"{name} is a string (CREATE)"
        # CREATE: "Combined length of args, args_str and onstart"; how an array counts is not
        # said: its words joined by spaces, the larger reading
        length = len(" ".join(args or [])) + len(body.get("args_str") or "") + len(body.get("onstart") or "")
        if length > ARGS_LIMIT:
            return _limit_error("args + args_str + onstart", ARGS_LIMIT, length)
        env = body.get("env")
        if env is not None:
            # CLI create_instance sends env as an object (parse_env: "-e K=V" -> {K: V}, "-p A:B" -> {"-p A:B": "1"})
            if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                return f"env is an object of strings: {env!r}"
            for key, value in env.items():
                if not (_PORT_ENV.match(key) or _ENV_NAME.match(key)):
                    return f"env key {key!r} is neither a variable name nor '-p N:N'"
                if len(key) > ENV_LIMIT or len(value) > ENV_LIMIT:
                    return _limit_error(f"env {key[:40]}", ENV_LIMIT, max(len(key), len(value)))
            total = sum(len(k) + len(v) for k, v in env.items())
            if total > ENV_TOTAL_LIMIT:
                return _limit_error("env", ENV_TOTAL_LIMIT, total)
        return ""

    def _rent(self, offer_id: int, request: Request) -> Response:
        body = request.json()
        problem = self.rent_problem(body)
        if problem:
            return self._reject(problem, offer_id)
        # what skyward's driver always sends, beyond VastAI's own rules
        if body.get("runtype") != "args" or not body.get("args") or not body.get("label"):
            return self._reject("skyward rents with runtype='args', a start command and a label", offer_id)
        env = body.get("env") or {}
        ports = [int(m[1]) for k in env if (m := _PORT_ENV.match(k)) and m[1] == m[2]]
        if not ports:
            return self._reject(f"no '-p N:N' port is published: {env!r}", offer_id)
        with self.lock:
            market = self.offers.get(offer_id)
            if market is None or market["rented"]:
                # CREATE's 404 example, word for word but the id
                taken = f"error 404/3603: no_such_ask Instance type by id {offer_id} is not available."
                return Response(404, {"success": False, "error": "invalid_args", "ask_id": offer_id, "msg": taken})
            bid = body.get("price")
            if bid is not None and bid < market["min_bid"]:
                return Response(400, {"success": False, "error": "invalid_price", "ask_id": offer_id,
                                      "msg": f"bid below {market['min_bid']}"})  # fmt: skip
            market["rented"] = True
            ident = next(self._ids)
            command = f"#!/bin/bash\nexec {shlex.join(body['args'])}\n"
            self.instances[ident] = FakeInstance(
                ident, market, body["label"], body["image"], command, ports, bid, list(body["args"])
            )
        self.later(self.boot_delay, self._boot, ident)
        return Response(200, {"success": True, "new_contract": ident})

    def _list(self, request: Request) -> Response:
        """SPEC GET /api/v1/instances: keyset pagination over ``order_by`` (``id`` is always
        the last key), at most 25 a page, ``select_filters`` on stored columns."""
        try:
            limit = int(request.arg("limit") or PAGE_LIMIT)
            order = json.loads(request.arg("order_by") or "[]")
            filters = json.loads(request.arg("select_filters") or "{}")
        except ValueError as error:
            return self._reject(f"limit is an integer, order_by and select_filters JSON: {error}")
        limit = 5 if limit <= 0 else min(limit, PAGE_LIMIT)
        if not isinstance(order, list) or not all(isinstance(o, dict) and "col" in o for o in order):
            return self._reject(f"order_by is a JSON array of {{col, dir}}: {order!r}")
        if not isinstance(filters, dict) or any(not isinstance(c, dict) or not set(c) <= set(_COMPARE)
                                                 for c in filters.values()):  # fmt: skip
            return self._reject(f"select_filters is a JSON object of {{op: value}}: {filters!r}")
        if computed := sorted(set(filters) & _UNFILTERABLE):
            return self._reject(f"computed fields cannot be filtered: {computed}")
        with self.lock:
            rows = [i.to_json() for i in self.instances.values()]
        columns = set(rows[0]) if rows else {"id"}
        keys = [str(o["col"]) for o in order if o.get("col") != "id"]
        if unknown := [k for k in keys if k not in columns]:
            return self._reject(f"order_by names unknown columns {unknown}")
        rows = [r for r in rows if all(_passes(r.get(k), c) for k, c in filters.items())]
        rows.sort(key=lambda r: (*[str(r.get(k)) for k in keys], r["id"]))
        after = request.arg("after_token")
        if after is not None:
            try:
                last = json.loads(base64.b64decode(after, validate=True))["values"]["id"]
                start = next(n for n, r in enumerate(rows) if r["id"] == last) + 1
            except (binascii.Error, ValueError, KeyError, TypeError, StopIteration):
                # SPEC after_token: "An invalid token returns a 400 error."
                return self._reject(f"invalid after_token {after!r}")
        else:
            start = 0
        page = rows[start : start + limit]
        more = start + limit < len(rows)
        token = base64.b64encode(json.dumps({"values": {"id": page[-1]["id"]}}).encode()).decode() if more else None
        labels: dict[str, int] = {}
        for row in rows:
            labels[row.get("label") or ""] = labels.get(row.get("label") or "", 0) + 1
        return Response(200, {"success": True, "instances_found": len(page), "total_instances": len(rows),
                              "label_counts": labels, "next_token": token, "instances": page})  # fmt: skip

    def _boot(self, ident: int) -> None:
        with self.lock:
            instance = self.instances.get(ident)
            if instance is None or instance.actual_status != "loading":
                return
            address = self.address_for(str(ident)) if self.address_for is not None else self.addresses.allocate()[0]
            hook = self.on_running
        if hook is not None:
            try:
                hook(str(ident), instance.script, address)
            except Exception as exc:
                self.violation(f"on_running({ident}) failed: {exc!r}")
        mapped = self.ports.open(str(ident), address, instance.ports)
        with self.lock:
            if self.instances.get(ident) is instance and instance.actual_status == "loading":
                instance.mapped, instance.public_ipaddr, instance.actual_status = mapped, HOST, "running"
            else:
                self.ports.close(str(ident))

    def _destroy(self, ident: int) -> Response:
        with self.lock:
            instance = self.instances.pop(ident, None)
            if instance is None:  # SPEC DELETE /api/v0/instances/{id}: 404 example
                return Response(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
            instance.offer["rented"] = False
            self.destroyed.append(ident)
        self.ports.close(str(ident))
        if self.on_deleted is not None:
            self.on_deleted(str(ident))
        return Response(200, {"success": True, "msg": "Instance destroyed successfully"})
