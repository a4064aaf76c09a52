"""The pool's cloud firewall as DigitalOcean's API documents it (pure: no I/O).

:func:`firewall_body` is what a pool sends to ``POST /v2/firewalls``;
:func:`firewall_problems` checks a body against the documented rules, so that the driver
refuses to send one the API would refuse and ``skyward doctor`` can say so before a first
pool. The rules (DigitalOcean's OpenAPI specification, resources/firewalls/models/
firewall.yml and firewall_rule.yml; pydo marks the same fields "Required."):

* a ``name`` of letters, digits, ``.`` and ``-``, starting with a letter or digit;
* at least one inbound or outbound rule (``firewalls_create.yml``: anyOf);
* every rule has ``protocol`` (``tcp``, ``udp`` or ``icmp``) and ``ports``, ICMP rules
  too: a string holding one port, a range ``"8000-9000"``, or ``"0"`` for all;
* an inbound rule has ``sources``, an outbound one ``destinations``, naming addresses,
  droplet ids, load balancers, Kubernetes clusters or tags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PROTOCOLS = ("tcp", "udp", "icmp")
_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9.-]+$")
_PORTS = re.compile(r"^(?:0|(?P<low>[1-9][0-9]{0,4})(?:-(?P<high>[1-9][0-9]{0,4}))?)$")
_TARGETS = frozenset({"addresses", "droplet_ids", "load_balancer_uids", "kubernetes_ids", "tags"})


def firewall_body(name: str, tag: str, client_cidr: str, ports: tuple[int, int]) -> dict[str, Any]:
    """Inbound: the node's ports (agent, then one per worker) from the client only, and
    anything between the pool's own droplets (distributed training picks its ports at
    run time). Outbound: all (apt, pip, uv); DO drops outbound traffic a firewall does
    not allow. ICMP rules carry ``ports: "0"``: the field is required for every protocol."""
    everywhere = {"addresses": ["0.0.0.0/0", "::/0"]}
    return {
        "name": name,
        "inbound_rules": [
            {"protocol": "tcp", "ports": "{}-{}".format(*ports), "sources": {"addresses": [client_cidr]}},
            {"protocol": "tcp", "ports": "0", "sources": {"tags": [tag]}},
            {"protocol": "udp", "ports": "0", "sources": {"tags": [tag]}},
            {"protocol": "icmp", "ports": "0", "sources": {"tags": [tag]}},
        ],
        "outbound_rules": [
            {"protocol": "tcp", "ports": "0", "destinations": everywhere},
            {"protocol": "udp", "ports": "0", "destinations": everywhere},
            {"protocol": "icmp", "ports": "0", "destinations": everywhere},
        ],
        "tags": [tag],
    }


def _ports_problem(ports: object) -> str | None:
    if not isinstance(ports, str):
        return f"ports {ports!r} is not a string"
    match = _PORTS.match(ports)
    if match is None:
        return f"ports {ports!r} is not a port, a range 'a-b' or '0'"
    low, high = int(match["low"] or 0), int(match["high"] or match["low"] or 0)
    if high > 65535 or low > high:
        return f"ports {ports!r} is not a range of ports 1-65535"
    return None


def _rule_problems(rule: object, where: str, target: str) -> list[str]:
    if not isinstance(rule, Mapping):
        return [f"{where} is not an object"]
    found = []
    if rule.get("protocol") not in PROTOCOLS:
        found.append(f"{where}: protocol {rule.get('protocol')!r} is not one of {', '.join(PROTOCOLS)}")
    if "ports" not in rule:
        found.append(f"{where}: ports is required (for {rule.get('protocol')} rules too)")
    elif (problem := _ports_problem(rule["ports"])) is not None:
        found.append(f"{where}: {problem}")
    targets = rule.get(target)
    if not isinstance(targets, Mapping) or not targets:
        found.append(f"{where}: {target} is required and must name something")
    elif unknown := set(targets) - _TARGETS:
        found.append(f"{where}: {target} has unknown keys {sorted(unknown)}")
    return found


def firewall_problems(body: Mapping[str, Any]) -> list[str]:
    """Why DigitalOcean would refuse ``body`` as a new firewall (empty: it would not)."""
    found = []
    name = body.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        found.append(f"name {name!r}: letters, digits, '.' and '-', starting with a letter or digit")
    inbound, outbound = body.get("inbound_rules") or [], body.get("outbound_rules") or []
    if not inbound and not outbound:
        found.append("a firewall needs at least one inbound or outbound rule")
    for index, rule in enumerate(inbound):
        found += _rule_problems(rule, f"inbound rule {index}", "sources")
    for index, rule in enumerate(outbound):
        found += _rule_problems(rule, f"outbound rule {index}", "destinations")
    return found
