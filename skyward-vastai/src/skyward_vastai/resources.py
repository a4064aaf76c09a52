"""What Skyward pools left on VastAI, for the ``skyward`` command and the pool-start
sweep: instances carrying a ``skyward-<pool>-<expiry>-<node>`` label (VastAI has no tags;
the label is the mark). Nothing else is made there (no keys, no firewalls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyward.providers import INSTANCE, Removal, Resource, parse_number
from skyward.providers.cloud import InstanceState
from skyward.providers.cloud.http import APIError
from skyward.providers.cloud.marketplace import parse_pool_label
from skyward.providers.cloud.removal import delete_each, reap_containers, verified_removals
from skyward_vastai.api import VastAPI
from skyward_vastai.status import state_of

PROVIDER = "vastai"


def resource_of(raw: dict[str, Any]) -> Resource | None:
    mark = parse_pool_label(str(raw.get("label") or ""))
    if mark is None:
        return None
    price = raw.get("dph_total")
    start = raw.get("start_date")
    return Resource(
        provider=PROVIDER,
        region=str(raw.get("geolocation") or ""),
        pool_id=mark.pool_id,
        kind=INSTANCE,
        id=str(raw.get("id")),
        state=str(raw.get("actual_status") or ""),
        created=parse_number(start),
        expires_at=float(mark.expires),
        hourly_price=parse_number(price),
        name=str(raw.get("label")),
        idle=state_of(raw, True) is InstanceState.STOPPED,  # stopped: its disk still bills
    )


def list_all(api: VastAPI) -> list[Resource]:
    return [r for r in (resource_of(raw) for raw in api.instances()) if r is not None]


def delete_and_verify(api: VastAPI, resources: Sequence[Resource]) -> list[Removal]:
    errors = delete_each(resources, lambda r: api.destroy(r.id), APIError)
    return verified_removals(resources, list_all(api), errors, "still listed after the destroy was asked for")


def reap_with(api: VastAPI, now: float, own_pool: str | None) -> list[str]:
    """Destroy other pools' instances that are stopped or past their expiry; returns what
    was done (and what failed), in words. One failed destroy does not stop the rest."""
    return reap_containers(
        list_all(api), api.destroy, APIError, now, own_pool, thing="VastAI instance", verb="destroy", done="destroyed"
    )
