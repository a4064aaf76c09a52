"""Names, labels and network tags of what a pool creates on Google Cloud (pure: no I/O).

Every VM and TPU node carries the labels ``skyward`` (all of skyward's, so ``skyward ls``
and the reaper can list them), ``skyward-pool`` (the pool id) and ``skyward-expires``
(the Unix time after which none of the pool's nodes can still be working). Google's
label rules: keys and values of lowercase letters, digits, ``_`` and ``-``, keys starting
with a letter, at most 63 characters each. Firewall rules cannot carry labels, so their
*names* hold the same two facts: ``skyward-<pool id>-<expires>-<purpose>``. A pool's VMs
carry the network tag ``<pool id>``, which its firewall rules target.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from skyward.errors import ConfigurationError
from skyward.providers.cloud.naming import RUN_DIR_PREFIX, PoolMark, expired_names

COMMON_LABEL = "skyward"
POOL_LABEL = "skyward-pool"
EXPIRES_LABEL = "skyward-expires"
NODE_LABEL = "skyward-node"
FIREWALL_PURPOSES = ("client", "pool")
_POOL_ID = re.compile(r"^[a-z][a-z0-9-]{0,40}[a-z0-9]$")  # leaves room in a 63-char resource name
_RESOURCE = re.compile(r"^skyward-(?P<pool>[a-z][a-z0-9-]{0,40}[a-z0-9])-(?P<expires>\d{9,11})-(?:client|pool)$")
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1035, Compute Engine's resource names
_LABEL = re.compile(r"^[a-z0-9_-]{0,63}$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


def check_pool_id(pool_id: str) -> str:
    if not _POOL_ID.match(pool_id):
        raise ConfigurationError(
            f"pool id {pool_id!r} cannot name Google Cloud resources: use 2-42 lowercase letters, digits and '-', "
            "starting with a letter"
        )
    return pool_id


def is_resource_name(name: str) -> bool:
    return bool(_NAME.match(name))


def label_problems(labels: Mapping[str, str]) -> list[str]:
    """Why Google would refuse these labels (empty: it would not)."""
    found = []
    if len(labels) > 64:
        found.append(f"{len(labels)} labels; at most 64")
    for key, value in labels.items():
        if not _LABEL_KEY.match(key):
            found.append(f"label key {key!r}: lowercase letters, digits, '_' and '-', starting with a letter, <= 63")
        if not _LABEL.match(value):
            found.append(f"label value {value!r} of {key}: lowercase letters, digits, '_' and '-', <= 63")
    return found


def pool_labels(pool_id: str, expires: int, node: int | None = None) -> dict[str, str]:
    labels = {COMMON_LABEL: "1", POOL_LABEL: check_pool_id(pool_id), EXPIRES_LABEL: str(expires)}
    if node is not None:
        labels[NODE_LABEL] = str(node)
    return labels


def pool_filter(pool_id: str | None = None) -> str:
    """A Compute Engine list filter for skyward's instances (of one pool, when given)."""
    if pool_id is None:
        return f"labels.{COMMON_LABEL} = 1"
    return f'labels.{POOL_LABEL} = "{check_pool_id(pool_id)}"'


def network_tag(pool_id: str) -> str:
    """The network tag of the pool's VMs; its firewall rules target it."""
    return check_pool_id(pool_id)


def instance_name(pool_id: str, node: int, suffix: str) -> str:
    """``sky-1a2b3c4d-0-9f3a``: a valid resource name. ``suffix`` differs per VM made, so a
    node replaced at its index never reuses the name of the VM it replaces (Compute Engine
    refuses a name still held by a VM that is being deleted)."""
    return f"{check_pool_id(pool_id)}-{node}-{suffix}"


def tpu_name(pool_id: str) -> str:
    """The pool's one TPU node (a slice's hosts are its workers)."""
    return f"{check_pool_id(pool_id)}-tpu"


def firewall_name(pool_id: str, expires: int, purpose: str) -> str:
    """``skyward-<pool id>-<expires>-client`` (the node ports, from the client) or ``-pool``
    (everything between the pool's own VMs)."""
    assert purpose in FIREWALL_PURPOSES
    return f"skyward-{check_pool_id(pool_id)}-{expires}-{purpose}"


def run_dir(pool_id: str) -> str:
    return f"{RUN_DIR_PREFIX}{check_pool_id(pool_id)}"


def parse_firewall_name(name: str) -> PoolMark | None:
    match = _RESOURCE.match(name)
    return None if match is None else PoolMark(match["pool"], int(match["expires"]))


def mark_of(labels: Mapping[str, str]) -> PoolMark | None:
    """The pool mark of a labelled VM or TPU node, or None when it is not skyward's."""
    if COMMON_LABEL not in labels:
        return None
    pool, expires = labels.get(POOL_LABEL, ""), labels.get(EXPIRES_LABEL, "")
    if not _POOL_ID.match(pool) or not expires.isdigit():
        return None
    return PoolMark(pool, int(expires))


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the reaper needs to know about a VM or TPU node."""

    zone: str
    name: str
    kind: str  # "instance" | "tpu"
    status: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Doomed:
    node: NodeView
    reason: str


STOPPED_STATUSES = frozenset({"TERMINATED", "STOPPED", "SUSPENDED", "PREEMPTED"})
"""A VM that is TERMINATED (stopped, or preempted with action STOP) bills its disks; a
preempted or stopped TPU node bills nothing but holds quota. Skyward never restarts either."""


def nodes_to_reap(nodes: Iterable[NodeView], now: float, own_pool: str | None = None) -> list[Doomed]:
    """Skyward nodes of other pools that only cost money now: stopped or preempted (their
    agent is gone: skyward never starts a node again), or past their pool's expiry."""
    doomed = []
    for node in nodes:
        mark = mark_of(node.labels)
        if mark is None or mark.pool_id == own_pool:
            continue
        if node.status in STOPPED_STATUSES:
            doomed.append(Doomed(node, f"{node.status.lower()} (its disk still bills)"))
        elif now > mark.expires:
            doomed.append(Doomed(node, f"its pool {mark.pool_id} expired at {mark.expires}"))
    return doomed


def expired_firewalls(names: Iterable[str], now: float, live_pools: set[str]) -> list[str]:
    return expired_names(names, parse_firewall_name, now, live_pools)
