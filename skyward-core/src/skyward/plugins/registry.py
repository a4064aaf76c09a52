"""Loads plugins from entry points and merges their contributions.

The core never imports a plugin by name: everything comes through the ``skyward``
entry-point group or an explicit ``register`` call.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from skyward.errors import ConfigurationError
from skyward.plugins import hookspecs
from skyward.plugins.contributions import (
    DistributedBackend,
    ProviderPlugin,
    TransportPlugin,
    VolumePlugin,
)

_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None

# Where the well-known public names live, so a missing plugin can say what to install.
# This is a hint table only; nothing here is imported.
KNOWN_EXTRAS: Mapping[str, str] = {
    "AWS": "aws",
    "S3Volume": "aws",
    "DigitalOcean": "digitalocean",
    "Verda": "verda",
    "torch": "torch",
    "transformers": "torch",
    "JoblibPool": "sklearn",
    "ScikitLearnPool": "sklearn",
    "joblib_backend": "sklearn",
    "sklearn_backend": "sklearn",
}


def missing_plugin_error(name: str, where: str = "skyward") -> AttributeError:
    extra = KNOWN_EXTRAS.get(name)
    if extra is None:
        return AttributeError(f"module {where!r} has no attribute {name!r}")
    return AttributeError(
        f"{where}.{name} is provided by the skyward-{extra} plugin, which is not installed. "
        f"Install it with: pip install 'skyward[{extra}]'"
    )


def get_plugin_manager() -> pluggy.PluginManager:
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            from skyward.plugins import builtin

            pm.register(builtin, name="skyward.builtin")
            pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
            _manager = pm
        return _manager


@dataclass
class Registry:
    """A merged, cached view of every plugin's contributions."""

    _cache: dict[str, Any] = field(default_factory=dict)

    @property
    def pm(self) -> pluggy.PluginManager:
        return get_plugin_manager()

    def register(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin object at run time (tests, notebooks)."""
        self.pm.register(plugin, name=name)
        self.invalidate()

    def unregister(self, plugin: object) -> None:
        self.pm.unregister(plugin)
        self.invalidate()

    def invalidate(self) -> None:
        self._cache.clear()

    def _flat(self, hook: str, *args: Any, **kwargs: Any) -> list[Any]:
        if hook not in self._cache:
            results = getattr(self.pm.hook, hook)(*args, **kwargs)
            self._cache[hook] = [item for group in results for item in group]
        return list(self._cache[hook])

    def providers(self) -> list[ProviderPlugin]:
        return self._flat("skyward_providers")

    def provider_for(self, config: object) -> ProviderPlugin:
        for plugin in self.providers():
            if isinstance(config, plugin.config_type):
                return plugin
        known = ", ".join(sorted(p.config_type.__name__ for p in self.providers()))
        raise ConfigurationError(
            f"unknown provider {config!r}: expected an instance of one of: {known} "
            "(install a plugin to add more, e.g. pip install 'skyward[aws]')"
        )

    def accelerator_entries(self) -> list[Any]:
        return self._flat("skyward_accelerators")

    def volumes(self) -> list[VolumePlugin]:
        return self._flat("skyward_volumes")

    def transports(self) -> list[TransportPlugin]:
        return self._flat("skyward_transports")

    def distributed_backends(self) -> dict[str, DistributedBackend]:
        return {b.name: b for b in self._flat("skyward_distributed_backends")}

    def exports(self) -> dict[str, object]:
        if "exports" not in self._cache:
            merged: dict[str, object] = {}
            for mapping in self.pm.hook.skyward_exports():
                merged.update(mapping)
            self._cache["exports"] = merged
        return dict(self._cache["exports"])


registry = Registry()
