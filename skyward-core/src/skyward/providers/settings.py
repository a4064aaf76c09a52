"""What every provider's configuration has, with one default each.

``ProviderSettings`` is the base of every provider config (``Local``, ``AWS``, ``Verda``,
a plugin's own): the pool reads the grace period and the bootstrap timeout from it, and
cloud drivers read the client address from it, so no caller keeps its own default.
Its fields are keyword-only, so a subclass's own fields keep their positions
(``DigitalOcean("nyc3")`` still means the region).
"""

from __future__ import annotations

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

    grace_period: float = DEFAULT_GRACE_PERIOD
    bootstrap_timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT
    client_address: str | None = None

    def __post_init__(self) -> None:
        check_settings(self)


def check_settings(settings: ProviderSettings) -> None:
    """The shared fields' checks, with errors that name the config class:
    ``Verda(grace_period=nan): ...``. Subclasses' ``__post_init__`` call this first."""
    owner = type(settings).__name__
    seconds: tuple[tuple[str, object], ...] = (
        ("grace_period", settings.grace_period),
        ("bootstrap_timeout", settings.bootstrap_timeout),
    )
    for name, value in seconds:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ConfigurationError(f"{owner}({name}={value!r}) must be a finite number of seconds > 0")
    if settings.client_address is not None:
        if not isinstance(settings.client_address, str):
            raise ConfigurationError(
                f"{owner}(client_address={settings.client_address!r}) must be an IPv4 address string such as "
                "'203.0.113.7', or None to discover it"
            )
        from skyward.providers.cloud.addresses import parse_client_address

        parse_client_address(settings.client_address, f"{owner}(client_address=...)")


DEFAULT_SETTINGS = ProviderSettings()
"""What the pool uses for a third-party config that does not derive from ProviderSettings."""


def settings_of(config: object) -> ProviderSettings:
    """``config`` itself when it is a ProviderSettings, else the defaults."""
    return config if isinstance(config, ProviderSettings) else DEFAULT_SETTINGS
