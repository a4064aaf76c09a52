"""``skyward.integrations.<name>``: integrations contributed by plugins (joblib, sklearn)."""

from __future__ import annotations

import sys
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from skyward.plugins.registry import for_the_caller, missing_plugin_error, registry

    exports = registry.exports()
    if name in exports:
        return exports[name]
    where = "skyward.integrations"
    raise for_the_caller(missing_plugin_error(name, where), where, sys._getframe(1)) from None
