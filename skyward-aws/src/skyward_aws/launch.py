"""Launching nodes: which market each node uses, the RunInstances request, retries.

Spot strategies become a per-node plan (pure ``skyward.spot.plan_markets``):

* ``Spot.Always(retries, interval)``: every node spot. A launch refused for capacity
  tries the other zones (one round, :func:`launch_in_zones`); the cloud template then
  waits ``interval`` seconds and tries another round, up to ``retries`` times, then the
  pool fails (and removes what it made).
* ``Spot.IfAvailable()``: every node tries spot in every zone once; a node that gets
  no spot capacity runs on-demand (and the user is told).
* ``Spot.Never``: every node on-demand.
* ``Spot.Percent(p)``: ``ceil(p * nodes)`` nodes spot, retried like ``Spot.Always()``;
  the rest on-demand. The on-demand nodes come first, so the head node (node 0, the
  rendezvous point of distributed training) is not the one a spot reclaim takes away.

Each node is its own ``RunInstances`` call (MinCount = MaxCount = 1), because each node
gets its own user-data (its index and agent configuration).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from skyward.errors import CapacityError, ProvisioningError, QuotaError
from skyward.providers import Market


class Refusal(enum.Enum):
    CAPACITY = "capacity"  # no capacity (in this zone, for this market) right now
    ZONE = "zone"  # this zone cannot run the type at all
    PROPAGATING = "propagating"  # a just-made IAM instance profile is not visible yet
    FATAL = "fatal"  # retrying will not help


_CAPACITY = {
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "SpotMaxPriceTooLow",
    "MaxSpotInstanceCountExceeded",
    "UnfulfillableCapacity",
    "InsufficientFreeAddressesInSubnet",
}
_ZONE = {"Unsupported", "InvalidAvailabilityZone"}
QUOTA_CODES = frozenset({"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded"})
"""EC2 errors that say the account's limit is reached: no zone of this region helps (the
limit is per region), another region or provider may."""


def classify(code: str, message: str) -> Refusal:
    """How to react to a RunInstances error (a pure function of EC2's error)."""
    if code in _CAPACITY:
        return Refusal.CAPACITY
    if code in _ZONE:
        return Refusal.ZONE
    if code == "InvalidParameterValue" and "iam" in message.lower() and "profile" in message.lower():
        return Refusal.PROPAGATING
    return Refusal.FATAL


def run_instances_request(
    *,
    image_id: str,
    instance_type: str,
    user_data: str | bytes,
    subnet_id: str,
    group_id: str,
    market: Market,
    tags: list[dict[str, str]],
    public_ip: bool,
    instance_profile_arn: str | None,
) -> dict[str, Any]:
    """The RunInstances arguments for one node (pure)."""
    resource_tags = ["instance", "volume", "network-interface"]
    if market is Market.SPOT:
        resource_tags.append("spot-instances-request")
    request: dict[str, Any] = {
        "ImageId": image_id,
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "UserData": user_data,
        "NetworkInterfaces": [
            {
                "DeviceIndex": 0,
                "SubnetId": subnet_id,
                "Groups": [group_id],
                "AssociatePublicIpAddress": public_ip,
                "DeleteOnTermination": True,
            }
        ],
        # A node that shuts itself down (TTL, lost client) is deleted, not merely stopped:
        # a stopped instance still bills for its disk.
        "InstanceInitiatedShutdownBehavior": "terminate",
        # IMDSv2 only: the metadata service answers session-token requests alone, which
        # closes the SSRF path to the node's role credentials.
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 1},
        "TagSpecifications": [{"ResourceType": r, "Tags": list(tags)} for r in resource_tags],
    }
    if market is Market.SPOT:
        request["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    if instance_profile_arn is not None:
        request["IamInstanceProfile"] = {"Arn": instance_profile_arn}
    return request


RunOnce = Callable[[str], Mapping[str, Any]]  # zone -> the instance


def launch_in_zones(
    node: int,
    market: Market,
    zones: Sequence[str],
    run: RunOnce,
    *,
    sleep: Callable[[float], None] = time.sleep,
    propagation_timeout: float = 90.0,
) -> tuple[Mapping[str, Any], str]:
    """One round: every zone in turn (starting at a different zone per node, which
    spreads a pool across zones) until one takes the node; returns the instance and its
    zone. When every zone refuses for capacity, a CapacityError: the cloud template
    retries the round or falls back to on-demand, as the node's spot plan says."""
    if not zones:
        raise ProvisioningError(f"node {node}: no zone with a subnet offers this instance type")
    propagation_deadline = time.monotonic() + propagation_timeout
    order = [zones[(node + i) % len(zones)] for i in range(len(zones))]
    refusals: list[str] = []
    index = 0
    while index < len(order):
        zone = order[index]
        try:
            return run(zone), zone
        except ClientError as error:
            code = error.response["Error"]["Code"]
            message = error.response["Error"].get("Message", "")
            kind = classify(code, message)
            if kind is Refusal.PROPAGATING and time.monotonic() < propagation_deadline:
                sleep(3.0)  # IAM is eventually consistent: a new profile takes seconds to appear
                continue
            if code in QUOTA_CODES:
                raise QuotaError(f"node {node}: EC2 refused to launch it: {code}: {message}") from error
            if kind in (Refusal.FATAL, Refusal.PROPAGATING):
                raise ProvisioningError(f"node {node}: EC2 refused to launch it: {code}: {message}") from error
            refusals.append(f"{zone}: {code}")
        index += 1
    plural = "s" if len(order) > 1 else ""
    raise CapacityError(
        f"node {node}: no {market.value} capacity over {len(order)} zone{plural} ({'; '.join(refusals)})",
        node=node,
        market=market.value,
    )
