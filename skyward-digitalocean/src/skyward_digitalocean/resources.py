"""What Skyward pools left on DigitalOcean, as the ``skyward`` command sees it: droplets
(by the ``skyward`` tag and ``skyward-pool:<id>:<expiry>``), firewalls and SSH keys
(named ``skyward-<id>-<expiry>``) and the pool tags; deleting them and checking they are
gone. The pool-start reaper (``reaper``) keeps its own, stricter rules (it also takes
powered-off droplets of unexpired pools)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyward.cli.model import FIREWALL, INSTANCE, SSH_KEY, TAG, Removal, Resource, parse_time
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError
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
        hourly_price=float(price) if isinstance(price, int | float) else None,
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


def list_all(api: DigitalOceanAPI) -> list[Resource]:
    """Droplets first (GPU droplets are listed on their own too: the tag listing may
    leave them out), then firewalls, SSH keys and pool tags."""
    droplets: dict[str, Resource] = {}
    for raw in [*api.droplets_tagged(COMMON_TAG), *api.gpu_droplets()]:
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
    return found


def delete_and_verify(api: DigitalOceanAPI, resources: Sequence[Resource]) -> list[Removal]:
    """Delete droplets, then firewalls, keys and tags; then list again."""
    errors: dict[tuple[str, str], str] = {}
    order = (INSTANCE, FIREWALL, SSH_KEY, TAG)
    for kind in order:
        for resource in (r for r in resources if r.kind == kind):
            try:
                if kind == INSTANCE:
                    api.delete_droplet(int(resource.id))
                elif kind == FIREWALL:
                    api.delete_firewall(resource.id)
                elif kind == SSH_KEY:
                    api.delete_ssh_key(resource.id)
                else:
                    api.delete_tag(resource.id)
            except DigitalOceanAPIError as error:
                errors[(resource.kind, resource.id)] = str(error)
    left = {(r.kind, r.id) for r in list_all(api)}
    removals = []
    for resource in resources:
        key = (resource.kind, resource.id)
        if key in left:
            removals.append(Removal(resource, False, errors.get(key, "still listed after the deletion was asked for")))
        else:
            removals.append(Removal(resource, True))
    return removals
