"""A stateful fake of VastAI's REST API v0 (the parts skyward-vastai uses).

Shapes follow the API the official ``vastai`` CLI calls: ``POST /bundles/`` with a
search query (``{"field": {"op": value}}`` filters, ``order``, ``limit``, ``type``)
answering ``{"offers": [...]}``; ``PUT /asks/<offer id>/`` renting an offer
(``client_id``, ``image``, ``disk``, ``label``, ``runtype``, ``args``, ``env`` with
``"-p N:N"`` port entries, ``price`` for an interruptible bid) answering
``{"success": true, "new_contract": <instance id>}`` or ``no_such_ask`` for an offer
someone else rented; ``GET /instances/`` with ``actual_status``, ``intended_status``,
``public_ipaddr`` and Docker-shaped ``ports``; ``DELETE /instances/<id>/``.

Every call must carry ``Authorization: Bearer <key>`` (401 otherwise; a key in the URL
is also a violation). A rented instance is ``loading`` for ``boot_delay`` seconds, then
``running``: its start command's script runs on the emulated-instance harness and each
requested container port is published on a different host port (tests/fakes/portmap).
Test controls: ``fail``/``slow`` (FakeHTTPServer), ``rate_limit``, ``outbid`` (the
instance stops, as VastAI does to a bid that was beaten), ``offers`` (the market).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fakes.http import Request, Response
from fakes.portmap import HOST, FakeContainerCloud
from skyward.providers.cloud.marketplace import script_of

API_KEY = "vast-fake-key-6f1c0d5e9a8b7c6d5e4f3a2b1c0d9e8f"
PREFIX = "/api/v0"
_PORT_ENV = re.compile(r"^-p (\d{1,5}):(\d{1,5})$")
_RENT_KEYS = {"client_id", "image", "disk", "label", "runtype", "args", "env", "price", "onstart"}


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
    script: str
    ports: list[int]
    bid: float | None
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
        self.fail(method, path, 429, {"success": False, "error": "rate_limited", "msg": "slow down"}, times=times,
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
        unauthorized = Response(401, {"success": False, "error": "auth_error", "msg": "Invalid user key"})
        if (refused := self.admit(request, unauthorized)) is not None:
            return refused
        path = request.path.removeprefix(PREFIX)
        if request.method == "POST" and path == "/bundles/":
            return self._search(request)
        if request.method == "GET" and path == "/instances/":
            with self.lock:
                return Response(200, {"instances": [i.to_json() for i in self.instances.values()]})
        if (match := re.fullmatch(r"/asks/(\d+)/", path)) and request.method == "PUT":
            return self._rent(int(match[1]), request)
        if (match := re.fullmatch(r"/instances/(\d+)/", path)) and request.method == "DELETE":
            return self._destroy(int(match[1]))
        return Response(404, {"success": False, "error": "not_found", "msg": f"{request.method} {request.path}"})

    def _reject(self, why: str) -> Response:
        self.violation(why)
        return Response(400, {"success": False, "error": "invalid_args", "msg": why})

    def _search(self, request: Request) -> Response:
        query = request.json()
        if not isinstance(query, dict) or query.get("type") not in ("on-demand", "bid", "reserved"):
            return self._reject(f"a search query is a JSON object with a type: {query!r}")
        filters = {k: v for k, v in query.items() if k not in ("order", "limit", "type")}
        for name, condition in filters.items():
            if not isinstance(condition, dict) or not set(condition) <= set(_COMPARE):
                return self._reject(f"filter {name}: {condition!r} is not {{op: value}}")
        with self.lock:
            self.searches.append(query)
            found = [o for o in self.offers.values() if all(_passes(o.get(k), c) for k, c in filters.items())]
        found.sort(key=lambda o: o["dph_total"])
        return Response(200, {"offers": found[: int(query.get("limit") or 64)]})

    def _rent(self, offer_id: int, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict) or not set(body) <= _RENT_KEYS:
            return self._reject(f"unknown fields in a rent body: {sorted(set(body or {}) - _RENT_KEYS)}")
        if body.get("client_id") != "me" or not isinstance(body.get("image"), str) or body.get("runtype") != "args":
            return self._reject("a rent needs client_id='me', an image and runtype='args'")
        args = body.get("args")
        script = script_of(args) if isinstance(args, list) and all(isinstance(a, str) for a in args) else None
        if script is None or not script.startswith("#!"):
            return self._reject("args must be the start command carrying a #! script")
        env = body.get("env") or {}
        ports = [int(m[1]) for k in env if (m := _PORT_ENV.match(k)) and m[1] == m[2]]
        if len(ports) != len(env) or not ports:
            return self._reject(f"env must be '-p N:N' port entries: {env!r}")
        if not isinstance(body.get("disk"), int | float) or not isinstance(body.get("label"), str):
            return self._reject("disk (GB) and label are required")
        with self.lock:
            market = self.offers.get(offer_id)
            if market is None or market["rented"]:
                return Response(400, {"success": False, "error": "no_such_ask",
                                      "msg": f"Instance type {offer_id} no longer available"})  # fmt: skip
            bid = body.get("price")
            if bid is not None and (not isinstance(bid, int | float) or bid < market["min_bid"]):
                return Response(
                    400, {"success": False, "error": "invalid_price", "msg": f"bid below {market['min_bid']}"}
                )
            market["rented"] = True
            ident = next(self._ids)
            self.instances[ident] = FakeInstance(ident, market, body["label"], body["image"], script, ports, bid)
        self.later(self.boot_delay, self._boot, ident)
        return Response(200, {"success": True, "new_contract": ident})

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
            if instance is None:
                return Response(404, {"success": False, "error": "no_such_instance", "msg": "not found"})
            instance.offer["rented"] = False
            self.destroyed.append(ident)
        self.ports.close(str(ident))
        if self.on_deleted is not None:
            self.on_deleted(str(ident))
        return Response(200, {"success": True})
