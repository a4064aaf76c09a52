"""Finding the client's public address, for the security group's one open port."""

from __future__ import annotations

import ipaddress
import urllib.request
from collections.abc import Callable

from skyward.errors import ConfigurationError

CHECKIP_URL = "https://checkip.amazonaws.com"

Discover = Callable[[], str]


def discover_public_ip(url: str = CHECKIP_URL, timeout: float = 5.0) -> str:
    """This machine's public IPv4 address as AWS sees it, as a ``/32`` CIDR."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            text = response.read(64).decode().strip()
        address = ipaddress.ip_address(text)
    except (OSError, ValueError) as error:
        raise ConfigurationError(
            f"could not discover this machine's public IP address from {url} ({error}); "
            "pass it yourself: AWS(client_cidr='203.0.113.7') (the agent port is opened to that address only)"
        )
    if not address.is_global:
        raise ConfigurationError(
            f"{url} answered {address}, which is not a public address; pass AWS(client_cidr=...) yourself"
        )
    return f"{address}/{address.max_prefixlen}"
