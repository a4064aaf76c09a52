"""``skyward.integrations.<name>``: integrations contributed by plugins (joblib, sklearn)."""

from __future__ import annotations

from typing import Any

from skyward.plugin_hints import missing_plugin_error
from skyward.plugins.registry import registry


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    exports = registry.exports()
    if name in exports:
        return exports[name]
    raise missing_plugin_error(name, "skyward.integrations", importing=False) from None
