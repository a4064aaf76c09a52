"""Finding the client's public address, for the security group's one open port: the rule
every cloud provider shares (``skyward.providers.cloud.addresses``: one IPv4 host; a
failure is a ProvisioningError saying to pass ``AWS(client_address=...)``)."""

from __future__ import annotations

from collections.abc import Callable

from skyward.providers.cloud.addresses import discover_client_address, firewall_source
from skyward.providers.cloud.settings import DEFAULT_ADDRESS_URL

CHECKIP_URL = DEFAULT_ADDRESS_URL

Discover = Callable[[], str]


def discover_public_ip(url: str = CHECKIP_URL, timeout: float = 5.0) -> str:
    """This machine's public IPv4 address as ``url`` sees it, as a ``/32`` CIDR."""
    return firewall_source(discover_client_address(url, timeout, "AWS"))
