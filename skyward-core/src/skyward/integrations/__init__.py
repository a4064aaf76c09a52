"""``skyward.integrations.<name>``: integrations contributed by plugins (joblib, sklearn)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from skyward.plugins.registry import missing_plugin_error, registry

    exports = registry.exports()
    if name in exports:
        return exports[name]
    raise missing_plugin_error(name, "skyward.integrations")
