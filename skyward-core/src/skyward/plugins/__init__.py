"""The plugin host: pluggy hook specifications and the registry that loads plugins."""

from skyward.plugins.hookspecs import hookimpl, hookspec
from skyward.plugins.registry import get_plugin_manager, registry

__all__ = ["get_plugin_manager", "hookimpl", "hookspec", "registry"]
