"""What Skyward pools left on Verda, as the ``skyward`` command sees it: instances (their
description ``skyward pool=<id> expires=<time>``, deleted with their OS volume), startup
scripts and SSH keys (named ``skyward-<id>-<expiry>[-<node>]``); deleting them and
checking they are gone. The pool-start reaper (``reaper``) keeps its own rules (it also
takes shut-down instances of unexpired pools)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from skyward.providers import INSTANCE, SSH_KEY, STARTUP_SCRIPT, Removal, Resource, parse_number, parse_time
from skyward.providers.cloud.removal import delete_each, verified_removals
from skyward_verda.api import VerdaAPI, VerdaAPIError
from skyward_verda.naming import DEAD, parse_description, parse_resource_name
from skyward_verda.teardown import Doomed, delete_instances

PROVIDER = "verda"
GLOBAL = "global"


def resource_of_instance(raw: dict[str, Any]) -> Resource | None:
    mark = parse_description(str(raw.get("description") or ""))
    if mark is None:
        return None
    price = raw.get("price_per_hour")
    return Resource(
        provider=PROVIDER,
        region=str(raw.get("location", "")),
        pool_id=mark.pool_id,
        kind=INSTANCE,
        id=str(raw.get("id", "")),
        state=str(raw.get("status", "")),
        created=parse_time(raw.get("created_at")),
        expires_at=float(mark.expires),
        hourly_price=parse_number(price),
        name=str(raw.get("hostname", "")),
        idle=str(raw.get("status", "")) in DEAD,  # shut down: it and its disk still bill
    )


def _named(kind: str, raw: dict[str, Any]) -> Resource | None:
    name = str(raw.get("name", ""))
    mark = parse_resource_name(name)
    if mark is None:
        return None
    ident = str(raw.get("id", ""))
    return Resource(
        PROVIDER,
        GLOBAL,
        mark.pool_id,
        kind,
        ident,
        "present",
        parse_time(raw.get("created_at")),
        float(mark.expires),
        None,
        name,
    )


def list_all(api: VerdaAPI) -> list[Resource]:
    found = [r for r in (resource_of_instance(i) for i in api.instances()) if r is not None]
    found += [r for r in (_named(STARTUP_SCRIPT, s) for s in api.scripts()) if r is not None]
    found += [r for r in (_named(SSH_KEY, k) for k in api.ssh_keys()) if r is not None]
    return found


def delete_and_verify(api: VerdaAPI, resources: Sequence[Resource]) -> list[Removal]:
    """Delete instances (with their OS volumes: a kept disk bills), then scripts and keys;
    then list again."""
    listed = {str(i.get("id")): Doomed.of(i) for i in api.instances()}

    def delete_instance(resource: Resource) -> None:
        doomed = listed.get(resource.id, Doomed(resource.id, resource.state, None))
        left = delete_instances(api, [doomed], attempts=1, sleep=time.sleep)
        if left:
            raise VerdaAPIError(f"delete instance {resource.id}", None, "not_deleted", "; ".join(left))

    def delete_other(resource: Resource) -> None:
        if resource.kind == STARTUP_SCRIPT:
            api.delete_script(resource.id)
        else:
            api.delete_ssh_key(resource.id)

    errors = delete_each((r for r in resources if r.kind == INSTANCE), delete_instance, VerdaAPIError)
    delete_each((r for r in resources if r.kind in (STARTUP_SCRIPT, SSH_KEY)), delete_other, VerdaAPIError, errors)
    return verified_removals(resources, list_all(api), errors)
