"""Deleting what earlier pools left behind on Google Cloud.

Why this exists: a node ends itself when its pool's TTL passes or its client has been
gone too long, but it can only *shut down*: deleting a VM takes credentials, and no
credential ever reaches a node (its startup script is readable from the metadata server
by anything on it). A shut-down VM is TERMINATED and bills its boot disk (a GPU VM's
100 GB) until something holding credentials deletes it.

What deletes it: the pool itself while its client lives; this reaper on every later pool
start with the same project (``GCP(reap=True)``, the default): skyward VMs (label
``skyward``) that are TERMINATED/STOPPED, or past their ``skyward-expires`` label, and
the firewall rules of pools that have expired and have no VM left;
``python -m skyward_gcp.reaper`` for a cron job; and ``skyward down --expired``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from skyward.providers.cloud.naming import is_expired
from skyward.providers.cloud.reaping import live_pools, reaper_exit
from skyward_gcp.api import GcpAPI, GcpAPIError
from skyward_gcp.config import GCP
from skyward_gcp.naming import NodeView, mark_of, nodes_to_reap, parse_firewall_name, pool_filter


@dataclass(frozen=True, slots=True)
class Reaped:
    """What one reaper run deleted, and what it could not."""

    nodes: tuple[tuple[str, str, str], ...]  # (zone/name, name, reason)
    """VMs deleted: ``(id, name, why)``."""
    firewalls: tuple[str, ...]
    """Names of the firewall rules deleted."""
    failures: tuple[str, ...]
    """What could not be deleted, each with why; tried again at the next run."""


def skyward_vms(api: GcpAPI) -> list[NodeView]:
    return [
        NodeView(zone, str(vm.name), "instance", str(vm.status or ""), dict(vm.labels or {}))
        for zone, vm in api.all_instances(pool_filter())
    ]


def skyward_tpus(api: GcpAPI, zones: list[str]) -> list[NodeView]:
    """The TPU nodes of ``zones`` that carry skyward's labels."""
    found = []
    for zone in zones:
        try:
            nodes = api.tpus(zone)
        except GcpAPIError as exc:
            if exc.status in (403, 404):  # no TPU API in this zone, or not enabled: no TPU node either
                continue
            raise
        for node in nodes:
            labels = dict(node.labels or {})
            if mark_of(labels) is not None:
                state = getattr(node.state, "name", str(node.state))
                found.append(NodeView(zone, str(node.name).rsplit("/", 1)[-1], "tpu", state, labels))
    return found


def reap_with(
    api: GcpAPI, config: GCP, now: float | None = None, own_pool: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Reaped:  # fmt: skip
    """Delete leftovers through ``api``; one failed deletion is reported, never raised."""
    now = time.time() if now is None else now
    say = log or (lambda _m: None)
    vms = skyward_vms(api) + skyward_tpus(api, api.zones(config.the_region))
    doomed = nodes_to_reap(vms, now, own_pool)
    failures = api.delete_instances([(d.node.zone, d.node.name) for d in doomed if d.node.kind == "instance"])
    for tpu in (d.node for d in doomed if d.node.kind == "tpu"):
        try:
            api.delete_tpu(tpu.zone, tpu.name)
        except GcpAPIError as exc:
            failures.append(f"{tpu.name}: {exc}")
    failed = {f.split(":", 1)[0] for f in failures}
    deleted = [(f"{d.node.zone}/{d.node.name}", d.node.name, d.reason) for d in doomed if d.node.name not in failed]
    for ident, _, reason in deleted:
        say(f"deleted VM {ident}: {reason}")
    alive = live_pools(((f"{v.zone}/{v.name}", mark_of(v.labels)) for v in vms), deleted, own_pool)
    firewalls = []
    for rule in api.firewalls():
        name = str(rule.name)
        if is_expired(parse_firewall_name(name), now, alive):
            try:
                api.delete_firewall(name)
                firewalls.append(name)
            except GcpAPIError as exc:
                failures.append(f"firewall rule {name}: {exc}")
    return Reaped(tuple(deleted), tuple(firewalls), tuple(failures))


def reap(config: GCP | None = None, now: float | None = None) -> Reaped:
    """Delete leftovers of earlier skyward pools in the project of the credentials."""
    config = config or GCP()
    return reap_with(GcpAPI(config), config, now=now, log=lambda m: print(m, file=sys.stderr))


def main() -> int:
    result = reap()
    return reaper_exit(result.failures, [(len(result.nodes), "VM"), (len(result.firewalls), "firewall rule")])


if __name__ == "__main__":
    sys.exit(main())
