"""Hook implementations of skyward-sklearn, loaded through the ``skyward`` entry-point group.

Every worker process loads this module (the plugin manager loads all plugins), so it
imports nothing heavy: joblib is imported only when a backend is entered.
"""

from __future__ import annotations

from collections.abc import Mapping

from skyward.plugins.hookspecs import hookimpl


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.integrations.JoblibPool`` and friends."""
    # Deferred: pools imports ComputePool and joblib, and every worker loads this plugin.
    from skyward_sklearn.pools import (  # noqa: PLC0415  # heavy
        JoblibPool,
        ScikitLearnPool,
        joblib_backend,
        sklearn_backend,
    )

    return {
        "JoblibPool": JoblibPool,
        "ScikitLearnPool": ScikitLearnPool,
        "joblib_backend": joblib_backend,
        "sklearn_backend": sklearn_backend,
    }
