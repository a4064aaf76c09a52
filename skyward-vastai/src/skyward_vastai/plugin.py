"""Hook implementations of skyward-vastai, loaded through the ``skyward`` entry-point group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from skyward.providers import ProviderPlugin, ProviderTools, hookimpl

if TYPE_CHECKING:  # the config class, for the record's type; the hooks import it when called
    from skyward_vastai.config import VastAI


@hookimpl
def skyward_providers() -> Sequence[ProviderPlugin[VastAI]]:
    from skyward_vastai.config import VastAI
    from skyward_vastai.driver import VastAIDriver

    return [ProviderPlugin(name="vastai", config_type=VastAI, create_driver=VastAIDriver)]


@hookimpl
def skyward_exports() -> Mapping[str, object]:
    """``skyward.VastAI``."""
    from skyward_vastai.config import VastAI

    return {"VastAI": VastAI}


@hookimpl
def skyward_provider_tools() -> Sequence[ProviderTools]:
    """``skyward ls``, ``down``, ``offers`` and ``doctor`` for VastAI."""
    from skyward_vastai.tools import TOOLS

    return [TOOLS]
