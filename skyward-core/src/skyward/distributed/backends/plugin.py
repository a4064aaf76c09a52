"""The core's distributed backends as a plugin: ``jax``, ``keras`` and ``tensorflow``.

Registered like any other plugin (through the ``skyward_distributed_backends`` hook), so
``skyward.distributed.<name>`` resolves core and plugin backends the same way. Importing
this module imports no framework.
"""

from __future__ import annotations

from collections.abc import Sequence

from skyward.plugins.contributions import DistributedBackend
from skyward.plugins.hookspecs import hookimpl


@hookimpl
def skyward_distributed_backends() -> Sequence[DistributedBackend]:
    from skyward.distributed.backends.jax_backend import jax
    from skyward.distributed.backends.keras_backend import keras
    from skyward.distributed.backends.tensorflow_backend import tensorflow

    return [
        DistributedBackend(name="jax", factory=jax),
        DistributedBackend(name="keras", factory=keras),
        DistributedBackend(name="tensorflow", factory=tensorflow),
    ]
