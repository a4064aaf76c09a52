"""Hook specifications every Skyward plugin may implement.

A plugin is a module (or object) registered under the ``skyward`` entry-point group.
Each hook returns plain values (frozen dataclasses) so the core can merge what all
plugins contribute without knowing any plugin by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from skyward.image import Image
    from skyward.plugins.contributions import (
        AnyProviderPlugin,
        AnyVolumePlugin,
        BootstrapStep,
        DistributedBackend,
    )
    from skyward.providers.resources import ProviderTools
    from skyward.runtime.context import InstanceInfo

PROJECT = "skyward"
ENTRY_POINT_GROUP = "skyward"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""The decorator a plugin marks its hook functions with (``@hookimpl``)."""


@hookspec
def skyward_providers() -> Sequence[AnyProviderPlugin]:  # type: ignore[empty-body]
    """Provider configuration classes and the factories that drive them."""


@hookspec
def skyward_accelerators() -> Sequence[Any]:  # type: ignore[empty-body]
    """Accelerator catalog entries (``skyward.accelerators.CatalogEntry``)."""


@hookspec
def skyward_volumes() -> Sequence[AnyVolumePlugin]:  # type: ignore[empty-body]
    """Volume types and the bootstrap steps that mount them."""


@hookspec
def skyward_distributed_backends() -> Sequence[DistributedBackend]:  # type: ignore[empty-body]
    """``skyward.distributed.<name>`` wrappers (torch, jax, keras, ...)."""


@hookspec
def skyward_exports() -> Mapping[str, object]:  # type: ignore[empty-body]
    """Public names the plugin adds to the ``skyward`` namespace (``AWS``, ``S3Volume``)."""


@hookspec
def skyward_bootstrap_steps(image: Image) -> Sequence[BootstrapStep]:  # type: ignore[empty-body]
    """Extra shell steps for an image's bootstrap script, run before the agent starts."""


@hookspec
def skyward_worker_startup(info: InstanceInfo) -> None:
    """Runs inside each worker process before its first task."""


@hookspec
def skyward_provider_tools() -> Sequence[ProviderTools]:  # type: ignore[empty-body]
    """A provider's part of the ``skyward`` command: list and delete what its pools left,
    check its credentials, and (optionally) list its offers and the client address its
    firewall opens. See :mod:`skyward.providers.resources`."""
