"""Listing for the fake Compute Engine API: the catalog's resources (zones, regions with their
quotas, machine types, accelerator types, public images) as Compute writes them, list filters,
pages and aggregated lists. Mixed into :class:`fakes.gcp.FakeGCP`, whose docstring lists the
rules enforced and their sources."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fakes.gcp_catalog import (
    ACCELERATOR_TYPES,
    DEFAULT_QUOTAS,
    GLOBAL_QUOTAS,
    IMAGE_FAMILIES,
    MACHINE_TYPES,
    REGIONS,
    ZONES,
)
from fakes.gcp_compute import COMPUTE, FakeInstance
from fakes.http import Request, Response

_TERM = re.compile(r'^\(?\s*([A-Za-z][\w.\-]*)\s*(=|!=|:|\beq\b|\bne\b)\s*"?(.*?)"?\s*\)?$')
MAX_RESULTS = 500


class ListingHandlers:
    project: str
    quotas: dict[tuple[str, str], float]
    instances: dict[int, FakeInstance]

    if TYPE_CHECKING:  # FakeGCP provides these

        def _reject(self, code: int, why: str, reason: str | None = None) -> Response: ...

        def quota_usage(self, region: str) -> dict[str, float]: ...

    # -- catalog and listing ------------------------------------------------------------

    def _zone(self, zone: str) -> dict[str, Any]:
        base = f"{COMPUTE}/projects/{self.project}"
        return {
            "kind": "compute#zone", "id": str(2000 + list(ZONES).index(zone)), "name": zone, "description": zone,
            "status": "UP", "region": f"{base}/regions/{ZONES[zone].region}", "selfLink": f"{base}/zones/{zone}",
            "availableCpuPlatforms": ["Intel Broadwell", "Intel Cascade Lake", "AMD Milan"],
        }  # fmt: skip

    def _region(self, region: str) -> dict[str, Any]:
        base, usage = f"{COMPUTE}/projects/{self.project}", self.quota_usage(region)
        quotas = [
            {"metric": m, "limit": self.quotas.get((region, m), limit), "usage": usage.get(m, 0.0)}
            for m, limit in DEFAULT_QUOTAS.items()
        ]
        zones = [f"{base}/zones/{z}" for z, spec in ZONES.items() if spec.region == region]
        return {
            "kind": "compute#region", "id": str(1000 + REGIONS.index(region)), "name": region, "status": "UP",
            "zones": zones, "quotas": quotas, "selfLink": f"{base}/regions/{region}",
        }  # fmt: skip

    def _machine_type(self, zone: str, name: str) -> dict[str, Any]:
        spec = MACHINE_TYPES[name]
        body: dict[str, Any] = {
            "kind": "compute#machineType", "id": str(abs(hash(name)) % 10**9), "name": name,
            "description": f"{spec.cpus} vCPUs, {spec.memory_mb / 1024:g} GB RAM", "guestCpus": spec.cpus,
            "memoryMb": spec.memory_mb, "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168",
            "zone": zone, "isSharedCpu": False,
            "selfLink": f"{COMPUTE}/projects/{self.project}/zones/{zone}/machineTypes/{name}",
        }  # fmt: skip
        if spec.gpus is not None:
            body["accelerators"] = [{"guestAcceleratorType": spec.gpus[0], "guestAcceleratorCount": spec.gpus[1]}]
        return body

    def _accelerator(self, zone: str, name: str) -> dict[str, Any]:
        spec, base = ACCELERATOR_TYPES[name], f"{COMPUTE}/projects/{self.project}/zones/{zone}"
        return {
            "kind": "compute#acceleratorType", "id": str(10000 + list(ACCELERATOR_TYPES).index(name)), "name": name,
            "description": spec.description, "zone": base, "maximumCardsPerInstance": spec.max_cards,
            "selfLink": f"{base}/acceleratorTypes/{name}",
        }  # fmt: skip

    def project_json(self) -> dict[str, Any]:
        """``projects.get``: the project with its project-wide quotas."""
        usage = self.quota_usage("global")
        quotas = [
            {"metric": m, "limit": self.quotas.get(("global", m), limit), "usage": usage.get(m, 0.0)}
            for m, limit in GLOBAL_QUOTAS.items()
        ]
        return {
            "kind": "compute#project", "id": "8130216937291", "name": self.project, "quotas": quotas,
            "defaultNetworkTier": "PREMIUM", "selfLink": f"{COMPUTE}/projects/{self.project}",
        }  # fmt: skip

    def image(self, project: str, name: str, family: bool) -> dict[str, Any] | None:
        """A public image (``family``: the family's newest) as ``images.get``/``getFromFamily`` answer."""
        families = IMAGE_FAMILIES.get(project, ())
        chosen = name if family else next((f for f in families if name.startswith(f)), None)
        if chosen not in families:
            return None
        image = name if not family else f"{name}-v20251111"
        return {
            "kind": "compute#image", "id": str(abs(hash(image)) % 10**12), "name": image, "family": chosen,
            "status": "READY", "diskSizeGb": "10" if project != "deeplearning-platform-release" else "50",
            "architecture": "X86_64", "selfLink": f"{COMPUTE}/projects/{project}/global/images/{image}",
        }  # fmt: skip

    def _instances_in(self, zone: str) -> list[dict[str, Any]]:
        return [i.to_json(self.project) for i in self.instances.values() if i.zone == zone and not i.deleted]

    def _filtered(self, request: Request, items: list[dict[str, Any]]) -> list[dict[str, Any]] | Response:
        expression = (request.arg("filter") or "").strip()
        if not expression:
            return items
        terms = [t for t in re.split(r"\s+AND\s+|\)\s*\(", expression) if t.strip()]
        parsed = [_TERM.match(t.strip()) for t in terms]
        if any(p is None for p in parsed) or re.search(r"\b(OR|NOT)\b", expression):
            return self._reject(400, f"Invalid value for field 'filter': '{expression}' (or a form this fake lacks)")

        def value(item: dict[str, Any], name: str) -> Any:
            if name.startswith("labels."):
                return (item.get("labels") or {}).get(name.removeprefix("labels."))
            return item.get(name)

        def holds(item: dict[str, Any], name: str, op: str, wanted: str) -> bool:
            found = value(item, name)
            if op == ":":
                return found is not None and (wanted == "*" or wanted in str(found))
            if op in ("eq", "ne"):
                return (found is not None and re.fullmatch(wanted, str(found)) is not None) == (op == "eq")
            return (str(found) == wanted if found is not None else False) == (op == "=")

        groups = [p.groups() for p in parsed if p is not None]
        return [i for i in items if all(holds(i, name, op, wanted) for name, op, wanted in groups)]

    def _list(self, request: Request, kind: str, items: list[dict[str, Any]]) -> Response:
        chosen = self._filtered(request, items)
        if isinstance(chosen, Response):
            return chosen
        try:
            size = int(request.arg("maxResults") or MAX_RESULTS)
            start = int(request.arg("pageToken") or 0)
        except ValueError:
            return self._reject(400, "Invalid value for maxResults or pageToken")
        if not 0 <= size <= MAX_RESULTS:
            return self._reject(400, f"Invalid value for field 'maxResults': {size}. Must be between 0 and 500.")
        size = size or MAX_RESULTS
        body: dict[str, Any] = {"kind": kind, "id": f"projects/{self.project}", "selfLink": request.path}
        page = chosen[start : start + size]
        if page:
            body["items"] = page
        if start + size < len(chosen):
            body["nextPageToken"] = str(start + size)
        return Response(200, body)

    def _aggregated(self, request: Request, key: str, of: Callable[[str], list[dict[str, Any]]]) -> Response:
        items: dict[str, Any] = {}
        for zone in ZONES:
            chosen = self._filtered(request, of(zone))
            if isinstance(chosen, Response):
                return chosen
            scope = f"zones/{zone}"
            if chosen:
                items[scope] = {key: chosen}
            else:
                message = f"There are no results for scope '{scope}' on this page."
                items[scope] = {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": message,
                                            "data": [{"key": "scope", "value": scope}]}}  # fmt: skip
        return Response(
            200, {"kind": f"compute#{key[:-1]}AggregatedList", "id": f"projects/{self.project}", "items": items}
        )
