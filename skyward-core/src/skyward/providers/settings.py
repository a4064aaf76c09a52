"""What every provider's configuration has, with one default each.

``ProviderSettings`` is the base of every provider config (``Local``, ``AWS``, ``Verda``,
a plugin's own): the pool reads the grace period and the bootstrap timeout from it, and
cloud drivers read the client address from it, so no caller keeps its own default.
Its fields are keyword-only, so a subclass's own fields keep their positions
(``DigitalOcean("nyc3")`` still means the region).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import ClassVar

from skyward.errors import ConfigurationError

NODE_TTL_MARGIN = 60.0
"""Seconds a node may outlive its pool's timeout (plus shutdown): its own TTL is the
pool's timeout plus this. Expiry labels and reapers count with it."""

DEFAULT_GRACE_PERIOD = 30.0
"""Seconds an agent keeps running without hearing from its client (the client pings every
second, so 30 missed pings: a laptop that sleeps, not a lost packet)."""

DEFAULT_BOOTSTRAP_TIMEOUT = 900.0
"""Seconds to wait for every agent, environment build included: the value AWS, DigitalOcean
and Verda each had (building a GPU image's environment is the slow part). Local had 600 s;
one default for all means a failing local bootstrap is given up on later, never sooner."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSettings:
    """The settings every provider has.

    grace_period:      seconds a node's agent keeps running without hearing from the
                       client before it exits (and a cloud node shuts itself down).
    bootstrap_timeout: seconds to wait for every node's agent to answer, environment
                       build included, before the pool gives up and removes everything.
    client_address:    the public IPv4 address the client connects from; a cloud
                       provider's firewall admits the node ports from it only. ``None``:
                       discovered when the pool starts (providers that open no port to
                       the outside ignore it).

    ``third_party_hosts`` is True for providers whose nodes run on hosts the user does not
    control (marketplaces): results from them are decoded with an allow-list unpickler.
    """

    third_party_hosts: ClassVar[bool] = False
    """True for providers whose nodes run on hosts the user does not control (marketplaces): results from them
    are decoded with an allow-list unpickler."""

    grace_period: float = DEFAULT_GRACE_PERIOD
    """Seconds a node's agent keeps running without hearing from the client before it exits (and a cloud node
    shuts itself down)."""
    bootstrap_timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT
    """Seconds to wait for every node's agent to answer, environment build included, before the pool gives up and
    removes everything."""
    client_address: str | None = None
    """The public IPv4 address the client connects from, which a cloud's firewall admits alone; ``None``:
    discovered when the pool starts."""

    def __post_init__(self) -> None:
        check_settings(self)


MAX_SECONDS = 30 * 24 * 3600.0
"""The largest number of seconds any setting takes (30 days). Past it a value is a typo
or ``inf`` in disguise: ``1e30`` seconds overflows timers and never fires."""

MAX_GRACE_PERIOD_S = 24 * 3600.0
"""An agent that has not heard from its client for a day is never coming back."""


def check_seconds_value(provider: str, name: str, value: object, *, upper: float = MAX_SECONDS) -> float:
    """``value`` as a float of seconds in ``(0, upper]``; ``nan`` and ``inf`` are refused."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= upper
    ):
        raise ConfigurationError(
            f"{provider}({name}={value!r}) must be a positive number of seconds, finite and at most {upper:.0f}"
        )
    return float(value)


def check_node_settings(
    provider: str,
    *,
    grace_period: object,
    bootstrap_timeout: object,
    client_address: object = None,
) -> None:
    """The settings every provider's nodes take, checked the same way for all of them.

    grace_period:      seconds an agent waits for a silent client, in (0, 86400]
                       (``nan`` would make an agent that never exits).
    bootstrap_timeout: seconds to wait for the agents, in (0, 30 days].
    client_address:    ``None`` (discovered) or one IPv4 host address as a string
                       (``1`` is not ``0.0.0.1``).
    """
    check_seconds_value(provider, "grace_period", grace_period, upper=MAX_GRACE_PERIOD_S)
    check_seconds_value(provider, "bootstrap_timeout", bootstrap_timeout)
    if client_address is not None:
        if not isinstance(client_address, str):
            raise ConfigurationError(
                f"{provider}(client_address={client_address!r}) must be an IPv4 address string such as "
                "'203.0.113.7', or None to discover it"
            )
        parse_client_address(client_address, f"{provider}(client_address=...)")


def parse_client_address(value: object, what: str) -> ipaddress.IPv4Address:
    """``value`` as one IPv4 host address (here, with the settings that check it; the cloud
    template's address discovery reads it too); a ConfigurationError naming ``what`` otherwise.

    IPv4 only: nodes are reached at their public IPv4 address, so the client's traffic to
    them leaves from its IPv4 address. Only text is read: ``ipaddress`` would take the
    integer ``1`` as ``0.0.0.1``.
    """
    if not isinstance(value, str):
        raise ConfigurationError(f"{what}: {value!r} is not an IP address; give the client's public IPv4 address")
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        raise ConfigurationError(f"{what}: {value!r} is not an IP address; give the client's public IPv4 address")
    if not isinstance(address, ipaddress.IPv4Address):
        raise ConfigurationError(
            f"{what}: {value!r} is an IPv6 address; nodes are reached over IPv4, give the client's public IPv4 address"
        )
    if address.is_unspecified or address.is_multicast or address.is_reserved or address.is_link_local:
        raise ConfigurationError(
            f"{what}: {value!r} cannot be a client address (it would not limit who reaches the agent port); "
            "give the client's public IPv4 address"
        )
    return address


def check_settings(settings: ProviderSettings) -> None:
    """The shared fields' checks, with errors that name the config class:
    ``Verda(grace_period=nan): ...``. Subclasses' ``__post_init__`` call this first."""
    check_node_settings(
        type(settings).__name__,
        grace_period=settings.grace_period,
        bootstrap_timeout=settings.bootstrap_timeout,
        client_address=settings.client_address,
    )


DEFAULT_SETTINGS = ProviderSettings()
"""What the pool uses for a third-party config that does not derive from ProviderSettings."""


def settings_of(config: object) -> ProviderSettings:
    """``config`` itself when it is a ProviderSettings, else the defaults."""
    return config if isinstance(config, ProviderSettings) else DEFAULT_SETTINGS


def third_party_hosts(provider: object) -> bool:
    """Whether the provider's hosts are run by third parties (marketplace clouds), which
    makes safe mode its default. The one place that decides it: it reads the provider
    settings' ``third_party_hosts`` class attribute (a config that does not derive from
    ProviderSettings gets the defaults: False)."""
    return settings_of(provider).third_party_hosts
