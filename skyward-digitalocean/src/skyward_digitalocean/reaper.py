"""Deleting what earlier pools left behind, because a powered-off droplet still bills.

Why this exists: a node ends itself when its pool's TTL passes or its client has been
gone too long, but on DigitalOcean it can only *power off*: deleting a droplet takes an
API token, and the token must never reach a droplet (user-data is readable by anything on
the node, and DO has no token scoped to one droplet). DigitalOcean also has no
"delete on shutdown" or auto-destroy setting for droplets. So a powered-off node keeps
billing until something holding the token deletes it.

What deletes it, and what each path guarantees:

* the pool itself, while its client lives: ``close()``, the pool's own timeout and any
  failure delete every droplet (not stop: delete), then sweep by the pool's tag;
* this reaper, on every later pool start from any client with the same account
  (``DigitalOcean(reap=True)``, the default): skyward droplets that are powered off,
  or whose pool's expiry tag has passed, are deleted; so are the firewall, SSH key and
  tag of a pool once its expiry has passed and none of its droplets is left;
* ``python -m skyward_digitalocean.reaper`` (or :func:`reap`), for a cron job or CI
  schedule: the same, without starting a pool. ``skyward down --expired`` does the same
  for every installed provider and checks the result (see docs/cli.md).

What it does not guarantee: if the client dies and no pool is started again and no
scheduled reaper runs, a powered-off droplet bills until someone deletes it (its tags
``skyward`` and ``skyward-pool:<id>:<expiry>`` make it easy to find:
``doctl compute droplet delete --tag-name skyward-pool:...``). A server-side reaper
(a scheduled DigitalOcean Function holding a token) would close that gap; it is not
built here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyward.providers.cloud.naming import is_expired
from skyward.providers.cloud.reaping import delete_doomed, delete_instances, live_pools, reaper_exit
from skyward.providers.cloud.retry import Backoff
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError, make_client
from skyward_digitalocean.config import DigitalOcean, token_from_env
from skyward_digitalocean.naming import (
    COMMON_TAG,
    DropletView,
    droplets_to_reap,
    parse_pool_tag,
    parse_resource_name,
    pool_mark,
)


@dataclass(frozen=True, slots=True)
class Reaped:
    """What one reaper run deleted, and what it could not."""

    droplets: tuple[tuple[int, str, str], ...]  # (id, name, reason)
    """Droplets deleted: ``(id, name, why)`` (powered off, or past their expiry)."""
    firewalls: tuple[str, ...]
    """Names of the firewalls deleted."""
    ssh_keys: tuple[str, ...]
    """Names of the SSH keys deleted."""
    tags: tuple[str, ...]
    """Tags deleted."""
    failures: tuple[str, ...]
    """What could not be deleted, each with why; tried again at the next run."""


def _view(droplet: dict[str, Any]) -> DropletView:
    return DropletView(
        id=int(droplet["id"]),
        name=str(droplet.get("name", "")),
        status=str(droplet.get("status", "")),
        tags=tuple(str(t) for t in droplet.get("tags") or ()),
    )


def skyward_droplets(api: DigitalOceanAPI) -> list[DropletView]:
    """Every droplet with the ``skyward`` tag, GPU droplets included (see
    :meth:`DigitalOceanAPI.droplets_tagged`)."""
    return [_view(droplet) for droplet in api.droplets_tagged(COMMON_TAG)]


def reap_with(
    api: DigitalOceanAPI,
    now: float | None = None,
    own_pool: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Reaped:
    """Delete leftovers through ``api``; never raises for one failed deletion (it is
    reported in ``failures`` and tried again next time)."""
    now = time.time() if now is None else now
    say = log or (lambda _m: None)
    droplets = skyward_droplets(api)
    doomed = droplets_to_reap(droplets, now, own_pool)
    failures: list[str] = []
    deleted = delete_instances(
        ((d.droplet.id, d.droplet.name, d.reason) for d in doomed),
        api.delete_droplet,
        "droplet",
        DigitalOceanAPIError,
        failures,
        say,
    )
    # A firewall or key is reaped only once its pool has no droplet left.
    alive = live_pools(((d.id, pool_mark(d.tags)) for d in droplets), deleted, own_pool)

    def expired(name: str) -> bool:  # a firewall's or key's
        return is_expired(parse_resource_name(name), now, alive)

    firewalls = delete_doomed(
        api.firewalls(),
        expired,
        lambda f: api.delete_firewall(str(f["id"])),
        "firewall",
        DigitalOceanAPIError,
        failures,
    )
    keys = delete_doomed(
        api.ssh_keys(), expired, lambda k: api.delete_ssh_key(k["id"]), "SSH key", DigitalOceanAPIError, failures
    )
    tags = delete_doomed(
        api.tags(),
        lambda name: is_expired(parse_pool_tag(name), now, alive),
        lambda t: api.delete_tag(str(t.get("name", ""))),
        "tag",
        DigitalOceanAPIError,
        failures,
    )
    return Reaped(tuple(deleted), tuple(firewalls), tuple(keys), tuple(tags), tuple(failures))


def reap(config: DigitalOcean | None = None, now: float | None = None) -> Reaped:
    """Delete leftovers of earlier skyward pools in the account of ``DIGITALOCEAN_TOKEN``."""
    config = config or DigitalOcean()
    api = DigitalOceanAPI(
        make_client(config, token_from_env()), Backoff(attempts=config.api_retries, base=config.api_backoff)
    )
    return reap_with(api, now=now, log=lambda m: print(m, file=sys.stderr))


def main() -> int:
    result = reap()
    counts = [(len(result.droplets), "droplet"), (len(result.firewalls), "firewall"), (len(result.ssh_keys), "SSH key")]
    return reaper_exit(result.failures, [*counts, (len(result.tags), "tag")])


if __name__ == "__main__":
    sys.exit(main())
