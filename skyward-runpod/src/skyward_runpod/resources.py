"""What Skyward pools left on RunPod, for the ``skyward`` command and the pool-start
sweep: pods named ``skyward-<pool>-<expiry>-<node>`` (RunPod has no tags; the name is the
mark). Nothing else is made there (no keys, no volumes, no firewalls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyward.providers import INSTANCE, Removal, Resource, parse_number
from skyward.providers.cloud.http import APIError
from skyward.providers.cloud.marketplace import parse_pool_label
from skyward.providers.cloud.removal import delete_each, reap_containers, verified_removals
from skyward_runpod.api import RunPodAPI

PROVIDER = "runpod"


def resource_of(raw: dict[str, Any]) -> Resource | None:
    mark = parse_pool_label(str(raw.get("name") or ""))
    if mark is None or raw.get("desiredStatus") == "TERMINATED":
        return None
    price = raw.get("costPerHr")
    return Resource(
        provider=PROVIDER,
        region="runpod",
        pool_id=mark.pool_id,
        kind=INSTANCE,
        id=str(raw.get("id")),
        state=str(raw.get("desiredStatus") or ""),
        created=None,
        expires_at=float(mark.expires),
        hourly_price=parse_number(price),
        name=str(raw.get("name")),
        idle=raw.get("desiredStatus") == "EXITED",  # a stopped pod still bills its disk
    )


def list_all(api: RunPodAPI) -> list[Resource]:
    return [r for r in (resource_of(raw) for raw in api.pods()) if r is not None]


def delete_and_verify(api: RunPodAPI, resources: Sequence[Resource]) -> list[Removal]:
    errors = delete_each(resources, lambda r: api.terminate(r.id), APIError)
    return verified_removals(resources, list_all(api), errors, "still listed after the termination was asked for")


def reap_with(api: RunPodAPI, now: float, own_pool: str | None) -> list[str]:
    """Terminate other pools' pods that are stopped or past their expiry; returns what
    was done (and what failed), in words. One failed terminate does not stop the rest."""
    return reap_containers(
        list_all(api), api.terminate, APIError, now, own_pool, thing="RunPod pod", verb="terminate", done="terminated"
    )
