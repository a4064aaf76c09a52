"""Checks of the settings providers share (grace period, bootstrap timeout, client
address) and of those every HTTP cloud provider's config has (ports, seconds, retries,
URLs), with errors that name the provider's own config class: ``Verda(api_retries=0)``.

:func:`skyward.providers.settings.check_node_settings` is the one home of the rules for
the settings every provider's nodes take; ``ProviderSettings.__post_init__`` calls it, and
it is re-exported here for configs that do not derive from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from skyward.agent.config import DEFAULT_AGENT_PORT
from skyward.errors import ConfigurationError
from skyward.providers.settings import (
    MAX_GRACE_PERIOD_S,
    MAX_SECONDS,
    ProviderSettings,
    check_node_settings,
    check_seconds_value,
)

DEFAULT_ADDRESS_URL = "https://checkip.amazonaws.com"
"""Answers a plain GET with the caller's public IPv4 address and nothing else."""

__all__ = [
    "MAX_GRACE_PERIOD_S",
    "MAX_SECONDS",
    "CloudSettings",
    "check_attempts",
    "check_cloud_settings",
    "check_flag",
    "check_node_settings",
    "check_port",
    "check_seconds",
    "check_seconds_value",
    "check_urls",
]


def check_port(provider: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigurationError(f"{provider}({name}={value!r}) must be a TCP port (1-65535)")


def _seconds(value: object, floor_ok: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    return value >= 0 if floor_ok else value > 0


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


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudSettings(ProviderSettings):
    """What every cloud on the template (``skyward.providers.cloud.CloudProvider``) has.

    agent_port:        the TCP port each node's agent listens on (CURVE-encrypted); its
                       workers take the ports right after it.
    provision_timeout: seconds to wait for every instance to be running.
    poll_interval:     seconds between status polls (one describe call for all nodes,
                       whatever their number) while instances start, and between checks
                       for spot instances the provider took away.
    address_url:       where ``client_address=None`` is discovered.
    api_timeout:       seconds one API call may take before it counts as failed.
    api_retries:       attempts per API call for rate limits (429) and, where repeating is
                       safe, server errors.
    api_backoff:       seconds of the first wait between attempts (doubling, at most 30 s)
                       when the API does not say how long to wait; 0 retries at once.
    reap:              on every pool start, delete what earlier skyward pools left behind
                       (stopped, or past their expiry label).
    """

    agent_port: int = DEFAULT_AGENT_PORT
    """The TCP port each node's agent listens on (CURVE-encrypted); its workers take the ports right after it."""
    provision_timeout: float = 900.0
    """Seconds to wait for every instance to be running."""
    poll_interval: float = 3.0
    """Seconds between status polls while instances start, and between checks for spot instances taken away."""
    address_url: str = DEFAULT_ADDRESS_URL
    """Where ``client_address=None`` is discovered."""
    api_timeout: float = 60.0
    """Seconds one API call may take before it counts as failed."""
    api_retries: int = 8
    """Attempts per API call for rate limits (429) and, where repeating is safe, server errors."""
    api_backoff: float = 0.5
    """Seconds of the first wait between attempts (doubling, at most 30 s) when the API does not say; 0 retries
    at once."""
    reap: bool = True
    """On every pool start, delete what earlier pools left behind (stopped, or past their expiry label)."""

    def __post_init__(self) -> None:
        ProviderSettings.__post_init__(self)
        check_cloud_settings(self)


def check_cloud_settings(settings: CloudSettings) -> None:
    owner = type(settings).__name__
    check_port(owner, "agent_port", settings.agent_port)
    check_seconds(owner, settings, ("provision_timeout", "poll_interval", "api_timeout"))
    if not _seconds(settings.api_backoff, floor_ok=True) or settings.api_backoff > MAX_SECONDS:
        raise ConfigurationError(
            f"{owner}(api_backoff={settings.api_backoff!r}) must be a number of seconds >= 0 (0 retries at once), "
            f"finite and at most {MAX_SECONDS:.0f}"
        )
    check_attempts(owner, "api_retries", settings.api_retries)
    check_urls(owner, settings, ("address_url",))
    check_flag(owner, "reap", settings.reap)
