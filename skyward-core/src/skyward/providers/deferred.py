"""A provider's driver, imported when a pool is about to run on it.

pluggy imports each plugin's hook module in every process that loads the plugins (every
worker on every node included), and the registry lists every provider to find the one a
pool names. A driver module is the heavy part of a provider (AWS's: ~170 modules and
~70 ms; DigitalOcean's and Verda's ~15 ms, most of it ``cryptography``), and only a pool on
that provider needs it, so a plugin names it by path and this imports it on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from typing import TypeVar

from skyward.providers.protocol import ProviderDriver

__all__ = ["deferred_driver"]

C = TypeVar("C")


def deferred_driver(config_type: type[C], module: str, name: str) -> Callable[[C], ProviderDriver]:
    """``create_driver`` for a ``ProviderPlugin[C]``: imports ``module`` and builds its class
    ``name`` with the pool's config, the first time a pool on this provider is made. A path
    that names no driver fails there with a ``TypeError`` saying which (a plugin's bug, not
    the user's configuration)."""

    def create(config: C) -> ProviderDriver:
        factory = vars(importlib.import_module(module)).get(name)
        if not callable(factory):
            raise TypeError(f"{module}.{name} is not a driver class (a {config_type.__name__} plugin names it)")
        driver = factory(config)
        if not isinstance(driver, ProviderDriver):
            raise TypeError(f"{module}.{name}({config_type.__name__}) is not a ProviderDriver")
        return driver

    create.__qualname__ = create.__name__ = f"create_{name}"
    return create


def deferred_attributes(package: str, module: str, names: Collection[str]) -> Callable[[str], object]:
    """A package's module-level ``__getattr__`` (PEP 562) that imports ``module`` the first
    time one of ``names`` is asked for. The plugin registry imports a plugin's package in
    every process that reads it (a Local pool's client too): what only some commands use
    (a reaper and the API client it brings: requests, 120 ms) waits until then."""

    def __getattr__(name: str) -> object:
        if name in names:
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
