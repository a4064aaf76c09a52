"""Deleting what earlier pools left behind on Verda.

A node ends itself when its pool's TTL passes or its client has been gone too long, but
from inside it can only shut down: deleting an instance takes the API credentials, which
never reach a node. A shut-down Verda instance keeps its resources (and its OS volume)
and is treated here as still billing. So something holding the credentials deletes it:

* the pool itself, while its client lives (close, the pool's timeout, any failure):
  instances and their OS volumes are deleted, not shut down;
* this reaper, on every later pool start with the same credentials
  (``Verda(reap=True)``, the default): skyward instances (found by their description
  ``skyward pool=... expires=...``) that are shut down or past their expiry are deleted
  with their OS volumes, and the startup scripts and keys of expired pools removed;
* ``python -m skyward_verda.reaper`` (or :func:`reap`), for a cron job; ``skyward down
  --expired`` does the same for every installed provider and checks the result.

If the client dies and nothing runs again, a shut-down instance stays until someone
deletes it; its description says which pool it belonged to and when it expired.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyward.providers.cloud.naming import is_expired
from skyward.providers.cloud.reaping import delete_doomed, delete_instances, live_pools, reaper_exit
from skyward_verda import teardown
from skyward_verda.api import VerdaAPI, VerdaAPIError
from skyward_verda.config import Verda, credentials_from_env
from skyward_verda.naming import InstanceView, instances_to_reap, parse_description, parse_resource_name


@dataclass(frozen=True, slots=True)
class Reaped:
    """What one reaper run deleted, and what it could not."""

    instances: tuple[tuple[str, str, str], ...]  # (id, hostname, reason)
    """Instances deleted: ``(id, hostname, why)`` (shut down, or past their expiry)."""
    scripts: tuple[str, ...]
    """Names of the startup scripts deleted."""
    ssh_keys: tuple[str, ...]
    """Names of the SSH keys deleted."""
    failures: tuple[str, ...]
    """What could not be deleted, each with why; tried again at the next run."""


def _view(instance: dict[str, Any]) -> InstanceView:
    return InstanceView(
        id=str(instance.get("id", "")),
        hostname=str(instance.get("hostname", "")),
        status=str(instance.get("status", "")),
        description=str(instance.get("description") or ""),
        os_volume_id=str(instance["os_volume_id"]) if instance.get("os_volume_id") else None,
    )


def reap_with(
    api: VerdaAPI, now: float | None = None, own_pool: str | None = None, log: Callable[[str], None] | None = None
) -> Reaped:
    """Delete leftovers through ``api``; one failed deletion is reported, not raised."""
    now = time.time() if now is None else now
    say = log or (lambda _m: None)
    views = [_view(i) for i in api.instances()]
    failures: list[str] = []
    doomed = {item.instance.id: item for item in instances_to_reap(views, now, own_pool)}

    def delete(instance_id: str) -> None:  # with its OS volume (or the volume alone, once discontinued)
        view = doomed[instance_id].instance
        one = teardown.Doomed(view.id, view.status, view.os_volume_id)
        left = teardown.delete_instances(api, [one], attempts=1, sleep=time.sleep)
        if left:
            raise VerdaAPIError(f"delete instance {instance_id}", None, "not_deleted", "; ".join(left))

    listed = ((i.instance.id, i.instance.hostname, i.reason) for i in doomed.values())
    deleted = delete_instances(listed, delete, "instance", VerdaAPIError, failures, say)
    alive = live_pools(((v.id, parse_description(v.description)) for v in views), deleted, own_pool)

    def expired(name: str) -> bool:  # a script's or key's
        return is_expired(parse_resource_name(name), now, alive)

    scripts = delete_doomed(
        api.scripts(), expired, lambda s: api.delete_script(str(s["id"])), "startup script", VerdaAPIError, failures
    )
    keys = delete_doomed(
        api.ssh_keys(), expired, lambda k: api.delete_ssh_key(str(k["id"])), "SSH key", VerdaAPIError, failures
    )
    return Reaped(tuple(deleted), tuple(scripts), tuple(keys), tuple(failures))


def reap(config: Verda | None = None, now: float | None = None) -> Reaped:
    """Delete leftovers of earlier skyward pools for the credentials in the environment."""
    config = config or Verda()
    client_id, secret = credentials_from_env()
    api = VerdaAPI.from_config(config, client_id, secret)
    try:
        return reap_with(api, now=now, log=lambda m: print(m, file=sys.stderr))
    finally:
        api.close()


def main() -> int:
    result = reap()
    counts = [(len(result.instances), "instance"), (len(result.scripts), "startup script")]
    return reaper_exit(result.failures, [*counts, (len(result.ssh_keys), "SSH key")])


if __name__ == "__main__":
    sys.exit(main())
