"""Skyward: ephemeral accelerator compute with one decorator.

Public names are resolved lazily: importing ``skyward`` stays cheap (it runs in every
worker process), and names contributed by plugins (``skyward.AWS``) come from the
plugin registry, with a clear error naming the extra to install when one is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skyward.plugin_hints import install_finder, missing_plugin_error
from skyward.version import __version__ as __version__

# public name -> module that defines it
_CORE_EXPORTS: dict[str, str] = {
    # programming model
    "compute": "skyward.api.compute",
    "ComputeFunction": "skyward.api.compute",
    "PendingCompute": "skyward.api.compute",
    "PendingBatch": "skyward.api.compute",
    "gather": "skyward.api.compute",
    "ComputePool": "skyward.api.pool",
    "attach": "skyward.api.pool",
    "MultiPool": "skyward.api.multipool",
    "Spec": "skyward.api.failover",
    "offers": "skyward.offer_table",
    "Offer": "skyward.offer_table",
    "OfferTable": "skyward.offer_table",
    "Image": "skyward.image",
    "Secret": "skyward.secrets",
    "Volume": "skyward.volume",
    "Nodes": "skyward.scaling",
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
    "AttachError": "skyward.errors",
    "VolumeError": "skyward.errors",
    "NotInComputationError": "skyward.errors",
    "RemoteError": "skyward.errors",
    "PluginMissingError": "skyward.errors",
    "NodeLostError": "skyward.errors",
    "RemoteExitError": "skyward.errors",
    "UnreadableResultError": "skyward.errors",
    "AbandonedError": "skyward.errors",
    "UnavailableError": "skyward.errors",
    "CapacityError": "skyward.errors",
    "QuotaError": "skyward.errors",
    "NoOfferError": "skyward.errors",
    "PriceCapError": "skyward.errors",
    "LaunchTimeoutError": "skyward.errors",
    "BootstrapTimeoutError": "skyward.errors",
    "NoCandidateError": "skyward.errors",
}

_EVENT_NAMES = [
    "SkywardEvent",
    "InfraCreating",
    "InfraCreated",
    "InstanceLaunching",
    "InstanceProvisioned",
    "CandidateFailed",
    "BootstrapStarting",
    "BootstrapProgress",
    "BootstrapCompleted",
    "PoolStarted",
    "LogLine",
    "Metrics",
    "PoolStopping",
    "InstanceStopping",
    "CostUpdate",
    "CostFinal",
    "Error",
    "TaskProgress",
    "InstanceInterrupted",
    "Notice",
    "NodeAdded",
    "NodeRemoved",
    "PoolResized",
    "ProviderName",
]
_CORE_EXPORTS.update({name: "skyward.events" for name in _EVENT_NAMES})

_SUBMODULES = {"distributed", "integrations", "accelerators", "storage"}

if TYPE_CHECKING:  # explicit re-exports, so type checkers see every public name
    from skyward import accelerators as accelerators
    from skyward import distributed as distributed
    from skyward import integrations as integrations
    from skyward import storage as storage
    from skyward.accelerators import (
        NVIDIA as NVIDIA,
    )
    from skyward.accelerators import (
        Accelerator as Accelerator,
    )
    from skyward.accelerators import (
        is_nvidia as is_nvidia,
    )
    from skyward.accelerators import (
        is_trainium as is_trainium,
    )
    from skyward.api.compute import (
        ComputeFunction as ComputeFunction,
    )
    from skyward.api.compute import (
        PendingBatch as PendingBatch,
    )
    from skyward.api.compute import (
        PendingCompute as PendingCompute,
    )
    from skyward.api.compute import (
        compute as compute,
    )
    from skyward.api.compute import (
        gather as gather,
    )
    from skyward.api.failover import Spec as Spec
    from skyward.api.multipool import (
        MultiPool as MultiPool,
    )
    from skyward.api.pool import (
        ComputePool as ComputePool,
    )
    from skyward.api.pool import attach as attach
    from skyward.callbacks import (
        Callback as Callback,
    )
    from skyward.callbacks import (
        compose as compose,
    )
    from skyward.callbacks import (
        emit as emit,
    )
    from skyward.callbacks import (
        use_callback as use_callback,
    )
    from skyward.errors import AttachError as AttachError
    from skyward.errors import BootstrapTimeoutError as BootstrapTimeoutError
    from skyward.errors import CapacityError as CapacityError
    from skyward.errors import (
        ConfigurationError as ConfigurationError,
    )
    from skyward.errors import LaunchTimeoutError as LaunchTimeoutError
    from skyward.errors import NoCandidateError as NoCandidateError
    from skyward.errors import NoOfferError as NoOfferError
    from skyward.errors import (
        NotInComputationError as NotInComputationError,
    )
    from skyward.errors import (
        PluginMissingError as PluginMissingError,
    )
    from skyward.errors import (
        PoolClosedError as PoolClosedError,
    )
    from skyward.errors import (
        PoolTimeoutError as PoolTimeoutError,
    )
    from skyward.errors import PriceCapError as PriceCapError
    from skyward.errors import (
        ProvisioningError as ProvisioningError,
    )
    from skyward.errors import QuotaError as QuotaError
    from skyward.errors import (
        RemoteError as RemoteError,
    )
    from skyward.errors import (
        SkywardError as SkywardError,
    )
    from skyward.errors import UnavailableError as UnavailableError
    from skyward.errors import (
        VersionMismatchError as VersionMismatchError,
    )
    from skyward.errors import VolumeError as VolumeError
    from skyward.errors import (
        WorkerDiedError as WorkerDiedError,
    )
    from skyward.events import (
        BootstrapCompleted as BootstrapCompleted,
    )
    from skyward.events import (
        BootstrapProgress as BootstrapProgress,
    )
    from skyward.events import (
        BootstrapStarting as BootstrapStarting,
    )
    from skyward.events import CandidateFailed as CandidateFailed
    from skyward.events import (
        CostFinal as CostFinal,
    )
    from skyward.events import (
        CostUpdate as CostUpdate,
    )
    from skyward.events import (
        Error as Error,
    )
    from skyward.events import (
        InfraCreated as InfraCreated,
    )
    from skyward.events import (
        InfraCreating as InfraCreating,
    )
    from skyward.events import (
        InstanceInterrupted as InstanceInterrupted,
    )
    from skyward.events import (
        InstanceLaunching as InstanceLaunching,
    )
    from skyward.events import (
        InstanceProvisioned as InstanceProvisioned,
    )
    from skyward.events import (
        InstanceStopping as InstanceStopping,
    )
    from skyward.events import (
        LogLine as LogLine,
    )
    from skyward.events import (
        Metrics as Metrics,
    )
    from skyward.events import NodeAdded as NodeAdded
    from skyward.events import NodeRemoved as NodeRemoved
    from skyward.events import (
        Notice as Notice,
    )
    from skyward.events import PoolResized as PoolResized
    from skyward.events import (
        PoolStarted as PoolStarted,
    )
    from skyward.events import (
        PoolStopping as PoolStopping,
    )
    from skyward.events import (
        ProviderName as ProviderName,
    )
    from skyward.events import (
        SkywardEvent as SkywardEvent,
    )
    from skyward.events import (
        TaskProgress as TaskProgress,
    )
    from skyward.image import (
        Image as Image,
    )
    from skyward.instances import (
        InstanceType as InstanceType,
    )
    from skyward.instances import (
        select_instance as select_instance,
    )
    from skyward.offer_table import Offer as Offer
    from skyward.offer_table import OfferTable as OfferTable
    from skyward.offer_table import offers as offers
    from skyward.providers.local import (
        Local as Local,
    )
    from skyward.runtime.context import (
        InstanceInfo as InstanceInfo,
    )
    from skyward.runtime.context import (
        current_accelerator as current_accelerator,
    )
    from skyward.runtime.context import (
        instance_info as instance_info,
    )
    from skyward.sampler import (
        DistributedSampler as DistributedSampler,
    )
    from skyward.scaling import Nodes as Nodes
    from skyward.secrets import Secret as Secret
    from skyward.sharding import (
        shard as shard,
    )
    from skyward.spot import (
        Spot as Spot,
    )
    from skyward.spot import (
        SpotLike as SpotLike,
    )
    from skyward.volume import Volume as Volume


def __getattr__(name: str) -> Any:
    module_name = _CORE_EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"skyward.{name}")
    # The first name a plugin provides loads pluggy and the entry points (about 28 ms);
    # `import skyward` itself does not (every worker process runs it).
    from skyward.plugins.registry import registry  # noqa: PLC0415  # defers pluggy

    exports = registry.exports()
    if name in exports:
        return exports[name]
    raise missing_plugin_error(name, importing=False) from None


def __dir__() -> list[str]:
    return sorted({*globals(), *_CORE_EXPORTS})


install_finder()  # `from skyward import AWS` without skyward-aws says what to install

__all__ = sorted(_CORE_EXPORTS)  # noqa: PLE0605
