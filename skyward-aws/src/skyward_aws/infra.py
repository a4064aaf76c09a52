"""Per-pool network infrastructure: tags, the VPC and subnets, the security group.

The security group admits exactly two kinds of traffic: the agent's port (and the worker
ports right after it) from the client's address (never ``0.0.0.0/0``; with SSM, not even that), and anything between the
pool's own nodes (distributed training talks node to node). Outbound stays open: nodes
fetch packages, and reach S3 and SSM.
"""

from __future__ import annotations

import datetime
import ipaddress
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from skyward.errors import ConfigurationError, ProvisioningError

TAG_POOL = "skyward:pool-id"
TAG_EXPIRES = "skyward:expires-at"
TAG_MANAGED = "skyward:managed-by"
TAG_NODE = "skyward:node"


def expiry(now: datetime.datetime, seconds: float) -> str:
    """ISO 8601 UTC time ``seconds`` after ``now``, as the expiry tag holds it."""
    moment = now.astimezone(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def expiry_tag(expires: int) -> str:
    """A Unix time (``Labels.expires``) as the expiry tag holds it: ISO 8601 UTC."""
    return expiry(datetime.datetime.fromtimestamp(expires, datetime.UTC), 0)


def pool_tags(pool_id: str, expires_at: str, name: str | None = None) -> list[dict[str, str]]:
    """The tags every resource of a pool carries, so anything left behind can be found
    (``aws ec2 describe-instances --filters Name=tag:skyward:pool-id,Values=...``)."""
    tags = [
        {"Key": TAG_POOL, "Value": pool_id},
        {"Key": TAG_EXPIRES, "Value": expires_at},
        {"Key": TAG_MANAGED, "Value": "skyward"},
    ]
    if name is not None:
        tags.append({"Key": "Name", "Value": name})
    return tags


def tag_specifications(resource_types: Sequence[str], tags: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [{"ResourceType": r, "Tags": list(tags)} for r in resource_types]


def ingress_permissions(group_id: str, client_cidr: str | None, ports: tuple[int, int]) -> list[dict[str, Any]]:
    """The security group's inbound rules (a pure function; see the module docstring)."""
    permissions: list[dict[str, Any]] = [
        {
            "IpProtocol": "-1",
            "UserIdGroupPairs": [{"GroupId": group_id, "Description": "skyward: between the pool's nodes"}],
        }
    ]
    if client_cidr is not None:
        network = ipaddress.ip_network(client_cidr, strict=False)
        if network.prefixlen == 0:  # belt and braces: config refuses it already
            raise ConfigurationError("skyward never opens the agent port to the whole internet")
        rule: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": ports[0], "ToPort": ports[1]}
        description = "skyward: agent and worker ports, from the client only"
        if network.version == 4:
            rule["IpRanges"] = [{"CidrIp": str(network), "Description": description}]
        else:
            rule["Ipv6Ranges"] = [{"CidrIpv6": str(network), "Description": description}]
        permissions.append(rule)
    return permissions


@dataclass(frozen=True, slots=True)
class Network:
    vpc_id: str
    subnets: dict[str, str]  # zone -> subnet id (one per zone)


def find_network(ec2: Any, subnet_ids: Sequence[str]) -> Network:
    """The subnets the pool may launch in: the given ones, else the default VPC's."""
    if subnet_ids:
        subnets = ec2.describe_subnets(SubnetIds=list(subnet_ids))["Subnets"]
        vpcs = {s["VpcId"] for s in subnets}
        if len(vpcs) != 1:
            raise ConfigurationError(f"AWS(subnet_ids=...) must all be in one VPC; they span {sorted(vpcs)}")
        vpc_id = vpcs.pop()
    else:
        vpcs_found = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
        if not vpcs_found:
            raise ConfigurationError(
                f"region {ec2.meta.region_name} has no default VPC; pass AWS(subnet_ids=[...]) with subnets "
                "that give instances a public address (or use_ssm=True with a route to SSM)"
            )
        vpc_id = vpcs_found[0]["VpcId"]
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]
    by_zone: dict[str, str] = {}
    for subnet in sorted(subnets, key=lambda s: s["SubnetId"]):
        by_zone.setdefault(subnet["AvailabilityZone"], subnet["SubnetId"])
    if not by_zone:
        raise ConfigurationError(f"VPC {vpc_id} has no subnets to launch in")
    return Network(vpc_id=vpc_id, subnets=by_zone)


def create_security_group(
    ec2: Any,
    *,
    pool_id: str,
    vpc_id: str,
    client_cidr: str | None,
    ports: tuple[int, int],
    tags: list[dict[str, str]],
) -> str:
    group_id: str = ec2.create_security_group(
        GroupName=f"skyward-{pool_id}",
        Description=f"skyward pool {pool_id}: agent port from the client, traffic between the pool's nodes",
        VpcId=vpc_id,
        TagSpecifications=tag_specifications(["security-group"], tags),
    )["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=group_id,
        IpPermissions=ingress_permissions(group_id, client_cidr, ports),
        TagSpecifications=tag_specifications(["security-group-rule"], tags),
    )
    return group_id


def delete_security_group(
    ec2: Any, group_id: str, *, timeout: float = 300.0, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Delete the group, waiting while terminating instances still hold it (EC2 answers
    DependencyViolation until their network interfaces are gone)."""
    deadline = time.monotonic() + timeout
    delay = 2.0
    while True:
        try:
            ec2.delete_security_group(GroupId=group_id)
            return
        except ClientError as error:
            code = error.response["Error"]["Code"]
            if code == "InvalidGroup.NotFound":
                return
            if code != "DependencyViolation" or time.monotonic() + delay > deadline:
                raise ProvisioningError(
                    f"could not delete security group {group_id}: {error}. Delete it yourself: "
                    f"aws ec2 delete-security-group --group-id {group_id} --region {ec2.meta.region_name}"
                ) from error
        sleep(delay)
        delay = min(delay * 1.5, 15.0)
