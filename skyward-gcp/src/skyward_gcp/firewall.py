"""The pool's two firewall rules as Compute Engine's API documents them (pure: no I/O).

A rule has one source set and one port set, so the pool needs two: ``-client`` admits
the node ports (the agent's, then one per worker) from the client's address only;
``-pool`` admits everything between the pool's own VMs (distributed training picks its
ports at run time). Both target the pool's network tag, so they apply to its VMs and
nothing else, and both are deleted with the pool. Egress is open by default in a VPC.

The rules checked (Compute Engine REST reference, ``firewalls`` resource): an RFC 1035
``name``; ``direction`` INGRESS; ``allowed[].IPProtocol`` one of tcp, udp, icmp (or a
protocol number) with ``ports`` only for tcp/udp/sctp; ``sourceRanges`` CIDRs and/or
``sourceTags``; ``targetTags`` naming tags.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from skyward_gcp.naming import is_resource_name

_WITH_PORTS = ("tcp", "udp", "sctp")


def firewall_bodies(
    client_name: str, pool_name: str, network: str, tag: str, client_cidr: str, ports: tuple[int, int]
) -> list[dict[str, Any]]:
    low, high = ports
    return [
        {
            "name": client_name,
            "network": f"global/networks/{network}",
            "direction": "INGRESS",
            "priority": 1000,
            "source_ranges": [client_cidr],
            "target_tags": [tag],
            "allowed": [{"I_p_protocol": "tcp", "ports": [f"{low}-{high}" if high > low else str(low)]}],
            "description": "skyward: the node ports, from the pool's client only",
        },
        {
            "name": pool_name,
            "network": f"global/networks/{network}",
            "direction": "INGRESS",
            "priority": 1000,
            "source_tags": [tag],
            "target_tags": [tag],
            "allowed": [{"I_p_protocol": "tcp"}, {"I_p_protocol": "udp"}, {"I_p_protocol": "icmp"}],
            "description": "skyward: everything between the pool's own VMs",
        },
    ]


def firewall_problems(body: Mapping[str, Any]) -> list[str]:
    """Why Compute Engine would refuse ``body`` (empty: it would not)."""
    found = []
    name = body.get("name")
    if not isinstance(name, str) or not is_resource_name(name):
        found.append(f"name {name!r}: 1-63 lowercase letters, digits and '-', starting with a letter")
    if body.get("direction") != "INGRESS":
        found.append("direction must be INGRESS")
    allowed = body.get("allowed") or []
    if not allowed:
        found.append("allowed must name at least one protocol")
    for index, rule in enumerate(allowed):
        protocol = rule.get("I_p_protocol")
        if protocol not in (*_WITH_PORTS, "icmp", "esp", "ah", "all"):
            found.append(f"allowed[{index}]: IPProtocol {protocol!r} unknown")
        if rule.get("ports") and protocol not in _WITH_PORTS:
            found.append(f"allowed[{index}]: ports are only for tcp, udp and sctp")
    sources = list(body.get("source_ranges") or [])
    if not sources and not body.get("source_tags"):
        found.append("a rule needs sourceRanges or sourceTags")
    for cidr in sources:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            found.append(f"sourceRanges: {cidr!r} is not a CIDR")
    if not body.get("target_tags"):
        found.append("targetTags must name the pool's tag (else the rule opens every VM of the network)")
    return found
