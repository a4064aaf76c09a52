"""The part of the fake Verda API that ends things: instance actions (``PUT /instances``
with its 202/207 per-instance results), volume deletion, a spot instance taken back, and
the paginated startup-script listing. Mixed into :class:`fakes.verda.FakeVerda`; the rules
and their sources are listed in that module's docstring."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fakes.http import Request, Response

SCRIPTS_DEFAULT_PAGE, SCRIPTS_MAX_PAGE = 10, 100  # GET /scripts page sizes (notes 2026-03-30)
_ACTIONS = {  # go ``Action*`` constants (pkg/verda/instances_types.go)
    "boot", "start", "shutdown", "delete", "discontinue", "hibernate", "configure_spot", "force_shutdown",
    "delete_stuck", "deploy", "transfer",
}  # fmt: skip


def verda_error(status: int, code: str, message: str) -> Response:
    """Verda's error body (go ``APIError``: ``code`` and ``message``)."""
    return Response(status, {"code": code, "message": message})


@dataclass
class FakeInstance:
    id: str
    instance_type: dict[str, Any]
    image: str
    hostname: str
    description: str
    location: str
    ssh_key_ids: list[str]
    startup_script_id: str | None
    is_spot: bool
    os_volume_id: str
    created_at: float
    status: str = "ordered"
    ip: str | None = None
    history: list[str] = field(default_factory=lambda: ["ordered"])

    def to_json(self) -> dict[str, Any]:
        kind = self.instance_type
        return {
            "id": self.id,
            "instance_type": kind["instance_type"],
            "image": self.image,
            "price_per_hour": float(kind["spot_price"] if self.is_spot else kind["price_per_hour"]),
            "hostname": self.hostname,
            "description": self.description,
            "ip": self.ip,
            "status": self.status,
            "created_at": datetime.fromtimestamp(self.created_at, UTC).isoformat(),
            "ssh_key_ids": list(self.ssh_key_ids),
            "cpu": kind["cpu"],
            "gpu": kind["gpu"],
            "memory": kind["memory"],
            "storage": kind["storage"],
            "gpu_memory": kind["gpu_memory"],
            "os_volume_id": self.os_volume_id,
            "location": self.location,
            "startup_script_id": self.startup_script_id,
            "is_spot": self.is_spot,
            "contract": "SPOT" if self.is_spot else "PAY_AS_YOU_GO",
            "pricing": "DYNAMIC_PRICE" if self.is_spot else "FIXED_PRICE",
        }


class VerdaLifecycle:
    """Handlers of :class:`fakes.verda.FakeVerda` that delete, discontinue and list scripts."""

    lock: threading.RLock
    instances: dict[str, FakeInstance]
    volumes: dict[str, str]
    scripts: dict[str, dict[str, str]]
    refusals: dict[str, list[tuple[int, str]]]
    on_deleted: Callable[[str], None] | None

    if TYPE_CHECKING:  # FakeVerda's: records the violation, answers Verda's error body

        def _reject(self, why: str, status: int = 400, code: str = "invalid_request") -> Response: ...

    def discontinue(self, instance_id: str) -> None:
        """Verda takes a spot instance back: ``discontinued``, its OS volume kept detached
        (and billed) under the default ``on_spot_discontinue`` policy."""
        with self.lock:
            instance = self.instances[instance_id]
            instance.status = "discontinued"
            instance.history.append("discontinued")
            self.volumes[instance.os_volume_id] = "detached"

    def refuse_action(
        self, instance_id: str, status_code: int = 409, error: str = "instance is busy", times: int = 1
    ) -> None:
        """The next ``times`` ``PUT /instances`` naming this instance fail for it alone (a 207)."""
        with self.lock:
            self.refusals.setdefault(instance_id, []).extend([(status_code, error)] * times)

    def _list_scripts(self, request: Request) -> Response:
        try:
            page = int(request.arg("page") or 1)
            size = int(request.arg("pageSize") or SCRIPTS_DEFAULT_PAGE)
        except ValueError:
            return self._reject("page and pageSize must be integers")
        if page < 1 or not 1 <= size <= SCRIPTS_MAX_PAGE:
            return self._reject(f"page={page} pageSize={size}: pageSize is 1-{SCRIPTS_MAX_PAGE}")
        ordered = list(self.scripts.values())  # in the order they were added
        headers = {"X-Page": str(page), "X-Page-Size": str(size), "X-Total-Count": str(len(ordered))}
        return Response(200, ordered[(page - 1) * size : page * size], headers=headers)

    def _volume_action(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict) or body.get("action") != "delete" or "id" not in body:
            return self._reject("this fake knows the volume action {id, action: delete, is_permanent} only")
        ids = body["id"] if isinstance(body["id"], list) else [body["id"]]
        if any(self.volumes.get(v) in (None, "deleted") for v in ids):
            return verda_error(404, "not_found", "Volume not found")
        if any(self.volumes[v] == "attached" for v in ids):
            return self._reject("a volume attached to an instance cannot be deleted")
        for volume in ids:
            self.volumes[volume] = "deleted" if body.get("is_permanent") is True else "trash"
        return Response(202)

    def _action(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict) or "id" not in body or "action" not in body:
            return self._reject("an instance action is {id, action[, volume_ids, delete_permanently]}")
        unknown = set(body) - {"id", "action", "volume_ids", "delete_permanently"}
        if unknown:
            return self._reject(f"unknown instance action fields {sorted(unknown)}")
        action = body["action"]
        if action not in _ACTIONS:
            return self._reject(f"action {action!r}: one of {sorted(_ACTIONS)}")
        ids = body["id"] if isinstance(body["id"], list) else [body["id"]]
        if not ids or not all(isinstance(i, str) for i in ids):
            return self._reject("id must name at least one instance")
        if "delete_permanently" in body and not isinstance(body["delete_permanently"], bool):
            return self._reject("delete_permanently must be a boolean")
        targets = [self.instances.get(i) for i in ids]
        if all(t is None or t.status == "deleted" for t in targets):
            return verda_error(404, "not_found", "Instance not found")
        volume_ids = body.get("volume_ids")
        own_volumes = {t.os_volume_id for t in targets if t is not None}
        if volume_ids is not None and any(v not in own_volumes for v in volume_ids):
            return self._reject("volume_ids must be volumes of the instances acted on")
        results: list[dict[str, Any]] = []
        for ident, instance in zip(ids, targets, strict=True):
            queued = self.refusals.get(ident) or []
            refusal = queued.pop(0) if queued else None
            if instance is None or instance.status == "deleted":
                refusal = (404, "instance not found")
            if refusal is not None:
                code, error = refusal
                results.append({"action": action, "instanceId": ident, "status": "error", "error": error,
                                "statusCode": code})  # fmt: skip
                continue
            assert instance is not None
            results.append({"action": action, "instanceId": ident, "status": "success"})
            if action == "delete":
                self._delete(instance, volume_ids, body.get("delete_permanently") is True)
            elif action in ("shutdown", "force_shutdown") and instance.status == "running":
                instance.status = "offline"
                instance.history.append("offline")
        failed = any(r["status"] == "error" for r in results)
        return Response(207 if failed else 202, results)

    def _delete(self, instance: FakeInstance, volume_ids: list[str] | None, permanently: bool) -> None:
        instance.status = "deleted"
        instance.history.append("deleted")
        if self.volumes.get(instance.os_volume_id) == "attached":
            named = volume_ids is None or instance.os_volume_id in volume_ids  # omitted: the OS volume goes
            if not named:
                self.volumes[instance.os_volume_id] = "detached"  # kept, and billed
            elif permanently and volume_ids is not None:
                self.volumes[instance.os_volume_id] = "deleted"
            else:
                self.volumes[instance.os_volume_id] = "trash"  # restorable for 96 h; its billing is undocumented
        if self.on_deleted is not None:
            threading.Thread(target=self.on_deleted, args=(instance.id,), daemon=True).start()
