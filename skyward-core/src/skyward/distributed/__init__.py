"""``skyward.distributed.<name>(...)``: wrappers that set up a framework's process group.

Backends come from plugins through the ``skyward_distributed_backends`` hook
(``skyward-torch`` adds ``torch`` and ``transformers``), so this module holds no
framework code itself.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # For type checkers only: at run time every name resolves through the registry below
    # (a plugin may be missing, or replaced by a third party's backend of the same name).
    from skyward.distributed.backends.jax_backend import jax as jax
    from skyward.distributed.backends.keras_backend import keras as keras
    from skyward.distributed.backends.tensorflow_backend import tensorflow as tensorflow
    from skyward_torch.torch_backend import torch as torch
    from skyward_torch.transformers_backend import transformers as transformers


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from skyward.plugins.registry import for_the_caller, missing_plugin_error, registry

    backend = registry.distributed_backends().get(name)
    if backend is None:
        available = ", ".join(sorted(registry.distributed_backends())) or "none installed"
        error = missing_plugin_error(name, "skyward.distributed")
        if "plugin" not in str(error):
            error = AttributeError(
                f"skyward.distributed has no backend {name!r} (available: {available}); "
                "a plugin can add one through the skyward_distributed_backends hook"
            )
        raise for_the_caller(error, "skyward.distributed", sys._getframe(1)) from None
    return backend.factory
