"""What Skyward pools left on Google Cloud, as the ``skyward`` command sees it: VMs (by
the ``skyward`` label, with their pool and expiry labels) and firewall rules (named
``skyward-<pool>-<expires>-client|pool``); deleting them and checking they are gone."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from skyward.providers import FIREWALL, INSTANCE, Removal, Resource
from skyward.providers.cloud.removal import Key, delete_each, verified_removals
from skyward_gcp.api import GcpAPI, GcpAPIError
from skyward_gcp.catalog import catalog
from skyward_gcp.naming import STOPPED_STATUSES, mark_of, parse_firewall_name, pool_filter

PROVIDER = "gcp"
GLOBAL = "global"


def _time(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _price(machine_type_url: str) -> float | None:
    short = machine_type_url.rsplit("/", 1)[-1]
    prices = [m.on_demand for m in catalog().machines if m.machine_type == short and not m.attached]
    return prices[0] if prices else None


def tpu_nodes(api: GcpAPI, zones: Sequence[str]) -> list[tuple[str, Any]]:
    """``(zone, node)`` for the TPU nodes of ``zones``; a zone the TPU API does not serve
    (or a project without it enabled) has none."""
    found = []
    for zone in zones:
        try:
            found += [(zone, node) for node in api.tpus(zone)]
        except GcpAPIError as exc:
            if exc.status not in (403, 404):
                raise
    return found


def _slice_price(accelerator_type: str) -> float | None:
    prices = [t.on_demand for t in catalog().tpus if t.name == accelerator_type]
    return prices[0] if prices else None


def list_all(api: GcpAPI, zones: Sequence[str] = ()) -> list[Resource]:
    """VMs of every zone, TPU nodes of ``zones`` (the TPU API lists one zone at a time), firewall rules."""
    found: list[Resource] = []
    for zone, node in tpu_nodes(api, zones):
        mark = mark_of(dict(node.labels or {}))
        if mark is None:
            continue
        state = getattr(node.state, "name", str(node.state))
        node_id = str(node.name).rsplit("/", 1)[-1]
        found.append(
            Resource(
                provider=PROVIDER, region=zone, pool_id=mark.pool_id, kind=INSTANCE, id=f"{zone}/tpu/{node_id}",
                state=state.lower(), created=_time(str(node.create_time or "")) if node.create_time else None,
                expires_at=float(mark.expires), hourly_price=_slice_price(str(node.accelerator_type)), name=node_id,
                idle=state in STOPPED_STATUSES,
            )
        )  # fmt: skip
    for zone, vm in api.all_instances(pool_filter()):
        mark = mark_of(dict(vm.labels or {}))
        if mark is None:
            continue
        status = str(vm.status or "")
        found.append(
            Resource(
                provider=PROVIDER, region=zone, pool_id=mark.pool_id, kind=INSTANCE, id=f"{zone}/{vm.name}",
                state=status.lower(), created=_time(vm.creation_timestamp), expires_at=float(mark.expires),
                hourly_price=_price(str(vm.machine_type or "")), name=str(vm.name),
                idle=status in STOPPED_STATUSES,
            )
        )  # fmt: skip
    for rule in api.firewalls():
        mark = parse_firewall_name(str(rule.name))
        if mark is not None:
            found.append(
                Resource(
                    PROVIDER, GLOBAL, mark.pool_id, FIREWALL, str(rule.name), "present",
                    _time(rule.creation_timestamp), float(mark.expires), None, str(rule.name),
                )
            )  # fmt: skip
    return found


def delete_and_verify(api: GcpAPI, resources: Sequence[Resource], zones: Sequence[str] = ()) -> list[Removal]:
    """VMs first (a firewall rule outliving its VMs opens nothing), then firewall rules; then list again."""
    errors: dict[Key, str] = {}

    def delete_vm(resource: Resource) -> None:
        zone, _, name = resource.id.partition("/")
        if name.startswith("tpu/"):
            api.delete_tpu(zone, name.removeprefix("tpu/"))
            return
        failures = api.delete_instances([(zone, name)])
        if failures:
            raise GcpAPIError(f"deleting instance {name}", None, [], "; ".join(failures))

    deleters: dict[str, Callable[[Resource], object]] = {
        INSTANCE: delete_vm,
        FIREWALL: lambda r: api.delete_firewall(r.id),
    }
    for kind, delete in deleters.items():
        delete_each((r for r in resources if r.kind == kind), delete, GcpAPIError, errors)
    return verified_removals(resources, list_all(api, zones), errors)
