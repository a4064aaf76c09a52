"""Skyward: ephemeral accelerator compute with one decorator.

Public names are resolved lazily: importing ``skyward`` stays cheap (it runs in every
worker process), and names contributed by plugins (``skyward.AWS``) come from the
plugin registry, with a clear error naming the extra to install when one is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_CORE_EXPORTS: dict[str, str] = {
    # programming model
    "compute": "skyward.api.compute",
    "ComputeFunction": "skyward.api.compute",
    "PendingCompute": "skyward.api.compute",
    "PendingBatch": "skyward.api.compute",
    "gather": "skyward.api.compute",
    "ComputePool": "skyward.api.pool",
    "MultiPool": "skyward.api.multipool",
    "Image": "skyward.image",
    "Local": "skyward.providers.local",
    # worker-side helpers
    "instance_info": "skyward.runtime.context",
    "InstanceInfo": "skyward.runtime.context",
    "current_accelerator": "skyward.runtime.context",
    "shard": "skyward.sharding",
    "DistributedSampler": "skyward.sampler",
    # accelerators, spot, selection
    "Accelerator": "skyward.accelerators",
    "NVIDIA": "skyward.accelerators",
    "is_nvidia": "skyward.accelerators",
    "is_trainium": "skyward.accelerators",
    "Spot": "skyward.spot",
    "SpotLike": "skyward.spot",
    "InstanceType": "skyward.instances",
    "select_instance": "skyward.instances",
    # events and callbacks
    "compose": "skyward.callbacks",
    "emit": "skyward.callbacks",
    "use_callback": "skyward.callbacks",
    "Callback": "skyward.callbacks",
    # errors
    "SkywardError": "skyward.errors",
    "ConfigurationError": "skyward.errors",
    "ProvisioningError": "skyward.errors",
    "VersionMismatchError": "skyward.errors",
    "WorkerDiedError": "skyward.errors",
    "PoolClosedError": "skyward.errors",
    "PoolTimeoutError": "skyward.errors",
    "NotInComputationError": "skyward.errors",
    "RemoteError": "skyward.errors",
}

_EVENT_NAMES = (
    "SkywardEvent InfraCreating InfraCreated InstanceLaunching InstanceProvisioned "
    "BootstrapStarting BootstrapProgress BootstrapCompleted PoolStarted LogLine Metrics "
    "PoolStopping InstanceStopping CostUpdate CostFinal Error TaskProgress InstanceInterrupted Notice "
    "ProviderName"
).split()
_CORE_EXPORTS.update({name: "skyward.events" for name in _EVENT_NAMES})

_SUBMODULES = {"distributed", "integrations", "accelerators"}

if TYPE_CHECKING:
    from skyward.api.compute import (
        ComputeFunction,
        PendingBatch,
        PendingCompute,
        compute,
        gather,
    )
    from skyward.api.pool import ComputePool
    from skyward.errors import (
        ConfigurationError,
        NotInComputationError,
        PoolClosedError,
        PoolTimeoutError,
        ProvisioningError,
        RemoteError,
        SkywardError,
        VersionMismatchError,
        WorkerDiedError,
    )
    from skyward.image import Image
    from skyward.providers.local import Local
    from skyward.runtime.context import InstanceInfo, current_accelerator, instance_info


def __getattr__(name: str) -> Any:
    module_name = _CORE_EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"skyward.{name}")
    from skyward.plugins.registry import missing_plugin_error, registry

    exports = registry.exports()
    if name in exports:
        return exports[name]
    raise missing_plugin_error(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_CORE_EXPORTS})


__all__ = sorted(_CORE_EXPORTS)  # noqa: PLE0605
