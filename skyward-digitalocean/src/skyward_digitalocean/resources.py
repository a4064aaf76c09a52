"""What Skyward pools left on DigitalOcean, as the ``skyward`` command sees it: droplets
(by the ``skyward`` tag and ``skyward-pool:<id>:<expiry>``), firewalls and SSH keys
(named ``skyward-<id>-<expiry>``), the pool tags, and baked snapshots (pool id ``baked``,
skyward_digitalocean.baking); deleting them and checking they are gone. The pool-start
reaper (``reaper``) keeps its own, stricter rules (it also takes powered-off droplets of
unexpired pools)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from skyward.providers import (
    BAKED_IMAGE,
    FIREWALL,
    INSTANCE,
    SSH_KEY,
    TAG,
    Removal,
    Resource,
    baked_resource,
    parse_number,
    parse_time,
)
from skyward.providers.cloud.removal import Key, delete_each, verified_removals
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError
from skyward_digitalocean.baking import SNAPSHOT_PRICE_GB_MONTH, as_baked, is_skywards, unused_label_tags
from skyward_digitalocean.naming import COMMON_TAG, parse_pool_tag, parse_resource_name, pool_mark

PROVIDER = "digitalocean"
GLOBAL = "global"


def resource_of_droplet(droplet: dict[str, Any]) -> Resource | None:
    tags = [str(t) for t in droplet.get("tags") or ()]
    mark = pool_mark(tags)
    if COMMON_TAG not in tags or mark is None:
        return None
    size = droplet.get("size") or {}
    price = size.get("price_hourly")
    region = droplet.get("region") or {}
    return Resource(
        provider=PROVIDER,
        region=str(region.get("slug", "")) if isinstance(region, dict) else str(region),
        pool_id=mark.pool_id,
        kind=INSTANCE,
        id=str(droplet["id"]),
        state=str(droplet.get("status", "")),
        created=parse_time(droplet.get("created_at")),
        expires_at=float(mark.expires),
        hourly_price=parse_number(price),
        name=str(droplet.get("name", "")),
        idle=droplet.get("status") == "off",  # a powered-off droplet still bills
    )


def _named(kind: str, ident: str, name: str, created: object) -> Resource | None:
    mark = parse_resource_name(name)
    if mark is None:
        return None
    return Resource(
        PROVIDER, GLOBAL, mark.pool_id, kind, ident, "present", parse_time(created), float(mark.expires), None, name
    )


def list_baked(api: DigitalOceanAPI) -> list[Resource]:
    """Baked snapshots, each in the first region that holds it, priced by its size."""
    return [
        baked_resource(PROVIDER, str((s.get("regions") or [GLOBAL])[0]), as_baked(s), SNAPSHOT_PRICE_GB_MONTH)
        for s in api.droplet_snapshots()
        if is_skywards(s)
    ]


def list_all(api: DigitalOceanAPI) -> list[Resource]:
    """Droplets first (GPU droplets included: :meth:`DigitalOceanAPI.droplets_tagged`),
    then firewalls, SSH keys, pool tags and baked snapshots."""
    droplets: dict[str, Resource] = {}
    for raw in api.droplets_tagged(COMMON_TAG):
        item = resource_of_droplet(raw)
        if item is not None:
            droplets.setdefault(item.id, item)
    found: list[Resource] = list(droplets.values())
    for firewall in api.firewalls():
        item = _named(FIREWALL, str(firewall["id"]), str(firewall.get("name", "")), firewall.get("created_at"))
        if item is not None:
            found.append(item)
    for key in api.ssh_keys():
        item = _named(SSH_KEY, str(key["id"]), str(key.get("name", "")), None)
        if item is not None:
            found.append(item)
    for tag in api.tags():
        name = str(tag.get("name", ""))
        mark = parse_pool_tag(name)
        if mark is not None:
            found.append(
                Resource(PROVIDER, GLOBAL, mark.pool_id, TAG, name, "present", None, float(mark.expires), None)
            )
    return [*found, *list_baked(api)]


def delete_and_verify(api: DigitalOceanAPI, resources: Sequence[Resource]) -> list[Removal]:
    """Delete droplets, then firewalls, keys and tags (a firewall or tag still held by a
    droplet cannot go first), then baked snapshots and the label tags they leave unused;
    then list again."""
    deleters: dict[str, Callable[[Resource], object]] = {
        INSTANCE: lambda r: api.delete_droplet(int(r.id)),
        FIREWALL: lambda r: api.delete_firewall(r.id),
        SSH_KEY: lambda r: api.delete_ssh_key(r.id),
        TAG: lambda r: api.delete_tag(r.id),
        BAKED_IMAGE: lambda r: api.delete_snapshot(r.id),
    }
    errors: dict[Key, str] = {}
    for kind, delete in deleters.items():
        delete_each((r for r in resources if r.kind == kind), delete, DigitalOceanAPIError, errors)
    if any(r.kind == BAKED_IMAGE for r in resources):
        for tag in unused_label_tags(api):  # free, but clutter the account's tag list
            try:
                api.delete_tag(tag)
            except DigitalOceanAPIError:
                pass  # a tag bills nothing: what is left is listed by nobody and harms nothing
    return verified_removals(resources, list_all(api), errors)
