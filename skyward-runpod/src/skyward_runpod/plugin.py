"""Hook implementations of skyward-runpod, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skyward.providers import ProviderPlugin, ProviderTools, hookimpl

if TYPE_CHECKING:  # the config class, for the record's type; the hooks import it when called
    from skyward_runpod.config import RunPod


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[RunPod]]:
    from skyward_runpod.config import RunPod
    from skyward_runpod.driver import RunPodDriver

    return [ProviderPlugin(name="runpod", config_type=RunPod, create_driver=RunPodDriver)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.RunPod``."""
    from skyward_runpod.config import RunPod

    return {"RunPod": RunPod}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for RunPod."""
    from skyward_runpod.tools import TOOLS

    return [TOOLS]
