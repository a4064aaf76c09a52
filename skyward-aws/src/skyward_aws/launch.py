"""Launching nodes: which market each node uses, the RunInstances request, retries.

Spot strategies become a per-node plan (pure ``skyward.spot.plan_markets``):

* ``Spot.Always(retries, interval)``: every node spot. A launch refused for capacity
  tries the other zones, then waits ``interval`` seconds and tries again, up to
  ``retries`` times, then the pool fails (and removes what it made).
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
from dataclasses import dataclass
from typing import Any

from skyward.errors import CapacityError, ProvisioningError, QuotaError
from skyward.spot import Market, NodePlan


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


RunOnce = Callable[[Market, str], Mapping[str, Any]]  # (market, zone) -> the instance


@dataclass(frozen=True, slots=True)
class Launched:
    instance: Mapping[str, Any]
    market: Market
    zone: str


def launch_node(
    plan: NodePlan,
    zones: Sequence[str],
    run: RunOnce,
    *,
    notice: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    propagation_timeout: float = 90.0,
) -> Launched:
    """Launch one node by its plan: every zone in turn, then retries, then fallback."""
    from botocore.exceptions import ClientError

    if not zones:
        raise ProvisioningError(f"node {plan.node}: no zone with a subnet offers this instance type")
    market = plan.market
    rounds = 0
    propagation_deadline = time.monotonic() + propagation_timeout
    # start at a different zone per node, which spreads a pool across zones
    order = [zones[(plan.node + i) % len(zones)] for i in range(len(zones))]
    while True:
        refusals: list[str] = []
        index = 0
        while index < len(order):
            zone = order[index]
            try:
                return Launched(run(market, zone), market, zone)
            except ClientError as error:
                code = error.response["Error"]["Code"]
                message = error.response["Error"].get("Message", "")
                kind = classify(code, message)
                if kind is Refusal.PROPAGATING and time.monotonic() < propagation_deadline:
                    sleep(3.0)  # IAM is eventually consistent: a new profile takes seconds to appear
                    continue
                if code in QUOTA_CODES:
                    raise QuotaError(f"node {plan.node}: EC2 refused to launch it: {code}: {message}") from error
                if kind in (Refusal.FATAL, Refusal.PROPAGATING):
                    raise ProvisioningError(f"node {plan.node}: EC2 refused to launch it: {code}: {message}") from error
                refusals.append(f"{zone}: {code}")
            index += 1
        summary = "; ".join(refusals)
        if market is Market.SPOT:
            if rounds < plan.retries:
                rounds += 1
                sleep(plan.interval)
                continue
            if plan.fallback:
                notice(f"node {plan.node}: no spot capacity ({summary}); running it on-demand")
                market, rounds = Market.ON_DEMAND, 0
                continue
            tries = plan.retries + 1
            raise CapacityError(
                f"node {plan.node}: no spot capacity after {tries} round{'s' if tries > 1 else ''} over "
                f"{len(order)} zone{'s' if len(order) > 1 else ''} ({summary}). Try again later, another "
                "instance type or region, or spot='if-available' to fall back to on-demand"
            )
        raise CapacityError(f"node {plan.node}: no on-demand capacity ({summary}); try another instance type or region")
