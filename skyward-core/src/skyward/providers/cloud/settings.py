"""Checks of the settings every HTTP cloud provider's config has (ports, seconds, retries,
URLs), with errors that name the provider's own config class: ``Verda(api_retries=0)``."""

from __future__ import annotations

from collections.abc import Iterable

from skyward.errors import ConfigurationError


def check_port(provider: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigurationError(f"{provider}({name}={value!r}) must be a TCP port (1-65535)")


def check_seconds(provider: str, config: object, names: Iterable[str]) -> None:
    """Each of ``config``'s settings ``names`` must be a positive number of seconds."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigurationError(f"{provider}({name}={value!r}) must be a positive number of seconds")


def check_attempts(provider: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{provider}({name}={value!r}) must be an integer >= 1")


def check_urls(provider: str, config: object, names: Iterable[str]) -> None:
    """Each of ``config``'s settings ``names`` must be an http(s) URL (where plain http is
    allowed is the API client's call)."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise ConfigurationError(f"{provider}({name}={value!r}) must be an http(s) URL")
