"""``skyward.distributed.<name>(...)``: wrappers that set up a framework's process group.

Backends come from plugins through the ``skyward_distributed_backends`` hook
(``skyward-torch`` adds ``torch`` and ``transformers``), so this module holds no
framework code itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skyward.plugin_hints import install_hint, missing_plugin_error
from skyward.plugins.registry import registry

if TYPE_CHECKING:
    # For type checkers only: at run time every name resolves through the registry below
    # (a plugin may be missing, or replaced by a third party's backend of the same name).
    # skyward-torch's two are declared by their signature: core never imports a plugin.
    from skyward.distributed.backends.base import TorchBackendFactory
    from skyward.distributed.backends.jax_backend import jax as jax
    from skyward.distributed.backends.keras_backend import keras as keras
    from skyward.distributed.backends.tensorflow_backend import tensorflow as tensorflow

    torch: TorchBackendFactory
    transformers: TorchBackendFactory


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    backend = registry.distributed_backends().get(name)
    if backend is None:
        available = ", ".join(sorted(registry.distributed_backends())) or "none installed"
        if install_hint(name, "skyward.distributed") is not None:
            raise missing_plugin_error(name, "skyward.distributed", importing=False) from None
        raise AttributeError(
            f"skyward.distributed has no backend {name!r} (available: {available}); "
            "a plugin can add one through the skyward_distributed_backends hook"
        )
    return backend.factory
