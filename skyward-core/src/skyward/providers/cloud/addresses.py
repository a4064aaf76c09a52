"""The client's public address, the only source a node's firewall admits on the agent port.

Given (``<Provider>(client_address=...)``) or discovered by asking a "what is my address"
URL once per pool. Never a wildcard: an address that would open the port to
everyone (0.0.0.0, a multicast or reserved address) is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.settings import parse_client_address

__all__ = [
    "client_address", "discover_client_address", "firewall_source", "is_loopback", "one_lookup_per_url",
    "parse_client_address",
]  # fmt: skip

# url -> the body it answered, or the OSError text of the failed request; None: no memo
_answers: ContextVar[dict[str, str | OSError] | None] = ContextVar("skyward_address_answers", default=None)


@contextmanager
def one_lookup_per_url() -> Iterator[None]:
    """Within the block, each address URL is asked once and its answer (or failure) reused.

    ``skyward doctor`` asks every configured provider for the address its firewall would
    open; each would otherwise ask the same URL again (three clouds: three lookups, and
    offline three identical failures). Only inside the block: a long-lived process (a
    notebook that moves between networks) asks afresh at every pool start.
    """
    token = _answers.set({})
    try:
        yield
    finally:
        _answers.reset(token)


def _ask(url: str, timeout: float) -> str:
    memo = _answers.get()
    if memo is not None and url in memo:
        answer = memo[url]
        if isinstance(answer, OSError):
            raise answer
        return answer
    # urllib.request brings http.client and ssl: 10-14 ms of every process that loads the
    # plugin registry with a cloud plugin installed (a Local pool's client too), for a
    # question only a cloud pool asks
    import urllib.request  # noqa: PLC0415  # see above

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # http(s): checked by the config
            body = str(response.read(256).decode("ascii", errors="replace"))
    except OSError as exc:
        if memo is not None:
            memo[url] = exc
        raise
    if memo is not None:
        memo[url] = body
    return body


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a URL's hostname) is this machine: the only place plain http may
    carry a key or token (a test double). Shared by every provider's URL check;
    here rather than in :mod:`~skyward.providers.cloud.http`, which needs requests."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def discover_client_address(url: str, timeout: float, provider: str) -> ipaddress.IPv4Address:
    """Ask ``url`` (which answers with the caller's address as plain text). ``provider`` is
    the config class's name (``"Verda"``), for the hint on how to pass the address instead."""
    try:
        body = _ask(url, timeout)
    except OSError as exc:
        raise ProvisioningError(
            f"could not discover this client's public address from {url} ({exc}); "
            f"pass it explicitly, e.g. {provider}(client_address='203.0.113.7')"
        )
    try:
        return parse_client_address(body, f"the address {url} returned")
    except ConfigurationError as exc:
        raise ProvisioningError(f"{exc}; pass client_address=... explicitly")


def client_address(given: str | None, url: str, timeout: float, provider: str) -> ipaddress.IPv4Address:
    """The configured ``client_address`` when there is one, else the one ``url`` reports."""
    if given is not None:
        return parse_client_address(given, f"{provider}(client_address=...)")
    return discover_client_address(url, timeout, provider)


def firewall_source(address: ipaddress.IPv4Address) -> str:
    """The CIDR a firewall rule admits: exactly this one host."""
    return f"{address}/32"
