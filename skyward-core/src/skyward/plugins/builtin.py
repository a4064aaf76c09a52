"""The core's own plugin: the Local provider, sky.Volume, the core accelerator catalog (NVIDIA, AWS
silicon, Google TPUs, AMD) and the jax, keras and tensorflow distributed backends.

It is registered like any other plugin, through the ``skyward`` entry-point group
(skyward-core's pyproject names it ``skyward.builtin``), so the core uses the same hooks a
third party would, and the registry, which every layer looks plugins up in, imports no
provider. Its hooks run last (``trylast``), as they did when the registry registered it
first: a plugin's catalog entries win over the core's for the same accelerator.
"""

from __future__ import annotations

from collections.abc import Sequence

from skyward.accelerators.catalog import CatalogEntry
from skyward.accelerators.vendors import CORE_ENTRIES
from skyward.distributed.backends.jax_backend import jax
from skyward.distributed.backends.keras_backend import keras
from skyward.distributed.backends.tensorflow_backend import tensorflow
from skyward.plugins.contributions import DistributedBackend, ProviderPlugin, VolumePlugin
from skyward.plugins.hookspecs import hookimpl
from skyward.providers.local import Local, LocalDriver
from skyward.providers.local_tools import TOOLS as LOCAL_TOOLS
from skyward.providers.resources import ProviderTools
from skyward.volume import Volume, install_script


@hookimpl(trylast=True)
def skyward_providers() -> Sequence[ProviderPlugin[Local]]:
    return [ProviderPlugin(name="local", config_type=Local, create_driver=LocalDriver)]


@hookimpl(trylast=True)
def skyward_provider_tools() -> Sequence[ProviderTools]:
    return [LOCAL_TOOLS]


@hookimpl(trylast=True)
def skyward_volumes() -> Sequence[VolumePlugin[Volume]]:
    # a bucket of any S3-compatible store on every provider; its bootstrap step installs
    # rclone, and the node's agent mounts once the keys arrive (skyward.volume)
    return [VolumePlugin(name="bucket", volume_type=Volume, mount_script=install_script)]


@hookimpl(trylast=True)
def skyward_accelerators() -> Sequence[CatalogEntry]:
    return CORE_ENTRIES


@hookimpl(trylast=True)
def skyward_distributed_backends() -> Sequence[DistributedBackend]:
    # Importing the backend modules imports no framework: each imports its own on the
    # node, when a wrapped function runs.
    return [
        DistributedBackend(name="jax", factory=jax),
        DistributedBackend(name="keras", factory=keras),
        DistributedBackend(name="tensorflow", factory=tensorflow),
    ]
