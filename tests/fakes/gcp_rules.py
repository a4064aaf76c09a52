"""Google's documented rules for the bodies the fake Compute Engine and Cloud TPU APIs take:
pure functions that say what is wrong (None: nothing). tests/fakes/gcp.py lists each rule
with its source."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from fakes.gcp_catalog import (
    ACCELERATOR_TYPES,
    IMAGE_FAMILIES,
    MACHINE_TYPES,
    N1_ACCELERATORS,
    ZONES,
    last_segment,
    rfc1035_problem,
)

LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
LABELS_LIMIT = 64
METADATA_KEY = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
METADATA_VALUE_LIMIT = 256 * 1024
METADATA_TOTAL_LIMIT = 512 * 1024
PROTOCOLS = ("tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all")
_PORT = re.compile(r"^(\d{1,5})(?:-(\d{1,5}))?$")

INSTANCE_FIELDS = {
    "name", "description", "machineType", "disks", "networkInterfaces", "metadata", "labels", "tags",
    "scheduling", "guestAccelerators", "serviceAccounts", "minCpuPlatform", "shieldedInstanceConfig",
    "canIpForward", "deletionProtection", "reservationAffinity", "confidentialInstanceConfig",
    "advancedMachineFeatures", "displayDevice", "hostname", "networkPerformanceConfig", "resourcePolicies",
    "params", "keyRevocationActionType", "sourceMachineImage",
}  # fmt: skip
FIREWALL_FIELDS = {
    "name", "description", "network", "priority", "direction", "sourceRanges", "destinationRanges",
    "sourceTags", "targetTags", "sourceServiceAccounts", "targetServiceAccounts", "allowed", "denied",
    "disabled", "logConfig",
}  # fmt: skip


def field_problem(what: str, why: str) -> str:
    return f"Invalid value for field '{what}': {why}"


def labels_problem(labels: Any, what: str = "resource.labels") -> str | None:
    """cloud.google.com/compute/docs/labeling-resources#requirements."""
    if labels is None:
        return None
    if not isinstance(labels, dict):
        return field_problem(what, "labels must be a map of strings")
    if len(labels) > LABELS_LIMIT:
        return field_problem(what, f"a resource has at most {LABELS_LIMIT} labels, not {len(labels)}")
    for key, value in labels.items():
        if not LABEL_KEY.match(key):
            return field_problem(
                what,
                f"Label key '{key}' violates format constraints. The key must start with a lowercase character, can "
                "only contain lowercase letters, numeric characters, underscores and dashes, and have at most 63 "
                "characters.",
            )
        if not isinstance(value, str) or not LABEL_VALUE.match(value):
            return field_problem(
                what,
                f"Label value '{value}' violates format constraints. The value can only contain lowercase letters, "
                "numeric characters, underscores and dashes, and have at most 63 characters.",
            )
    return None


def metadata_problem(metadata: Any) -> str | None:
    """cloud.google.com/compute/docs/metadata/setting-custom-metadata#limitations: a key of up to
    128 of ``[a-zA-Z0-9_-]``, a value of up to 256 KB, 512 KB in all."""
    if metadata is None:
        return None
    items = metadata.get("items", []) if isinstance(metadata, dict) else None
    if not isinstance(items, list):
        return field_problem("resource.metadata", "items must be a list of {key, value}")
    keys: set[str] = set()
    total = 0
    for item in items:
        key, value = (item.get("key"), item.get("value", "")) if isinstance(item, dict) else (None, None)
        if not isinstance(key, str) or not METADATA_KEY.match(key):
            return field_problem("resource.metadata", f"Metadata key '{key}' must match [a-zA-Z0-9-_]{{1,128}}.")
        if key in keys:
            return field_problem("resource.metadata", f"Duplicate metadata key '{key}'.")
        if not isinstance(value, str):
            return field_problem("resource.metadata", f"Metadata value of '{key}' must be a string.")
        keys.add(key)
        size = len(value.encode())
        if size > METADATA_VALUE_LIMIT:
            return field_problem(
                "resource.metadata", f"Metadata value of '{key}' is {size} bytes; the limit is 256 KB."
            )
        total += size + len(key)
    if total > METADATA_TOTAL_LIMIT:
        return field_problem("resource.metadata", f"Metadata is {total} bytes in all; the limit is 512 KB.")
    return None


def metadata_value(metadata: Any, key: str) -> str:
    for item in (metadata or {}).get("items", []) if isinstance(metadata, dict) else []:
        if isinstance(item, dict) and item.get("key") == key:
            return str(item.get("value", ""))
    return ""


def image_problem(source: Any) -> str | None:
    """``projects/P/global/images/family/F`` or ``projects/P/global/images/NAME`` of a public image."""
    match = re.search(r"projects/([^/]+)/global/images/(family/)?([^/]+)$", source) if isinstance(source, str) else None
    if match is None:
        return field_problem("resource.disks[0].initializeParams.sourceImage", f"'{source}' is not an image URL")
    project, family, name = match.groups()
    families = IMAGE_FAMILIES.get(project, ())
    if (family and name in families) or (not family and any(name.startswith(f) for f in families)):
        return None
    return f"The resource '{source}' was not found"


def instance_problem(body: Any, zone: str) -> tuple[int, str] | None:
    """(HTTP status, message) for an ``instances.insert`` body Compute Engine refuses."""
    if not isinstance(body, dict):
        return 400, "Invalid JSON payload received: the instance must be an object"
    unknown = set(body) - INSTANCE_FIELDS
    if unknown:
        return 400, f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r} at 'instance_resource'"
    for problem in (rfc1035_problem("resource.name", body.get("name")), labels_problem(body.get("labels"))):
        if problem:
            return 400, problem
    machine = body.get("machineType")
    if not isinstance(machine, str) or not machine:
        return 400, "Invalid value for field 'resource.machineType': ''. Machine type is required."
    in_zone = re.search(r"zones/([^/]+)/machineTypes/", machine)
    if in_zone and in_zone.group(1) != zone:
        return 400, field_problem("resource.machineType", f"'{machine}' is not in zone {zone}")
    machine_type = MACHINE_TYPES.get(last_segment(machine))
    if machine_type is None or machine_type.name not in ZONES[zone].machine_types:
        return 400, field_problem("resource.machineType", f"'{machine}'. Machine type does not exist in zone {zone}.")
    disks = body.get("disks")
    boot = [d for d in disks if isinstance(d, dict) and d.get("boot")] if isinstance(disks, list) else []
    if len(boot) != 1:
        return 400, "Invalid value for field 'resource.disks': exactly one boot disk is required."
    source = (boot[0].get("initializeParams") or {}).get("sourceImage")
    problem = image_problem(source)
    if problem:
        return (404, problem) if problem.startswith("The resource") else (400, problem)
    nics = body.get("networkInterfaces")
    if not isinstance(nics, list) or not nics:
        return 400, "Invalid value for field 'resource.networkInterfaces': at least one network interface is required."
    for nic in nics:
        network = nic.get("network", "global/networks/default") if isinstance(nic, dict) else None
        if not isinstance(network, str) or last_segment(network) != "default":
            return 404, f"The resource 'projects/*/global/networks/{network}' was not found"
        for access in nic.get("accessConfigs") or []:
            if access.get("type", "ONE_TO_ONE_NAT") != "ONE_TO_ONE_NAT":
                return 400, field_problem("resource.networkInterfaces[0].accessConfigs[0].type", "ONE_TO_ONE_NAT only")
    problem = metadata_problem(body.get("metadata"))
    if problem:
        return 400, problem
    for tag in (body.get("tags") or {}).get("items") or []:
        problem = rfc1035_problem("resource.tags.items", tag)
        if problem:
            return 400, problem
    return gpu_and_scheduling_problem(body, zone, machine_type.name)


def attached_gpus(body: Mapping[str, Any], machine: str) -> list[tuple[str, int]]:
    """(accelerator type, count) of the GPUs an instance gets: its machine type's, or its
    ``guestAccelerators``."""
    carried = MACHINE_TYPES[machine].gpus
    if carried is not None:
        return [carried]
    return [
        (last_segment(str(g.get("acceleratorType", ""))), int(g.get("acceleratorCount", 1)))
        for g in body.get("guestAccelerators") or []
        if isinstance(g, dict)
    ]


def gpu_and_scheduling_problem(body: Mapping[str, Any], zone: str, machine: str) -> tuple[int, str] | None:
    """cloud.google.com/compute/docs/gpus/create-vm-with-gpus and /compute/docs/instances/create-use-spot."""
    machine_type = MACHINE_TYPES[machine]
    accelerators = body.get("guestAccelerators") or []
    if accelerators and machine_type.gpus is not None:
        return 400, (
            f"Invalid value for field 'resource.guestAccelerators': machine type {machine} comes with its GPUs "
            "attached; guestAccelerators is not allowed."
        )
    for accelerator in accelerators:
        kind = str(accelerator.get("acceleratorType", "")) if isinstance(accelerator, dict) else ""
        name, count = last_segment(kind), accelerator.get("acceleratorCount") if isinstance(accelerator, dict) else None
        in_zone = re.search(r"zones/([^/]+)/acceleratorTypes/", kind)
        if name not in ZONES[zone].accelerators or (in_zone and in_zone.group(1) != zone):
            return 400, field_problem(
                "resource.guestAccelerators[0].acceleratorType", f"'{kind}'. Accelerator type does not exist in {zone}."
            )
        if machine_type.family != "n1" or name not in N1_ACCELERATORS:
            return (
                400,
                f"Accelerator type {name} cannot be attached to machine type {machine}; N1 takes T4, V100, P100.",
            )
        if count not in ACCELERATOR_TYPES[name].counts:
            return 400, field_problem(
                "resource.guestAccelerators[0].acceleratorCount",
                f"{count}. {name} attaches in counts of {list(ACCELERATOR_TYPES[name].counts)}.",
            )
    scheduling = body.get("scheduling") or {}
    on_maintenance = scheduling.get("onHostMaintenance", "MIGRATE")
    if on_maintenance not in ("MIGRATE", "TERMINATE"):
        return 400, field_problem("resource.scheduling.onHostMaintenance", f"'{on_maintenance}'")
    if attached_gpus(body, machine) and on_maintenance != "TERMINATE":
        return 400, (
            "Instances with guest accelerators do not support live migration. "
            "Set 'scheduling.onHostMaintenance' to TERMINATE."
        )
    model = scheduling.get("provisioningModel", "STANDARD")
    if model not in ("STANDARD", "SPOT"):
        return 400, field_problem("resource.scheduling.provisioningModel", f"'{model}'")
    spot = model == "SPOT" or scheduling.get("preemptible") is True
    if spot:
        if scheduling.get("automaticRestart") is True:
            return 400, "Invalid value for field 'resource.scheduling.automaticRestart': Spot VMs cannot restart."
        if on_maintenance != "TERMINATE":
            return 400, "Spot VMs must set 'scheduling.onHostMaintenance' to TERMINATE."
        action = scheduling.get("instanceTerminationAction")
        if model == "SPOT" and action not in ("STOP", "DELETE"):
            return 400, field_problem(
                "resource.scheduling.instanceTerminationAction", f"'{action}'. A SPOT VM needs STOP or DELETE."
            )
    return None


def port_problem(port: Any) -> bool:
    match = _PORT.match(port) if isinstance(port, str) else None
    if match is None:
        return True
    low, high = int(match.group(1)), int(match.group(2) or match.group(1))
    return not 0 < low <= high <= 65535


def firewall_problem(body: Any) -> str | None:
    """cloud.google.com/compute/docs/reference/rest/v1/firewalls (and /vpc/docs/firewalls)."""
    if not isinstance(body, dict):
        return "Invalid JSON payload received: the firewall must be an object"
    unknown = set(body) - FIREWALL_FIELDS
    if unknown:
        return f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r} at 'firewall_resource'"
    problem = rfc1035_problem("resource.name", body.get("name"))
    if problem:
        return problem
    network = body.get("network", "global/networks/default")
    if not isinstance(network, str) or last_segment(network) != "default":
        return field_problem("resource.network", f"'{network}': no such network")
    direction = body.get("direction", "INGRESS")
    if direction not in ("INGRESS", "EGRESS"):
        return field_problem("resource.direction", f"'{direction}'")
    priority = body.get("priority", 1000)
    if not isinstance(priority, int) or not 0 <= priority <= 65535:
        return field_problem("resource.priority", f"{priority}: 0 to 65535")
    allowed, denied = body.get("allowed"), body.get("denied")
    if bool(allowed) == bool(denied):
        return "Exactly one of 'allowed' or 'denied' must be specified."
    for rule in allowed or denied or []:
        protocol = rule.get("IPProtocol") if isinstance(rule, dict) else None
        if not (protocol in PROTOCOLS or (isinstance(protocol, str) and protocol.isdigit() and int(protocol) < 256)):
            return field_problem("resource.allowed[0].IPProtocol", f"'{protocol}'")
        ports = rule.get("ports") or []
        if ports and protocol not in ("tcp", "udp", "sctp", "all"):
            return field_problem("resource.allowed[0].ports", f"ports are for tcp, udp and sctp only, not {protocol}")
        if any(port_problem(p) for p in ports):
            return field_problem("resource.allowed[0].ports", f"{ports}: each a port or a range 'a-b' in 1-65535")
    for key in ("sourceRanges", "destinationRanges"):
        for cidr in body.get(key) or []:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except (ValueError, TypeError):
                return field_problem(f"resource.{key}", f"'{cidr}' is not a CIDR range")
    for tag in [*(body.get("targetTags") or []), *(body.get("sourceTags") or [])]:
        problem = rfc1035_problem("resource.targetTags", tag)
        if problem:
            return problem
    return None


def open_to_everyone(body: Mapping[str, Any]) -> bool:
    """An INGRESS rule that lets the whole internet in: a /0 source range, or no source at all
    (then "the default source IPv4 range 0.0.0.0/0" applies, /vpc/docs/firewalls#sources-for-rules)."""
    if body.get("direction", "INGRESS") != "INGRESS" or body.get("denied"):
        return False
    ranges = body.get("sourceRanges") or []
    if not ranges and not body.get("sourceTags") and not body.get("sourceServiceAccounts"):
        return True
    return any(ipaddress.ip_network(r, strict=False).prefixlen == 0 for r in ranges)
