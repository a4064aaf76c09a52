"""Checks of the settings providers share (grace period, bootstrap timeout, client
address) and of those every HTTP cloud provider's config has (ports, seconds, retries,
URLs), with errors that name the provider's own config class: ``Verda(api_retries=0)``.

:func:`check_node_settings` is the one home of the rules for the settings every
provider's nodes take; provider configs call it from ``__post_init__``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from skyward.errors import ConfigurationError

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
        from skyward.providers.cloud.addresses import parse_client_address

        parse_client_address(client_address, f"{provider}(client_address=...)")


def check_port(provider: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigurationError(f"{provider}({name}={value!r}) must be a TCP port (1-65535)")


def check_seconds(provider: str, config: object, names: Iterable[str]) -> None:
    """Each of ``config``'s settings ``names`` must be a finite, positive number of seconds."""
    for name in names:
        check_seconds_value(provider, name, getattr(config, name))


def check_attempts(provider: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ConfigurationError(f"{provider}({name}={value!r}) must be an integer >= 1 and at most 1000")


def check_flag(provider: str, name: str, value: object) -> None:
    """A yes/no setting must be ``True`` or ``False``: ``reap="no"`` is truthy."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{provider}({name}={value!r}) must be True or False")


def check_urls(provider: str, config: object, names: Iterable[str]) -> None:
    """Each of ``config``'s settings ``names`` must be an http(s) URL (where plain http is
    allowed is the API client's call)."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise ConfigurationError(f"{provider}({name}={value!r}) must be an http(s) URL")
