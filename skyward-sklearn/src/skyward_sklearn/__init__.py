"""skyward-sklearn: joblib and scikit-learn on a pool.

``joblib_backend(pool)`` / ``sklearn_backend(pool)`` run joblib's ``Parallel`` (and so
scikit-learn's ``n_jobs``) on an existing pool's workers; ``JoblibPool(...)`` /
``ScikitLearnPool(...)`` make a pool that does so inside its ``with`` block. The joblib
backend itself is registered under the name ``"skyward"``.

The names load lazily: every worker process imports this package (the plugin manager
loads ``skyward_sklearn.plugin``), and most never need the pools.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skyward_sklearn.pools import JoblibPool, ScikitLearnPool, joblib_backend, sklearn_backend

__all__ = ["JoblibPool", "ScikitLearnPool", "joblib_backend", "sklearn_backend"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("skyward_sklearn.pools"), name)
    raise AttributeError(f"module 'skyward_sklearn' has no attribute {name!r}")
