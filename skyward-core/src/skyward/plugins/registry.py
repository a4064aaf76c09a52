"""Loads plugins from entry points and merges their contributions.

The core never imports a plugin by name: everything comes through the ``skyward``
entry-point group (the core's own plugin, :mod:`skyward.plugins.builtin`, included) or an
explicit ``register`` call. That keeps this module low: accelerators, the pool and the
command line all look plugins up here, and it imports none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from skyward.errors import ConfigurationError
from skyward.plugin_hints import install_command
from skyward.plugins import hookspecs
from skyward.plugins.contributions import AnyProviderPlugin, AnyVolumePlugin, DistributedBackend, ProviderPlugin

BUILTIN = "skyward.builtin"  # the core's own plugin: its entry point's name
_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None


def distribution_of(pm: pluggy.PluginManager, plugin: object) -> str:
    """The distribution (``name version``) that installed ``plugin``, or its registered
    name when it came from a ``register`` call rather than an entry point."""
    for registered, dist in pm.list_plugin_distinfo():
        if registered is plugin:
            return f"{dist.project_name} {dist.version}"
    return f"the plugin registered as {pm.get_name(plugin)!r}"


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


def worker_startup_plugins() -> list[str]:
    """The entry-point names of this process's plugins that implement
    ``skyward_worker_startup`` (a plugin registered by a ``register`` call has no entry
    point: a worker never loads it)."""
    pm = get_plugin_manager()
    from_entry_points = {id(plugin) for plugin, _ in pm.list_plugin_distinfo()}
    return sorted(
        name
        for impl in pm.hook.skyward_worker_startup.get_hookimpls()
        if id(impl.plugin) in from_entry_points and (name := pm.get_name(impl.plugin)) is not None
    )


def plugin_census() -> dict[str, list[str | bool]]:
    """This process's entry-point plugins: name -> [its distribution's version, whether it
    implements ``skyward_worker_startup``] (``worker_startup_manager``'s ``census``)."""
    pm = get_plugin_manager()
    starters = set(worker_startup_plugins())
    census: dict[str, list[str | bool]] = {}
    for plugin, dist in pm.list_plugin_distinfo():
        name = pm.get_name(plugin)
        if name is not None:
            census[name] = [str(dist.version), name in starters]
    return census


def worker_startup_manager(
    names: Sequence[str] | None, census: Mapping[str, Sequence[str | bool]] | None = None
) -> pluggy.PluginManager:
    """The plugin manager a worker calls ``skyward_worker_startup`` on.

    ``names``: only the entry points of those names, which is what the client found
    implementing the hook when the node runs the client's own interpreter and environment
    (a Local pool with no pip packages: the same plugins are installed, so the rest
    implement nothing a worker calls). Else ``census`` (``plugin_census``, the client's):
    every plugin installed on the node, except one the client has at the same version
    and found not implementing the hook (a node's environment holds the client's skyward
    and plugins, and may hold more from ``Image(pip=...)``). Neither: every plugin
    installed (``get_plugin_manager``).

    Loading every plugin imports each one and what it imports (the providers, the
    distributed backends): 0.44 s of CPU per worker with the 8 plugins of this
    repository's environment, most of a Local pool's start on this 2-core machine (a
    2-node start went from 1.65 s to 0.70 s without it, loky's taking 0.41-0.46 s); with
    skyward-core and skyward-sklearn alone, 0.11 s of a 0.25 s start with a cached
    ``Image(pip=...)``."""
    if names is None and census is None:
        return get_plugin_manager()
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if names == []:
        return pm
    for entry_point in metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP):
        if pm.get_plugin(entry_point.name) is not None:
            continue
        if names is not None:
            wanted = entry_point.name in names
        else:
            assert census is not None
            known = census.get(entry_point.name)
            version = entry_point.dist.version if entry_point.dist is not None else None
            wanted = known is None or bool(known[1]) or version != known[0]
        if wanted:
            pm.register(entry_point.load(), name=entry_point.name)
    return pm


def check_builtin(pm: pluggy.PluginManager) -> None:
    """The core's own plugin arrives through skyward-core's entry point like any other;
    without it there is no Local provider and no accelerator catalog. Its absence means
    skyward-core's installed metadata predates that entry point (or the package runs
    from a path without being installed): say so, rather than "unknown provider Local"."""
    if pm.get_plugin(BUILTIN) is None:
        raise ConfigurationError(
            f"skyward-core's own plugin (entry point {BUILTIN!r} in the {hookspecs.ENTRY_POINT_GROUP!r} group) "
            "is not installed: skyward-core's metadata is missing or stale. Install skyward-core again "
            "(pip install -e ./skyward-core in a checkout, or its wheel: pip install --find-links dist skyward-core)"
        )


def get_plugin_manager() -> pluggy.PluginManager:
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
            check_builtin(pm)
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
            f"(install a plugin to add more, e.g. {install_command('aws')})"
        )

    def accelerator_entries(self) -> list[Any]:
        return self._flat("skyward_accelerators")

    def volumes(self) -> list[AnyVolumePlugin]:
        return self._flat("skyward_volumes")

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
