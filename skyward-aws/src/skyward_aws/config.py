"""``AWS``: the provider's configuration, validated when it is made.

Everything here is a value: constructing ``AWS(...)`` touches no network and provisions
nothing. Credentials are never part of it; boto3 finds them through its usual chain
(environment, shared config and profiles, SSO, instance roles).
"""

from __future__ import annotations

import ipaddress
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skyward.errors import ConfigurationError
from skyward.providers.cloud import CloudSettings
from skyward.providers.cloud.addresses import firewall_source, parse_client_address

if TYPE_CHECKING:
    from skyward_aws.endpoints import EndpointResolver

_REGION_RE = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
_AMI_RE = re.compile(r"^ami-[0-9a-f]{8,17}$")
_SUBNET_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_PROFILE_RE = re.compile(r"^[\w+=,.@-]{1,128}$")

# A rule wider than this is, for practical purposes, open to the internet.
MIN_CLIENT_PREFIX = {4: 8, 6: 32}


def parse_client_cidr(value: str) -> str:
    """The client's address as the CIDR the security group opens the agent port to.

    A bare address becomes a single-host network (``/32`` or ``/128``). Networks wider
    than ``/8`` (IPv4) or ``/32`` (IPv6), ``0.0.0.0/0`` above all, are refused: the agent
    port is never opened to the internet.
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            f"AWS(client_cidr={value!r}): give an address such as '203.0.113.7' or '203.0.113.0/24'"
        )
    try:
        network = ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise ConfigurationError(
            f"AWS(client_cidr={value!r}) is not an IP address or network; give e.g. '203.0.113.7' or '203.0.113.0/24'"
        )
    floor = MIN_CLIENT_PREFIX[network.version]
    if network.prefixlen < floor:
        raise ConfigurationError(
            f"AWS(client_cidr={value!r}) would open the agent port to {network.num_addresses:,} addresses; "
            f"skyward never opens it to the internet. Give this machine's address (a /{network.max_prefixlen}) "
            f"or your network's range (at most /{floor} wide)"
        )
    return str(network)


@dataclass(frozen=True, slots=True)
class AWS(CloudSettings):
    """Run a pool's nodes on Amazon EC2.

    region:            the AWS region, e.g. ``"us-east-1"``.
    use_ssm:           reach each node's agent through an AWS Systems Manager port
                       forwarding session instead of its public address: the security
                       group then opens no port to the outside at all, nodes get an
                       instance profile with ``AmazonSSMManagedInstanceCore`` (which also
                       lets you ``aws ssm start-session`` into them), and the client needs
                       the ``session-manager-plugin`` executable.
    client_cidr:       deprecated: use ``client_address`` (one host, as on every
                       provider). Instead of it, a network allowed to reach the agent
                       port (at most /8 wide, IPv6 too). Never ``0.0.0.0/0``.
    ami:               an explicit image id; ``None`` picks AWS's current GPU, Neuron or
                       Ubuntu image for the instance type (see ``skyward_aws.ami``).
    subnet_ids:        subnets to launch in (one VPC); ``()`` uses the region's default
                       VPC, in the zones that offer the instance type.
    instance_profile:  an existing IAM instance profile for the nodes. ``None`` creates
                       one per pool when S3 volumes or ``use_ssm`` need it, and removes
                       it at the end.
    endpoint_resolver: how the client reaches a node's agent (see
                       ``skyward_aws.endpoints``); ``None`` uses the public address, or
                       SSM tunnels with ``use_ssm``.

    The rest is every cloud's (``skyward.providers.cloud.CloudSettings``):
    ``client_address`` (the security group admits the node ports from it only; ``None``,
    and no ``client_cidr``, asks ``address_url`` when the pool starts), ``grace_period``,
    ``bootstrap_timeout``, ``agent_port``, ``provision_timeout`` (for every instance to be
    running), ``poll_interval`` (between describe calls while instances start, and between
    checks for spot instances EC2 took away), ``address_url``, ``api_timeout`` and
    ``api_retries`` (per boto3 call; boto3 keeps its own backoff, so ``api_backoff`` is unused
    here) and ``reap`` (at every pool start,
    delete what earlier pools left past their expiry).
    """

    region: str = "us-east-1"
    """The AWS region, e.g. ``"us-east-1"``."""
    use_ssm: bool = False
    """Reach each node's agent through an AWS Systems Manager session instead of its public address: no port
    opens to the outside; the client needs ``session-manager-plugin``."""
    client_cidr: str | None = None
    """Deprecated: use ``client_address``. A network (at most /8) allowed to reach the agent port; never
    ``0.0.0.0/0``."""
    ami: str | None = None
    """An explicit image id; ``None`` picks AWS's current GPU, Neuron or Ubuntu image for the instance type."""
    subnet_ids: Sequence[str] = ()
    """Subnets to launch in (one VPC); ``()`` uses the region's default VPC, in the zones that offer the instance
    type."""
    instance_profile: str | None = None
    """An existing IAM instance profile for the nodes; ``None`` makes one per pool when S3 volumes or ``use_ssm``
    need it."""
    endpoint_resolver: EndpointResolver | None = field(default=None, compare=False, repr=False)
    """How the client reaches a node's agent; ``None``: the public address, or SSM tunnels with ``use_ssm``."""

    @property
    def ingress_cidr(self) -> str | None:
        """The network the agent port is opened to: ``client_cidr``, or ``client_address``
        as one host; None: discover it."""
        if self.client_cidr is not None:
            return self.client_cidr
        if self.client_address is not None:
            return firewall_source(parse_client_address(self.client_address, "AWS(client_address=...)"))
        return None

    def __post_init__(self) -> None:
        CloudSettings.__post_init__(self)
        if not isinstance(self.region, str) or not _REGION_RE.match(self.region):
            raise ConfigurationError(f"AWS(region={self.region!r}) is not an AWS region name such as 'us-east-1'")
        if not isinstance(self.use_ssm, bool):
            raise ConfigurationError(f"AWS(use_ssm={self.use_ssm!r}) must be True or False")
        if self.client_cidr is not None:
            warnings.warn(
                "AWS(client_cidr=...) is deprecated: give AWS(client_address=...), the client's one IPv4 address, "
                "as on every provider",
                DeprecationWarning,
                stacklevel=3,
            )
            if self.client_address is not None:
                raise ConfigurationError(
                    f"AWS(client_address={self.client_address!r}, client_cidr={self.client_cidr!r}): give one of them"
                )
            object.__setattr__(self, "client_cidr", parse_client_cidr(self.client_cidr))
        if self.ami is not None and (not isinstance(self.ami, str) or not _AMI_RE.match(self.ami)):
            raise ConfigurationError(f"AWS(ami={self.ami!r}) is not an image id such as 'ami-0123456789abcdef0'")
        if not isinstance(self.subnet_ids, list | tuple):
            raise ConfigurationError(f"AWS(subnet_ids={self.subnet_ids!r}) takes a list of subnet ids")
        subnets = tuple(self.subnet_ids)
        for subnet in subnets:
            if not isinstance(subnet, str) or not _SUBNET_RE.match(subnet):
                raise ConfigurationError(
                    f"AWS(subnet_ids=...): {subnet!r} is not a subnet id such as 'subnet-0abc1234'"
                )
        object.__setattr__(self, "subnet_ids", subnets)
        if self.instance_profile is not None and (
            not isinstance(self.instance_profile, str) or not _PROFILE_RE.match(self.instance_profile)
        ):
            raise ConfigurationError(f"AWS(instance_profile={self.instance_profile!r}) is not an instance profile name")
        if self.endpoint_resolver is not None and not callable(getattr(self.endpoint_resolver, "resolve", None)):
            raise ConfigurationError(
                f"AWS(endpoint_resolver={self.endpoint_resolver!r}) must have a resolve(instance) method "
                "(see skyward_aws.endpoints.EndpointResolver)"
            )
