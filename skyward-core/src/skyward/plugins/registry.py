"""Loads plugins from entry points and merges their contributions.

The core never imports a plugin by name: everything comes through the ``skyward``
entry-point group or an explicit ``register`` call.
"""

from __future__ import annotations

import dis
import threading
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from skyward.errors import ConfigurationError
from skyward.plugins import hookspecs
from skyward.plugins.contributions import (
    AnyProviderPlugin,
    AnyVolumePlugin,
    DistributedBackend,
    ProviderPlugin,
    TransportPlugin,
)

BUILTIN = "skyward.builtin"  # the core's own plugin's registered name
_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None

# Where the well-known public names live, so a missing plugin can say what to install.
# This is a hint table only; nothing here is imported.
KNOWN_EXTRAS: Mapping[str, str] = {
    "AWS": "aws",
    "S3Volume": "aws",
    "DigitalOcean": "digitalocean",
    "Verda": "verda",
    "VastAI": "vastai",
    "RunPod": "runpod",
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


def for_the_caller(error: AttributeError, where: str, caller: types.FrameType) -> Exception:
    """``error`` as a module ``__getattr__`` of ``where`` should raise it to ``caller``.

    ``from skyward import AWS`` (``IMPORT_FROM``): Python would replace an AttributeError
    with a bare "cannot import name", losing the install hint, so it becomes a
    :class:`PluginMissingError` (an ImportError, which goes through). ``skyward.AWS``,
    ``getattr`` and ``hasattr`` keep the AttributeError."""
    code = caller.f_code.co_code
    if 0 <= caller.f_lasti < len(code) and dis.opname[code[caller.f_lasti]] == "IMPORT_FROM":
        from skyward.errors import PluginMissingError

        return PluginMissingError(str(error), name=where)
    return error


def distribution_of(pm: pluggy.PluginManager, plugin: object) -> str:
    """The distribution (``name version``) that installed ``plugin``, or its registered
    name when it came from a ``register`` call rather than an entry point."""
    for registered, dist in pm.list_plugin_distinfo():
        if registered is plugin:
            return f"{dist.project_name} {dist.version}"
    name = pm.get_name(plugin)
    if name == BUILTIN:
        import importlib.metadata

        return f"skyward-core {importlib.metadata.version('skyward-core')}"
    return f"the plugin registered as {name!r}"


def check_hooks(pm: pluggy.PluginManager) -> None:
    """Every hook implementation must match a hook specification: a misspelled hook
    (``skyward_provider`` for ``skyward_providers``) would otherwise be silently never
    called. Raises ConfigurationError naming the hook and the distribution."""
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as error:
        known = ", ".join(sorted(name for name in vars(pm.hook) if not name.startswith("_")))
        raise ConfigurationError(
            f"{distribution_of(pm, error.plugin)}: {error}; skyward's hooks are: {known}"
        ) from error


def get_plugin_manager() -> pluggy.PluginManager:
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            from skyward.plugins import builtin

            pm.register(builtin, name=BUILTIN)
            pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
            check_hooks(pm)
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
        """Register a plugin object at run time (tests, notebooks); a hook it implements
        that no specification names is refused (and the plugin not kept)."""
        pm = self.pm
        pm.register(plugin, name=name)
        try:
            check_hooks(pm)
        except ConfigurationError:
            pm.unregister(plugin)
            raise
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

    def providers(self) -> list[AnyProviderPlugin]:
        """Every provider; two plugins that register the same provider name are refused,
        naming both distributions (which of them would win is not knowable to the user)."""
        if "skyward_providers" not in self._cache:
            pm = self.pm
            owners: dict[str, object] = {}
            merged: list[AnyProviderPlugin] = []
            for impl in reversed(pm.hook.skyward_providers.get_hookimpls()):  # registration order
                contributed = impl.function()
                if not isinstance(contributed, Sequence) or not all(isinstance(p, ProviderPlugin) for p in contributed):
                    raise ConfigurationError(
                        f"{distribution_of(pm, impl.plugin)}: skyward_providers must return a list of ProviderPlugin, "
                        f"got {contributed!r}"
                    )
                for provider in contributed:
                    if provider.name in owners:
                        first, second = distribution_of(pm, owners[provider.name]), distribution_of(pm, impl.plugin)
                        raise ConfigurationError(
                            f"two plugins register the provider {provider.name!r}: {first} and {second}; "
                            "uninstall one of them"
                        )
                    owners[provider.name] = impl.plugin
                    merged.append(provider)
            self._cache["skyward_providers"] = merged
        return list(self._cache["skyward_providers"])

    def provider_for(self, config: object) -> AnyProviderPlugin:
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

    def volumes(self) -> list[AnyVolumePlugin]:
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
